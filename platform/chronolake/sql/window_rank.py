"""Planning a window Top-N or window deduplication view, as Flink plans them.

    CREATE VIEW top_suppliers AS
    SELECT * FROM (
      SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY price DESC)
        AS rownum
      FROM (SELECT window_start, window_end, supplier_id, SUM(price) AS price
            FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(bidtime), INTERVAL '10' MINUTES))
            GROUP BY window_start, window_end, supplier_id))
    WHERE rownum <= 3

ranks the rows of each window once, when the window closes (the window's rows are
complete then), and keeps ranks 1..3: an insert-only output. The ranked relation
is a window aggregate (a subquery planned by `chronolake.sql.window`) or a window
table function's rows directly (`TABLE(TUMBLE(...))`, the window planner's rows
mode). Flink's rules (`StreamPhysicalWindowRankRule`, `RankUtil`):

- PARTITION BY holds the relation's `window_start` and `window_end`; other keys
  may follow. Without both, Flink plans a regular, updating Top-N, which
  chronolake does not run.
- Only `ROW_NUMBER()` ranks; RANK() and DENSE_RANK() are refused.
- The outer WHERE bounds the rank with constants, ANDed with other conditions:
  `rownum <= N`, `rownum < N`, `rownum = N`, or a lower and an upper bound.
- ORDER BY one time attribute, `rownum` not selected, rank range [1, 1]: a window
  *deduplication* (`StreamPhysicalWindowDeduplicateRule`): ASC keeps the first
  row per window and key, DESC the last; on equal times, the first arrival for
  ASC and the last for DESC (`DeduplicateFunctionHelper.shouldKeepCurrentRow`).
  Any other Top-N ranks equal sort keys in arrival order (`TopNRecordsCombiner`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field
from sqlglot import exp

from chronolake.errors import DefinitionError
from chronolake.schema import TableSpec, ViewSpec
from chronolake.schema.dialect import TableArgument, canonical_sql, spark_sql
from chronolake.schema.spec import KeepRow
from chronolake.schema.windows import WINDOW_COLUMNS, WINDOW_END, WINDOW_START, WINDOW_TIME
from chronolake.sql._names import relation_name
from chronolake.sql.query import parse_query
from chronolake.sql.rank_range import is_rank_column, rank_range
from chronolake.sql.window import (
    WindowItem,
    WindowPlan,
    is_window_aggregate,
    plan_window_aggregate,
    refuse_repeated_names,
)

RANK_COLUMN = "__w_rank"
"""The rank number's column in the ranked rows (the view names it as its SELECT says)."""

_KEY = "__rank_key_"
_SORT = "__rank_sort_"
_CLAUSES = {
    "joins": "a JOIN", "group": "GROUP BY", "having": "HAVING", "order": "ORDER BY",
    "limit": "LIMIT", "offset": "OFFSET", "distinct": "SELECT DISTINCT", "qualify": "QUALIFY",
    "with_": "WITH",
}
_SHAPE = (
    "SELECT * FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end[, "
    "<keys>] ORDER BY <column> DESC) AS rownum FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(rowtime), "
    "INTERVAL '10' MINUTES))) WHERE rownum <= 3"
)


class RankOrder(BaseModel):
    """One ORDER BY item of the ranking: a Spark SQL expression over the window's rows."""

    model_config = ConfigDict(frozen=True)

    expression: str
    descending: bool = False
    nulls_first: bool = Field(..., description="Flink's default: NULLs are the smallest.")


class WindowRankPlan(BaseModel):
    """A validated window Top-N: the window stage, the ranking, the SELECTs over it."""

    model_config = ConfigDict(frozen=True)

    query: str = Field(..., description="The whole query, canonical Flink SQL.")
    window: WindowPlan = Field(..., description="The ranked relation: aggregate or TVF rows.")
    filter: str | None = Field(None, description="The ranking SELECT's WHERE, before ranking.")
    partition_by: tuple[str, ...] = Field(..., description="Window bounds first, then keys.")
    order_by: tuple[RankOrder, ...]
    rank_start: int = Field(..., description="The first rank kept (1 for a Top-N).")
    rank_end: int = Field(..., description="The last rank kept.")
    keep: KeepRow | None = Field(None, description="Set for a window deduplication.")
    ranked: tuple[WindowItem, ...] = Field(
        ..., description=f"The ranking SELECT's items; its rank number reads {RANK_COLUMN}."
    )
    items: tuple[WindowItem, ...] = Field(..., description="The outer SELECT, over `ranked`.")
    where: str | None = Field(None, description="The outer WHERE besides the rank bounds.")


