"""Planning an event-time interval join: two tables, a key equality and a time bound each way.

    CREATE VIEW paid AS
    SELECT o.id, p.amount FROM orders AS o JOIN payments AS p
      ON o.id = p.order_id
     AND p.pay_time BETWEEN o.order_time AND o.order_time + INTERVAL '1' HOUR

is an *interval join* (`chronolake.runtime.interval_operator`): INNER, LEFT, RIGHT or
FULL [OUTER] JOIN with the bounds in ON, or `FROM a, b WHERE ...` (inner). As Flink's
`IntervalJoinUtil` reads it, the condition's conjuncts that compare the two tables'
rowtime attributes (`WATERMARK FOR`), one on each side of `<`, `<=`, `>`, `>=` or `=`
(BETWEEN is two of them), each attribute plus or minus constant intervals, are the
time bounds: exactly one lower and one upper bound, or one equality. They reduce to
`left.t BETWEEN right.t + lower AND right.t + upper` in milliseconds (a strict `<`
or `>` moves its bound by 1 ms). The other conjuncts stay the join condition, run
in Spark SQL as written; at least one must be an equality between the two tables.
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field
from sqlglot import exp

from chronolake.errors import DefinitionError, UnknownNameError
from chronolake.schema import StartupMode, TableSpec, ViewSpec
from chronolake.schema.dialect import canonical_sql, spark_sql
from chronolake.schema.intervals import interval_millis, whole_millis
from chronolake.schema.join_kind import JoinKind
from chronolake.sql._names import relation_name
from chronolake.sql.query import parse_query

Spec = TableSpec | ViewSpec

ROW_ID = "__ij_id"
"""A row's identity in a run: (commit version, position) of its input."""
ROW_MS = "__ij_ms"
"""A row's rowtime in epoch milliseconds."""
LEFT_ID, RIGHT_ID, KEEP = "__ij_lid", "__ij_rid", "__ij_keep"
"""The joined row's left and right identities; whether it passes an outer join's WHERE."""
SIGN = "__ij_sign"
"""A row's sign: 1 for an addition (+I/+U), -1 for a retraction (-U/-D); a joined row's is
the product of its two rows' (a retraction's pairs retract, as in Flink's retract streams)."""
INTERNAL_PREFIX = "__ij_"

_COMPARISONS = (exp.GT, exp.GTE, exp.LT, exp.LTE, exp.EQ)
_MIRRORED: dict[type[exp.Expr], type[exp.Expr]] = {
    exp.GT: exp.LT, exp.GTE: exp.LTE, exp.LT: exp.GT, exp.LTE: exp.GTE, exp.EQ: exp.EQ,
}
_EXAMPLE = "a.t BETWEEN b.t - INTERVAL '5' SECOND AND b.t + INTERVAL '6' SECOND"


class IntervalJoinPlan(BaseModel):
    """A validated interval join: `left.t BETWEEN right.t + lower_ms AND right.t + upper_ms`."""

    model_config = ConfigDict(frozen=True)

    query: str = Field(..., description="The whole query, canonical Flink SQL.")
    kind: JoinKind
    left: TableSpec | ViewSpec = Field(..., description="The FROM table.")
    left_alias: str
    right: TableSpec | ViewSpec = Field(..., description="The joined table.")
    right_alias: str
    lower_ms: int = Field(..., description="Flink's leftLowerBound.")
    upper_ms: int = Field(..., description="Flink's leftUpperBound.")
    condition: str | None = Field(
        None, description="The join condition without its time bounds (canonical Flink SQL)."
    )
    where: str | None = Field(None, description="An outer join's WHERE, applied after it.")

    @property
    def left_time(self) -> str:
        assert self.left.rowtime is not None
        return self.left.rowtime

    @property
    def right_time(self) -> str:
        assert self.right.rowtime is not None
        return self.right.rowtime


def is_interval_join(query: str) -> bool:
    """True when a SELECT joins tables with a comparison between them that adds or subtracts
    an INTERVAL (`a.t > b.t - INTERVAL '5' SECOND`, `a.t BETWEEN b.t AND b.t + ...`): a time
    bound, which `plan_interval_join` checks with the catalog. Syntax only: a join without
    one is a regular join, computed on read."""
    select = parse_query(query)
    if not isinstance(select, exp.Select) or not select.args.get("joins"):
        return False
    conditions = [join.args.get("on") for join in select.args["joins"]]
    where = select.args.get("where")
    conditions.append(where.this if where is not None else None)
    return any(
        _looks_like_bound(conjunct)
        for condition in conditions if condition is not None
        for conjunct in _conjuncts(condition)
    )