def is_window_rank(query: str) -> bool:
    """True when a query ranks rows (an OVER window with a rank function) over a window
    table function: a window Top-N or deduplication, planned by `plan_window_rank`."""
    if not is_window_aggregate(query):
        return False
    ranks = (exp.RowNumber, exp.Rank, exp.DenseRank)
    return any(isinstance(w.this, ranks) for w in parse_query(query).find_all(exp.Window))


def plan_window_rank(query: str, specs: Mapping[str, TableSpec | ViewSpec]) -> WindowRankPlan:
    """Validate a window Top-N / deduplication query (Flink's rules, see the module)."""
    tree = parse_query(query)
    outer, ranking = _levels(tree)
    alias, window = _rank_window(ranking)
    relation = ranking.args["from_"].this
    if isinstance(relation, exp.Subquery):
        plan, filter_, ranked, partition, order = _over_aggregate(ranking, window, alias, specs)
    else:
        plan, ranked, partition, order = _over_rows(ranking, window, alias, specs)
        filter_ = None
    names = [item.name for item in ranked]
    where = outer.args.get("where")
    start, end, rest = rank_range(where.this if where else None, alias)
    outer_alias = outer.args["from_"].this.alias_or_name
    items = _outer_items(outer, names, outer_alias)
    return WindowRankPlan(
        query=canonical_sql(tree),
        window=plan,
        filter=filter_,
        partition_by=partition,
        order_by=order,
        rank_start=start,
        rank_end=end,
        keep=_deduplication(window, plan, (start, end), outer, alias, ranking),
        ranked=ranked,
        items=items,
        where=_over_names(rest, names, outer_alias, what="WHERE") if rest is not None else None,
    )


@dataclass(frozen=True)
class RankOutline:
    """A window Top-N's shape, read from its syntax alone (what its output carries):
    its two SELECTs, the ranked window aggregate (None over a TVF), the TVF's table, the
    PARTITION BY columns (None for an expression), the rank's alias, and whether one rank
    is kept (`rownum = N`, or a Top-1)."""

    outer: exp.Select
    ranking: exp.Select
    aggregate: exp.Select | None
    source: str | None
    partition_by: tuple[str | None, ...]
    rank: str
    single_rank: bool


def rank_outline(query: str) -> RankOutline:
    """The shape of a window Top-N query; its Flink errors that need no catalog: the
    levels, ROW_NUMBER, PARTITION BY's window bounds (of a TVF) and the rank filter."""
    tree = parse_query(query)
    outer, ranking = _levels(tree)
    alias, window = _rank_window(ranking)
    relation = ranking.args["from_"].this
    aggregate = relation.this if isinstance(relation, exp.Subquery) else None
    bounds = {WINDOW_START: WINDOW_START, WINDOW_END: WINDOW_END}
    if isinstance(aggregate, exp.Select):  # the aggregate's window bounds, as it names them
        bounds = {p.alias_or_name.lower(): p.unalias().name.lower() for p in aggregate.expressions
                  if isinstance(p.unalias(), exp.Column)}
    _require_window_bounds(window, lambda column: bounds.get(column.name.lower()))
    where = outer.args.get("where")
    start, end, _ = rank_range(where.this if where else None, alias)
    calls = [node for node in (aggregate or ranking).find_all(exp.Anonymous)
             if node.expressions and isinstance(node.expressions[0], TableArgument)]
    return RankOutline(
        outer=outer,
        ranking=ranking,
        aggregate=aggregate if isinstance(aggregate, exp.Select) else None,
        source=relation_name(calls[0].expressions[0].this) if calls else None,
        partition_by=tuple(k.name if isinstance(k, exp.Column) else None
                           for k in window.args.get("partition_by") or []),
        rank=alias,
        single_rank=start == end,
    )