def plan_interval_join(
    query: str, specs: Mapping[str, Spec], *, view: str = ""
) -> IntervalJoinPlan:
    """Validate an interval join with Flink's rules (see the module); `view` names it in errors."""
    where_ = f"view {view!r}" if view else "interval join"
    select = parse_query(query)
    assert isinstance(select, exp.Select)
    _refuse_other_clauses(select, where_)
    source, joins = select.args["from_"], select.args["joins"]
    if len(joins) != 1 or not _is_table(source.this) or not _is_table(joins[0].this):
        msg = (
            f"{where_}: an interval join reads two tables or views, FROM a JOIN b ON ..., "
            f"but the query joins {len(joins) + 1} relations or a subquery; join two at a "
            "time, each pair in its own view"
        )
        raise DefinitionError(msg)
    join = joins[0]
    kind = _join_kind(join, written=where_)
    left_table, right_table = source.this, join.this
    sides = {
        "left": (left_table.alias_or_name, _spec(specs, left_table, where_)),
        "right": (right_table.alias_or_name, _spec(specs, right_table, where_)),
    }
    on, where = join.args.get("on"), select.args.get("where")
    conjuncts = _conjuncts(on) if on is not None else []
    after = None
    if kind is JoinKind.INNER:
        conjuncts += _conjuncts(where.this) if where is not None else []
    elif where is not None:
        after = where.this
        if not _time_bounds(conjuncts, sides)[0] and _time_bounds(_conjuncts(after), sides)[0]:
            msg = (
                f"{where_}: the time bounds of a {kind.value.upper()} interval join go in its "
                "ON clause (in WHERE they filter the joined rows instead); move them to ON"
            )
            raise DefinitionError(msg)
    bounds, others = _time_bounds(conjuncts, sides)
    _check_time_attributes(sides, where_)
    if not bounds:
        raise _not_time_attributes(conjuncts, sides, where_)
    lower, upper = _bounds(bounds, where_)
    _require_key_equality(others, sides, where_)
    _require_same_rowtime_types(sides, where_)
    return IntervalJoinPlan(
        query=canonical_sql(select), kind=kind,
        left=sides["left"][1], left_alias=sides["left"][0],
        right=sides["right"][1], right_alias=sides["right"][0],
        lower_ms=lower, upper_ms=upper,
        condition=canonical_sql(exp.and_(*others)) if others else None,
        where=canonical_sql(after) if after is not None else None,
    )


def joined_sql(
    plan: IntervalJoinPlan, *, left_view: str, right_view: str, how: str,
    on: exp.Expr | None = None,
) -> str:
    """Spark SQL of the query over `left_view` and `right_view` joined `how` (INNER: on the
    condition, the time bounds in milliseconds and `on`; LEFT/RIGHT: on FALSE, null-padding
    every row), its SELECT list plus each joined row's identities (`__ij_lid`, `__ij_rid`), its
    sign (`__ij_sign`, the product of its rows'; a padded row's is its preserved row's) and,
    for an outer join's WHERE, whether the row passes it (`__ij_keep`)."""
    tree = parse_query(plan.query)
    assert isinstance(tree, exp.Select)
    left, right = plan.left_alias, plan.right_alias
    if how == "INNER":
        condition = exp.and_(*[c for c in (
            parse_condition(plan.condition) if plan.condition else None,
            _time_check(left, right, plan.lower_ms, plan.upper_ms),
            on,
        ) if c is not None])
    else:
        condition = exp.false()
    tree.set("from_", exp.From(this=exp.to_table(left_view).as_(left)))
    tree.set("joins", [exp.Join(this=exp.to_table(right_view).as_(right), side=how
                                if how != "INNER" else None, on=condition)])
    tree.set("where", None)
    tree.select(exp.column(ROW_ID, left).as_(LEFT_ID), exp.column(ROW_ID, right).as_(RIGHT_ID),
                exp.Mul(this=_sign(left), expression=_sign(right)).as_(SIGN),
                copy=False)
    if plan.where is not None:
        tree.select(exp.paren(parse_condition(plan.where)).as_(KEEP), copy=False)
    return spark_sql(tree)


def _sign(alias: str) -> exp.Expr:
    """A joined row's sign from the input `alias`: one where the input is null-padded, so a
    padded row takes its preserved row's sign."""
    return exp.func("COALESCE", exp.column(SIGN, alias), exp.Literal.number(1))


def parse_condition(condition: str) -> exp.Expr:
    """A boolean expression in Flink SQL, parsed."""
    return parse_query(f"SELECT 1 FROM t WHERE {condition}").args["where"].this