# -- the two SELECTs -------------------------------------------------------------------------


def _levels(tree: exp.Query) -> tuple[exp.Select, exp.Select]:
    """The outer SELECT (filtering the rank) and the ranking SELECT in its FROM."""
    source = tree.args.get("from_") if isinstance(tree, exp.Select) else None
    inner = source.this if source is not None else None
    if not (isinstance(tree, exp.Select) and isinstance(inner, exp.Subquery)
            and isinstance(inner.this, exp.Select)):
        msg = (
            "a window Top-N filters a ROW_NUMBER() in an outer query, written "
            f"{_SHAPE}; got {canonical_sql(tree)[:120]!r}"
        )
        raise DefinitionError(msg)
    for select, level in ((tree, "outer query"), (inner.this, "ranking query")):
        used = next((words for arg, words in _CLAUSES.items() if select.args.get(arg)), None)
        if used is not None:
            msg = (
                f"{used} in the {level} of a window Top-N is not supported; write {_SHAPE}, "
                "aggregating in a subquery, and query the view's table for the rest"
            )
            raise DefinitionError(msg)
    return tree, inner.this


def _rank_window(ranking: exp.Select) -> tuple[str, exp.Window]:
    """(alias, OVER window) of the ranking SELECT's one `ROW_NUMBER() OVER (...) AS alias`."""
    windows = [p for p in ranking.expressions if p.find(exp.Window) is not None]
    projection = windows[0] if len(windows) == 1 else None
    if not (isinstance(projection, exp.Alias) and isinstance(projection.this, exp.Window)):
        msg = (
            "a window Top-N's ranking query has one item `ROW_NUMBER() OVER (PARTITION BY "
            f"window_start, window_end ORDER BY ...) AS rownum`; got "
            f"{', '.join(canonical_sql(p) for p in windows) or 'none'}"
        )
        raise DefinitionError(msg)
    window = projection.this
    function = window.this
    if isinstance(function, (exp.Rank, exp.DenseRank)):
        name = "RANK" if isinstance(function, exp.Rank) else "DENSE_RANK"
        msg = (
            f"{canonical_sql(window)}: {name}() function is not supported on Window TopN "
            "currently, only ROW_NUMBER() is supported; write ROW_NUMBER() OVER (...)"
        )
        raise DefinitionError(msg)
    if not isinstance(function, exp.RowNumber) or not window.args.get("order"):
        msg = (
            f"{canonical_sql(window)}: a window Top-N ranks with ROW_NUMBER() OVER (PARTITION "
            "BY window_start, window_end ORDER BY <columns>)"
        )
        raise DefinitionError(msg)
    return projection.alias, window


def _over_rows(
    ranking: exp.Select, window: exp.Window, alias: str,
    specs: Mapping[str, TableSpec | ViewSpec],
) -> tuple[WindowPlan, tuple[WindowItem, ...], tuple[str, ...], tuple[RankOrder, ...]]:
    """A ranking straight over `TABLE(TUMBLE(...))`: the window planner's rows mode computes
    the SELECT items and the PARTITION BY / ORDER BY expressions for each fired row."""
    _require_window_bounds(window, lambda column: column.name.lower())
    keys = list(window.args.get("partition_by") or [])
    ordered = window.args["order"].expressions
    rows = ranking.copy()
    rows.set("expressions", [
        *(p.copy() for p in ranking.expressions if p.find(exp.Window) is None),
        *(exp.alias_(k.copy(), f"{_KEY}{i}") for i, k in enumerate(keys)),
        *(exp.alias_(o.this.copy(), f"{_SORT}{i}") for i, o in enumerate(ordered)),
    ])
    plan = plan_window_aggregate(canonical_sql(rows), specs, rows=True)
    selected = [item for item in plan.items if not item.name.startswith((_KEY, _SORT))]
    ranked = _with_rank(ranking, [
        WindowItem(name=item.name, expression=f"`{item.name}`") for item in selected
    ], alias, star_width=len(plan.source.columns) + len(WINDOW_COLUMNS))
    partition = tuple(f"`{_KEY}{i}`" for i in range(len(keys)))
    order = tuple(RankOrder(expression=f"`{_SORT}{i}`", descending=bool(o.args.get("desc")),
                            nulls_first=bool(o.args.get("nulls_first")))
                  for i, o in enumerate(ordered))
    return plan, ranked, partition, order