# -- reading the condition --------------------------------------------------------------------


def _conjuncts(condition: exp.Expr) -> list[exp.Expr]:
    node = condition.unnest()
    if isinstance(node, exp.And):
        return [c for part in node.flatten() for c in _conjuncts(part)]
    return [node]


def _comparisons(conjunct: exp.Expr) -> list[exp.Expr]:
    """A comparison as itself; `x BETWEEN lo AND hi` as `x >= lo` and `x <= hi`."""
    if isinstance(conjunct, exp.Between):
        value = conjunct.this
        return [exp.GTE(this=value.copy(), expression=conjunct.args["low"].copy()),
                exp.LTE(this=value.copy(), expression=conjunct.args["high"].copy())]
    return [conjunct] if isinstance(conjunct, _COMPARISONS) else []


def _looks_like_bound(conjunct: exp.Expr) -> bool:
    if not isinstance(conjunct, (exp.Between, exp.GT, exp.GTE, exp.LT, exp.LTE)):
        return False
    if not any(conjunct.find_all(exp.Interval)):
        return False
    columns = list(conjunct.find_all(exp.Column))
    qualifiers = {c.table.lower() for c in columns}
    return len(columns) >= 2 and (len(qualifiers) >= 2 or "" in qualifiers)


def _side_of(column: exp.Column, sides: dict[str, tuple[str, Spec]]) -> str | None:
    """Which input a column reads ('left' or 'right'); None when that cannot be told."""
    if column.table:
        found = [s for s, (alias, _) in sides.items() if alias.lower() == column.table.lower()]
        return found[0] if found else None
    having = [s for s, (_, spec) in sides.items()
              if isinstance(spec, TableSpec) and spec.column(column.name) is not None]
    return having[0] if len(having) == 1 else None


def _operand_sides(node: exp.Expr, sides: dict[str, tuple[str, Spec]]) -> set[str | None]:
    return {_side_of(c, sides) for c in node.find_all(exp.Column)}


def _is_rowtime(column: exp.Column, side: str | None, sides: dict[str, tuple[str, Spec]]) -> bool:
    rowtime = sides[side][1].rowtime if side else None
    return rowtime is not None and column.name.lower() == rowtime.lower()


def _time_bounds(
    conjuncts: list[exp.Expr], sides: dict[str, tuple[str, Spec]]
) -> tuple[list[tuple[exp.Expr, str]], list[exp.Expr]]:
    """The conjuncts' time predicates (each with the side of its left operand), and the others.

    A time predicate compares a rowtime attribute of one input with one of the other, each
    operand reading that attribute and nothing else (Flink's `identifyTimePredicate`).
    """
    bounds: list[tuple[exp.Expr, str]] = []
    others: list[exp.Expr] = []
    for conjunct in conjuncts:
        found = [_time_predicate(c, sides) for c in _comparisons(conjunct)]
        if found and all(side is not None for _, side in found):
            bounds += [(comparison, side) for comparison, side in found if side is not None]
        else:
            others.append(conjunct)
    return bounds, others


def _time_predicate(
    comparison: exp.Expr, sides: dict[str, tuple[str, Spec]]
) -> tuple[exp.Expr, str | None]:
    """(`comparison`, the input its left operand reads) when each operand reads one rowtime
    attribute and nothing else, of different inputs; (`comparison`, None) otherwise."""
    operands = (comparison.this, comparison.expression)
    columns = [list(operand.find_all(exp.Column)) for operand in operands]
    if any(len(found) != 1 for found in columns):
        return comparison, None
    [this], [that] = columns
    this_side, that_side = _side_of(this, sides), _side_of(that, sides)
    if this_side is None or that_side is None or this_side == that_side:
        return comparison, None
    if not (_is_rowtime(this, this_side, sides) and _is_rowtime(that, that_side, sides)):
        return comparison, None
    return comparison, this_side


def _offset_ms(node: exp.Expr, where_: str, written: str) -> int:
    """The constant a bound's operand adds to its time attribute (the attribute read as 0)."""
    node = node.unnest()
    if isinstance(node, exp.Column):
        return 0
    if isinstance(node, exp.Interval):
        return _interval_ms(node, where_, written)
    if isinstance(node, exp.Neg):
        return -_offset_ms(node.this, where_, written)
    if isinstance(node, exp.Add):
        return _offset_ms(node.this, where_, written) + _offset_ms(node.expression, where_,
                                                                   written)
    if isinstance(node, exp.Sub) and not any(node.expression.find_all(exp.Column)):
        return _offset_ms(node.this, where_, written) - _offset_ms(node.expression, where_,
                                                                   written)
    msg = (
        f"{where_}: the time bound {written} must be a rowtime attribute plus or minus "
        f"constant intervals on each side, e.g. {_EXAMPLE}; got {canonical_sql(node)}"
    )
    raise DefinitionError(msg)


def _interval_ms(node: exp.Interval, where_: str, written: str) -> int:
    millis = whole_millis(interval_millis(node))
    if millis is None:
        msg = (
            f"{where_}: the time bound {written} adds {canonical_sql(node)}; an interval join "
            "bound is a whole number of milliseconds in one unit (SECOND, MINUTE, HOUR or DAY), "
            "e.g. INTERVAL '5' SECOND"
        )
        raise DefinitionError(msg)
    return millis


def _bounds(bounds: list[tuple[exp.Expr, str]], where_: str) -> tuple[int, int]:
    """Flink's (leftLowerBound, leftUpperBound) from one equality or one lower and one upper
    bound (`computeWindowBoundFromPredicate`)."""
    written = " AND ".join(canonical_sql(b) for b, _ in bounds)
    found: dict[bool, int] = {}
    equalities = [b for b, _ in bounds if isinstance(b, exp.EQ)]
    for comparison, side in bounds:
        left_first = side == "left"
        this = _offset_ms(comparison.this, where_, written)
        that = _offset_ms(comparison.expression, where_, written)
        offset = that - this if left_first else this - that
        op = type(comparison)
        if op is exp.EQ:
            found[True] = found[False] = offset
            continue
        lower = left_first if op in (exp.GT, exp.GTE) else not left_first
        if op is exp.GT:
            offset += 1 if left_first else -1
        elif op is exp.LT:
            offset += -1 if left_first else 1
        if lower in found:
            msg = _one_sided(written, where_, missing="upper" if lower else "lower", twice=True)
            raise DefinitionError(msg)
        found[lower] = offset
    if equalities and len(bounds) > 1:
        msg = (
            f"{where_}: the time condition {written} has an equality of the rowtime attributes "
            "and other bounds; an interval join takes one equality or one lower and one upper "
            "bound: keep the equality alone, or two bounds"
        )
        raise DefinitionError(msg)
    if len(found) < 2:
        msg = _one_sided(written, where_, missing="upper" if True in found else "lower")
        raise DefinitionError(msg)
    return found[True], found[False]


def _one_sided(written: str, where_: str, *, missing: str, twice: bool = False) -> str:
    how = "bounds the left time twice from the same side" if twice else "is bounded on one side"
    return (
        f"{where_}: the interval join's time condition {written} {how}: it has no {missing} "
        "bound, so rows would wait in state for ever; an interval join needs a lower and an "
        f"upper bound (or an equality of the rowtimes): write e.g. {_EXAMPLE}"
    )


# -- checks -----------------------------------------------------------------------------------


def _refuse_other_clauses(select: exp.Select, where_: str) -> None:
    clauses = {"group": "GROUP BY", "having": "HAVING", "distinct": "SELECT DISTINCT",
               "order": "ORDER BY", "limit": "LIMIT", "qualify": "QUALIFY", "with_": "WITH"}
    found = [name for arg, name in clauses.items() if select.args.get(arg)]
    if select.find(exp.AggFunc, exp.Window) is not None:
        found.append("an aggregate or OVER window")
    if found:
        msg = (
            f"{where_}: an interval join view selects and filters the joined rows, but this one "
            f"has {found[0]}; create the interval join as a view and {found[0]} over it in "
            "another view"
        )
        raise DefinitionError(msg)


def _join_kind(join: exp.Join, written: str) -> JoinKind:
    side, kind = (join.side or "").upper(), (join.kind or "").upper()
    if join.args.get("using") or kind in ("SEMI", "ANTI"):
        msg = (
            f"{written}: an interval join is [INNER], LEFT, RIGHT or FULL [OUTER] JOIN ... ON, "
            "or FROM a, b WHERE ...; write the key equality and time bounds in ON"
        )
        raise DefinitionError(msg)
    return JoinKind(side.lower()) if side else JoinKind.INNER


def _is_table(node: exp.Expr) -> bool:
    return (isinstance(node, exp.Table) and isinstance(node.this, exp.Identifier)
            and node.args.get("version") is None)


def _spec(specs: Mapping[str, Spec], table: exp.Table, where_: str) -> Spec:
    name = relation_name(table)
    spec = specs.get(name.lower())
    if spec is None:
        msg = f"{where_}: unknown table {name!r} (declare it with CREATE TABLE first)"
        raise UnknownNameError(msg)
    return spec