def _over_aggregate(
    ranking: exp.Select, window: exp.Window, alias: str,
    specs: Mapping[str, TableSpec | ViewSpec],
) -> tuple[WindowPlan, str | None, tuple[WindowItem, ...], tuple[str, ...],
           tuple[RankOrder, ...]]:
    """A ranking over a window aggregate subquery: its rows are the aggregate's output."""
    subquery = ranking.args["from_"].this
    inner = canonical_sql(subquery.this)
    if not is_window_aggregate(inner):
        msg = (
            f"a window Top-N ranks a window table function or a window aggregate over one; "
            f"got FROM ({inner[:100]}); write {_SHAPE}"
        )
        raise DefinitionError(msg)
    plan = plan_window_aggregate(inner, specs)
    names = [item.name for item in plan.items]
    bounds = {item.name.lower(): item.expression.lower() for item in plan.items
              if item.expression.lower() in (WINDOW_START, WINDOW_END)}
    _require_window_bounds(window, lambda column: bounds.get(column.name.lower()))
    from_alias = subquery.alias_or_name
    items = []
    for index, projection in enumerate(p for p in ranking.expressions
                                       if p.find(exp.Window) is None):
        value = projection.this if isinstance(projection, exp.Alias) else projection
        if _is_star(projection):
            items += [WindowItem(name=name, expression=f"`{name}`") for name in names]
            continue
        named = isinstance(projection, exp.Alias) or isinstance(value, exp.Column)
        items.append(WindowItem(
            name=projection.alias_or_name if named else f"EXPR${index}",
            expression=_over_names(value, names, from_alias, what="SELECT"),
        ))
    where = ranking.args.get("where")
    filter_ = _over_names(where.this, names, from_alias, what="WHERE") if where else None
    partition = tuple(_over_names(k, names, from_alias, what="PARTITION BY")
                      for k in window.args.get("partition_by") or [])
    order = tuple(
        RankOrder(expression=_over_names(o.this, names, from_alias, what="ORDER BY"),
                  descending=bool(o.args.get("desc")),
                  nulls_first=bool(o.args.get("nulls_first")))
        for o in window.args["order"].expressions
    )
    ranked = _with_rank(ranking, items, alias, star_width=len(names))
    return plan, filter_, ranked, partition, order


def _with_rank(
    ranking: exp.Select, items: list[WindowItem], alias: str, *, star_width: int
) -> tuple[WindowItem, ...]:
    """The ranking SELECT's items (`*` expanded to `star_width` of `items`), with the rank
    number in its place."""
    result: list[WindowItem] = []
    rest = list(items)
    for projection in ranking.expressions:
        if projection.find(exp.Window) is not None:
            result.append(WindowItem(name=alias, expression=f"`{RANK_COLUMN}`"))
            continue
        width = star_width if _is_star(projection) else 1
        result += rest[:width]
        rest = rest[width:]
    refuse_repeated_names(result, "the window Top-N's ranking query")
    return tuple(result)


def _is_star(projection: exp.Expr) -> bool:
    value = projection.this if isinstance(projection, exp.Alias) else projection
    return isinstance(value, exp.Star) or (isinstance(value, exp.Column)
                                           and isinstance(value.this, exp.Star))