def _check_time_attributes(sides: dict[str, tuple[str, Spec]], where_: str) -> None:
    """Both inputs follow event time (either may retract:
    `chronolake.runtime.interval_operator`)."""
    for alias, spec in sides.values():
        if isinstance(spec, TableSpec) and spec.watermark is not None and (
            spec.options.startup_mode is StartupMode.SNAPSHOT_THEN_CHANGELOG
        ):
            msg = (
                f"{where_}: {spec.name!r} ({alias}) is read 'snapshot-then-changelog', which "
                "follows processing time; an event-time interval join needs both inputs to "
                "follow their rowtime: drop 'scan.startup.mode'"
            )
            raise DefinitionError(msg)


def _not_time_attributes(
    conjuncts: list[exp.Expr], sides: dict[str, tuple[str, Spec]], where_: str
) -> DefinitionError:
    """The error for bounds that compare columns other than the two rowtime attributes."""
    bound = next((c for c in conjuncts if _looks_like_bound(c)), None)
    written = canonical_sql(bound) if bound is not None else "the join condition"
    for column in (bound.find_all(exp.Column) if bound is not None else []):
        side = _side_of(column, sides)
        if side is None or _is_rowtime(column, side, sides):
            continue
        alias, spec = sides[side]
        if spec.rowtime is None:
            fix = (f"declare WATERMARK FOR {column.name} AS ... on {spec.name!r}, or cast it "
                   "and join it as a regular join (computed on read)")
            what = f"{spec.name!r} has no rowtime attribute (WATERMARK FOR)"
        else:
            fix = f"bound {alias}.{spec.rowtime} instead"
            what = f"its rowtime attribute is {spec.rowtime!r}"
        return DefinitionError(
            f"{where_}: the interval join bound {written} reads {alias}.{column.name}, which is "
            f"not a time attribute of {spec.name!r} ({what}); interval join bounds compare the "
            f"rowtime attributes of both inputs: {fix}"
        )
    return DefinitionError(
        f"{where_}: the interval join bound {written} must compare the rowtime attribute of one "
        f"input with the other's, each qualified by its table, e.g. {_EXAMPLE}"
    )


def _require_key_equality(
    others: list[exp.Expr], sides: dict[str, tuple[str, Spec]], where_: str
) -> None:
    for conjunct in others:
        if isinstance(conjunct, exp.EQ):
            this = _operand_sides(conjunct.this, sides)
            that = _operand_sides(conjunct.expression, sides)
            if {frozenset(this), frozenset(that)} == {frozenset({"left"}), frozenset({"right"})}:
                return
    (left_alias, left), (right_alias, right) = sides["left"], sides["right"]
    msg = (
        f"{where_}: the interval join of {left.name!r} and {right.name!r} has no equality "
        f"between their columns, so its state cannot be split by key and every row would "
        f"meet every other; add a key equality to the condition, e.g. "
        f"{left_alias}.id = {right_alias}.id"
    )
    raise DefinitionError(msg)


def _require_same_rowtime_types(sides: dict[str, tuple[str, Spec]], where_: str) -> None:
    types = []
    for _, spec in sides.values():
        column = spec.column(spec.rowtime) if isinstance(spec, TableSpec) and spec.rowtime else None
        declared = getattr(column, "type", None)
        types.append(declared.upper() if isinstance(declared, str) else None)
    if None in types:
        return
    kinds = ["TIMESTAMP_LTZ" if "LTZ" in t or "LOCAL TIME ZONE" in t else "TIMESTAMP"
             for t in types if t]
    if kinds[0] != kinds[1]:
        msg = (
            f"{where_}: Interval join with rowtime attribute requires same rowtime types, but "
            f"the types are {types[0]} *ROWTIME* and {types[1]} *ROWTIME*; cast one rowtime in "
            "its table's computed column so both are TIMESTAMP(3) or both TIMESTAMP_LTZ(3)"
        )
        raise DefinitionError(msg)


def _time_check(left: str, right: str, lower_ms: int, upper_ms: int) -> exp.Expr:
    """`right.ms + lower <= left.ms <= right.ms + upper`, in epoch milliseconds."""
    left_ms, right_ms = exp.column(ROW_MS, left), exp.column(ROW_MS, right)
    return exp.and_(
        exp.LTE(this=exp.Add(this=right_ms.copy(), expression=exp.Literal.number(lower_ms)),
                expression=left_ms.copy()),
        exp.LTE(this=left_ms.copy(),
                expression=exp.Add(this=right_ms.copy(), expression=exp.Literal.number(upper_ms))),
    )