def _require_window_bounds(
    window: exp.Window, bound_of: Callable[[exp.Column], str | None]
) -> None:
    """PARTITION BY holds the relation's window_start and window_end (Flink's
    `WindowUtil.groupingContainsWindowStartEnd`); else Flink plans a regular Top-N."""
    keys = list(window.args.get("partition_by") or [])
    present = {bound_of(k) for k in keys if isinstance(k, exp.Column)}
    missing = [c for c in (WINDOW_START, WINDOW_END) if c not in present]
    if missing:
        written = ", ".join(canonical_sql(k) for k in keys) or "(none)"
        others = [canonical_sql(k) for k in keys
                  if not (isinstance(k, exp.Column) and bound_of(k) in (WINDOW_START, WINDOW_END))]
        msg = (
            f"PARTITION BY {written}: a window Top-N partitions by both window_start and "
            f"window_end (missing {', '.join(missing)}), so that each window is ranked once, "
            f"when it closes; without them Flink plans a regular, updating Top-N, which "
            f"chronolake does not run: write PARTITION BY "
            f"{', '.join([WINDOW_START, WINDOW_END, *others])}"
        )
        raise DefinitionError(msg)


def _over_names(node: exp.Expr, names: list[str], alias: str, *, what: str) -> str:
    """Spark SQL of `node` over a subquery's output columns `names` (qualified by `alias`
    or not), each column checked."""
    copy = node.copy()
    known = {name.lower() for name in names}
    for column in copy.find_all(exp.Column):
        if isinstance(column.this, exp.Star):
            continue
        if column.table and column.table.lower() == alias.lower():
            column.set("table", None)
        if column.table or column.name.lower() not in known:
            msg = (
                f"{what} {canonical_sql(node)}: Column '{canonical_sql(column)}' not found in "
                f"any table; the query reads {', '.join(names)}"
            )
            raise DefinitionError(msg)
    return spark_sql(copy)


def _outer_items(
    outer: exp.Select, names: list[str], alias: str
) -> tuple[WindowItem, ...]:
    items: list[WindowItem] = []
    for index, projection in enumerate(outer.expressions):
        value = projection.this if isinstance(projection, exp.Alias) else projection
        if _is_star(projection):
            items += [WindowItem(name=name, expression=f"`{name}`") for name in names]
            continue
        if value.find(exp.AggFunc, exp.Window) is not None:
            msg = (
                f"SELECT {canonical_sql(value)}: the outer query of a window Top-N selects "
                "and filters the ranked rows; aggregate over the view's table instead"
            )
            raise DefinitionError(msg)
        named = isinstance(projection, exp.Alias) or isinstance(value, exp.Column)
        items.append(WindowItem(
            name=projection.alias_or_name if named else f"EXPR${index}",
            expression=_over_names(value, names, alias, what="SELECT"),
        ))
    refuse_repeated_names(items, "the window Top-N view")
    return tuple(items)


# -- window deduplication ---------------------------------------------------------------------


def _deduplication(
    window: exp.Window, plan: WindowPlan, ranks: tuple[int, int], outer: exp.Select,
    rank: str, ranking: exp.Select,
) -> KeepRow | None:
    """Which row a window deduplication keeps (Flink's `RankUtil.canConvertToDeduplicate`:
    rank 1 only, the rank number not selected, ORDER BY one time attribute); else None."""
    ordered = window.args["order"].expressions
    if ranks != (1, 1) or len(ordered) != 1 or not isinstance(ordered[0].this, exp.Column):
        return None
    selected = any(
        isinstance(p, exp.Star) or isinstance(p.this, exp.Star)
        or any(is_rank_column(c, rank) for c in p.find_all(exp.Column))
        for p in outer.expressions
    )
    if selected:
        return None
    column = ordered[0].this.name.lower()
    if isinstance(ranking.args["from_"].this, exp.Subquery):
        times = {item.name.lower() for item in plan.items
                 if item.expression.lower() == WINDOW_TIME}
    else:
        rowtime = plan.source.rowtime if plan.event_time else None
        times = {WINDOW_TIME, *([rowtime.lower()] if rowtime else [])}
    if column not in times:
        return None
    return KeepRow.LAST if ordered[0].args.get("desc") else KeepRow.FIRST
