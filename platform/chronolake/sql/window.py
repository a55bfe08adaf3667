"""Planning a window view: Flink's TUMBLE / HOP window table functions aggregated per window.

    CREATE VIEW orders_per_currency AS
    SELECT window_start, window_end, currency, COUNT(*) AS orders, SUM(amount) AS total
    FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(order_time), INTERVAL '10' MINUTES))
    WHERE amount > 0
    GROUP BY window_start, window_end, currency

is a *window aggregate*: one row per window and group, emitted once, when the
watermark passes the window (`chronolake.runtime.window_operator`). The plan
checks the query with Flink's rules before any Spark job runs and keeps what the
operator needs as Spark SQL text: the GROUP BY keys, the SELECT items in
order, the WHERE on the source rows, the HAVING on the groups.

Rules, as in Flink: the source is a table (`TABLE t`); `HOP(TABLE t,
DESCRIPTOR(c), slide, size)` with size a whole multiple of slide; the DESCRIPTOR
column is the source's rowtime attribute when it declares `WATERMARK FOR`; a
source without one follows processing time (its windows close by the clock)
and the DESCRIPTOR column must then be a TIMESTAMP or TIMESTAMP_LTZ column;
GROUP BY holds both `window_start` and `window_end`; every other SELECT item
is grouped or aggregated. `window_time` (end − 1 ms) may be selected too.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from decimal import Decimal, InvalidOperation

from pydantic import BaseModel, ConfigDict, Field
from sqlglot import exp

from chronolake.dialect import (
    TableArgument,
    canonical_sql,
    expression_type,
    is_timestamp_type,
    row_field_type,
    spark_sql,
)
from chronolake.errors import DefinitionError
from chronolake.schema import (
    ComputedColumn,
    MetadataColumn,
    PhysicalColumn,
    StartupMode,
    TableSpec,
    ViewSpec,
)
from chronolake.sql._names import lookup, relation_name
from chronolake.sql.query import parse_query
from chronolake.windows.tvf import WINDOW_END, WINDOW_START, WINDOW_TIME, WindowKind

WINDOW_COLUMNS = (WINDOW_START, WINDOW_END, WINDOW_TIME)
_WINDOW_FUNCTIONS = ("TUMBLE", "HOP", "CUMULATE", "SESSION")
_UNIT_MS = {"SECOND": 1_000, "MINUTE": 60_000, "HOUR": 3_600_000, "DAY": 86_400_000}
_OTHER_CLAUSES = {
    "joins": "a JOIN", "order": "ORDER BY", "limit": "LIMIT", "offset": "OFFSET",
    "distinct": "SELECT DISTINCT", "qualify": "QUALIFY", "windows": "a WINDOW clause",
    "with_": "WITH",
}


class WindowItem(BaseModel):
    """One SELECT item of a window view: its output name and its Spark SQL expression."""

    model_config = ConfigDict(frozen=True)

    name: str = Field(..., description="Output column name (the alias; EXPR$i when none).")
    expression: str = Field(..., description="Spark SQL over the source and window columns.")


class WindowPlan(BaseModel):
    """A validated window aggregate: source, windows, groups, SELECT items, filters."""

    model_config = ConfigDict(frozen=True)

    query: str = Field(..., description="The whole query, canonical Flink SQL.")
    source: TableSpec = Field(..., description="The table the window function reads.")
    time_column: str = Field(..., description="The DESCRIPTOR column (path).")
    kind: WindowKind
    size_ms: int = Field(..., gt=0, description="Window size in milliseconds.")
    slide_ms: int = Field(..., gt=0, description="Window slide (the size for TUMBLE).")
    group_keys: tuple[str, ...] = Field((), description="GROUP BY items besides the window.")
    items: tuple[WindowItem, ...] = Field(..., description="The SELECT items, in order.")
    where: str | None = Field(None, description="Filter on source rows, before windowing.")
    having: str | None = Field(None, description="Filter on the aggregated groups.")

    @property
    def event_time(self) -> bool:
        """True when windows close by the source's event-time watermark, else by the clock."""
        hybrid = self.source.options.startup_mode is StartupMode.SNAPSHOT_THEN_CHANGELOG
        return self.source.watermark is not None and not hybrid

    @property
    def columns(self) -> tuple[str, ...]:
        """The view's output columns, in SELECT order."""
        return tuple(item.name for item in self.items)


def is_window_aggregate(query: str) -> bool:
    """True when the query calls a window table function (`TABLE(TUMBLE(TABLE t, ...))`).

    Such a query has no Spark SQL form; `plan_window_aggregate` checks the rest.
    """
    return any(_is_window_call(node) for node in parse_query(query).find_all(exp.Anonymous))


def plan_window_aggregate(
    query: str, specs: Mapping[str, TableSpec | ViewSpec]
) -> WindowPlan:
    """Validate a window view's query against the catalog (Flink's rules, see the module)."""
    tree = parse_query(query)
    select, call = _window_select(tree)
    written = _written(call)
    source = _source(call, specs, written)
    kind, size_ms, slide_ms = _windows(call, written)
    time_column = _time_column(source, call.expressions[1], written)
    scope = _Scope(source, qualifiers=_qualifiers(select, source))
    where = select.args.get("where")
    if where is not None:
        _check_where(where.this, scope)
    group_keys = _group_keys(select, scope)
    grouped = [_stripped(key, scope) for key in group_keys]
    items = _items(select, scope, grouped)
    having = select.args.get("having")
    if having is not None:
        _check_columns(having.this, scope, allow_window=True)
        _require_grouped(having.this, grouped, scope, what="HAVING")
    return WindowPlan(
        query=canonical_sql(tree),
        source=source,
        time_column=time_column,
        kind=kind,
        size_ms=size_ms,
        slide_ms=slide_ms,
        group_keys=tuple(
            spark_sql(key) for key in grouped if not _is_window_column(key)
        ),
        items=items,
        where=spark_sql(_stripped(where.this, scope)) if where is not None else None,
        having=spark_sql(_stripped(having.this, scope)) if having is not None else None,
    )


# -- the FROM clause -------------------------------------------------------------------------


def _is_window_call(node: exp.Anonymous) -> bool:
    if node.name.upper() not in _WINDOW_FUNCTIONS:
        return False
    parent = node.parent
    in_table = isinstance(parent, exp.Anonymous) and parent.name.upper() == "TABLE"
    return in_table or any(isinstance(arg, TableArgument) for arg in node.expressions)


def _window_select(tree: exp.Query) -> tuple[exp.Select, exp.Anonymous]:
    """The SELECT and its one window function call, which must be the whole FROM clause."""
    calls = [node for node in tree.find_all(exp.Anonymous) if _is_window_call(node)]
    shape = (
        "SELECT window_start, window_end, <keys>, <aggregates> FROM TABLE(TUMBLE(TABLE t, "
        "DESCRIPTOR(rowtime), INTERVAL '10' MINUTES)) GROUP BY window_start, window_end, <keys>"
    )
    source = tree.args.get("from_") if isinstance(tree, exp.Select) else None
    relation = source.this if source is not None else None
    call = relation.this.expressions[0] if (
        isinstance(relation, exp.Table) and isinstance(relation.this, exp.Anonymous)
        and relation.this.name.upper() == "TABLE" and len(relation.this.expressions) == 1
    ) else None
    if len(calls) != 1 or call is not calls[0] or not isinstance(tree, exp.Select):
        msg = (
            f"a window view is one SELECT over one window table function, written {shape}; "
            f"got {canonical_sql(tree)[:120]!r}"
        )
        raise DefinitionError(msg)
    for arg, words in _OTHER_CLAUSES.items():
        if tree.args.get(arg):
            msg = (
                f"{_written(call)}: {words} is not supported in a window view; write {shape} "
                "and query the view's table for the rest"
            )
            raise DefinitionError(msg)
    return tree, call


def _written(call: exp.Anonymous) -> str:
    return canonical_sql(call)


def _source(
    call: exp.Anonymous, specs: Mapping[str, TableSpec | ViewSpec], written: str
) -> TableSpec:
    name = call.name.upper()
    if name not in (WindowKind.TUMBLE, WindowKind.HOP):
        msg = (
            f"{written}: {name} windows are not supported; chronolake runs TUMBLE and HOP "
            "window table functions"
        )
        raise DefinitionError(msg)
    first = call.expressions[0] if call.expressions else None
    if not isinstance(first, TableArgument):
        msg = (
            f"{written}: Illegal first argument to Window TVF: the data must be a table, "
            f"written {name}(TABLE <table>, DESCRIPTOR(<rowtime>), ...)"
        )
        raise DefinitionError(msg)
    table = relation_name(first.this)
    spec = lookup(specs, table, reader=written)
    if not isinstance(spec, TableSpec):
        msg = (
            f"{written}: {table!r} is a view; a window view reads a table declared with "
            f"CREATE TABLE, whose commits feed the windows: window the table that {table!r} "
            "reads instead"
        )
        raise DefinitionError(msg)
    return spec


def _windows(call: exp.Anonymous, written: str) -> tuple[WindowKind, int, int]:
    """(kind, size ms, slide ms) from the interval arguments: TUMBLE(data, timecol, size),
    HOP(data, timecol, slide, size), as in Flink."""
    kind = WindowKind(call.name.upper())
    arguments = call.expressions
    names = ("size",) if kind is WindowKind.TUMBLE else ("slide", "size")
    descriptor = arguments[1] if len(arguments) > 1 else None
    if not (isinstance(descriptor, exp.Anonymous) and descriptor.name.upper() == "DESCRIPTOR"
            and len(descriptor.expressions) == 1
            and isinstance(descriptor.expressions[0], exp.Column)):
        msg = (
            f"{written}: Illegal second argument to Window TVF: Expecting TIMECOL, written "
            "DESCRIPTOR(<time column>)"
        )
        raise DefinitionError(msg)
    intervals = arguments[2:]
    if len(intervals) != len(names):
        extra = " (window offsets are not supported)" if len(intervals) > len(names) else ""
        signature = ", ".join(["TABLE <table>", "DESCRIPTOR(<time column>)", *names])
        msg = f"{written}: expected {kind}({signature}){extra}"
        raise DefinitionError(msg)
    millis = {name: _interval_ms(arg, written, what=name) for name, arg in zip(
        names, intervals, strict=True
    )}
    size_ms, slide_ms = millis["size"], millis.get("slide", millis["size"])
    if size_ms % slide_ms:
        smaller, larger = size_ms // slide_ms * slide_ms, (size_ms // slide_ms + 1) * slide_ms
        msg = (
            f"{written}: HOP window must satisfy slide|size, but got size {size_ms}ms and "
            f"slide {slide_ms}ms; make the size a whole multiple of the slide, e.g. "
            f"{max(smaller, slide_ms)}ms or {larger}ms"
        )
        raise DefinitionError(msg)
    return kind, size_ms, slide_ms


def _interval_ms(node: exp.Expr, written: str, *, what: str) -> int:
    """Milliseconds of `INTERVAL 'n' UNIT` (SECOND, MINUTE, HOUR, DAY; plural allowed)."""
    example = "INTERVAL '10' MINUTES"
    unit = node.args.get("unit") if isinstance(node, exp.Interval) else None
    name = unit.name.upper().removesuffix("S") if isinstance(unit, exp.Var) else ""
    if name not in _UNIT_MS or not isinstance(node.this, exp.Literal):
        msg = (
            f"{written}: the window {what} must be a day-time interval with one unit "
            f"(SECOND, MINUTE, HOUR or DAY), e.g. {example}; got {canonical_sql(node)}"
        )
        raise DefinitionError(msg)
    try:
        millis = Decimal(node.this.name) * _UNIT_MS[name]
    except InvalidOperation:
        millis = Decimal(0)
    if millis <= 0 or millis != millis.to_integral_value():
        msg = (
            f"{written}: the window {what} {canonical_sql(node)} must be a positive whole "
            f"number of milliseconds, e.g. {example}"
        )
        raise DefinitionError(msg)
    return int(millis)


def _time_column(source: TableSpec, descriptor: exp.Expr, written: str) -> str:
    """The DESCRIPTOR column: the rowtime of an event-time source, else a TIMESTAMP column."""
    [column] = descriptor.expressions
    path = ".".join(part.name for part in column.parts)
    declared = source.column(column.parts[0].name)
    if declared is None:
        names = ", ".join(c.name for c in source.columns)
        msg = (
            f"{written}: Can't find the time attribute field '{path}' in the input schema "
            f"{source.name}({names})"
        )
        raise DefinitionError(msg)
    if source.rowtime is not None:
        if path.lower() != source.rowtime.lower():
            msg = (
                f"{written}: the window function requires the timecol to be a time attribute, "
                f"but '{path}' is not the rowtime of {source.name!r} (WATERMARK FOR "
                f"{source.rowtime}); use DESCRIPTOR({source.rowtime})"
            )
            raise DefinitionError(msg)
        return source.rowtime
    if isinstance(declared, ComputedColumn) and declared.is_proctime:
        msg = (
            f"{written}: '{path}' is a PROCTIME() attribute; chronolake windows are event-time "
            f"windows: name a TIMESTAMP column of {source.name!r}; a source without WATERMARK "
            "FOR closes them by the clock"
        )
        raise DefinitionError(msg)
    column_type = _declared_type(declared, column.parts[1:])
    if column_type is not None and not is_timestamp_type(column_type):
        msg = (
            f"{written}: The window function requires the timecol to be TIMESTAMP or "
            f"TIMESTAMP_LTZ, but '{path}' is {column_type}; use a TIMESTAMP(3) column, or "
            f"declare one, e.g. `ts AS TO_TIMESTAMP_LTZ({path}, 3)`"
        )
        raise DefinitionError(msg)
    return path


def _declared_type(
    declared: PhysicalColumn | ComputedColumn | MetadataColumn, nested: list[exp.Identifier]
) -> str | None:
    """The declared Flink type of a column path; None when only Spark can tell."""
    if isinstance(declared, ComputedColumn):
        return None if nested else expression_type(declared.expression)
    column_type: str | None = declared.type
    for field in nested:
        column_type = row_field_type(column_type, field.name) if column_type else None
    return column_type


# -- SELECT, WHERE, GROUP BY, HAVING ---------------------------------------------------------


class _Scope:
    """The columns a window view's clauses may name: the source's, and the window's."""

    def __init__(self, source: TableSpec, *, qualifiers: set[str]) -> None:
        self.source = source
        self.qualifiers = qualifiers
        self.names = {c.name.lower() for c in source.columns}

    def listing(self) -> str:
        return ", ".join([*(c.name for c in self.source.columns), *WINDOW_COLUMNS])


def _qualifiers(select: exp.Select, source: TableSpec) -> set[str]:
    """Names a column may be qualified with: the FROM alias, else the table's name."""
    relation = select.args["from_"].this
    alias = relation.alias
    return {alias.lower()} if alias else {source.name.lower()}


def _columns(node: exp.Expr) -> Iterator[exp.Column]:
    yield from (c for c in node.find_all(exp.Column) if not isinstance(c.this, exp.Star))


def _head(column: exp.Column, scope: _Scope) -> str:
    """The top-level column a reference names (`t.amount` and `amount` name `amount`)."""
    if column.table and column.table.lower() in scope.qualifiers:
        return column.name
    return column.parts[0].name


def _is_window_column(node: exp.Expr) -> bool:
    return isinstance(node, exp.Column) and not node.table and node.name.lower() in WINDOW_COLUMNS


def _check_columns(node: exp.Expr, scope: _Scope, *, allow_window: bool) -> None:
    """Every column is a source column (or, where allowed, a window column)."""
    for column in _columns(node):
        head = _head(column, scope).lower()
        if head in scope.names:
            continue
        if head in WINDOW_COLUMNS and allow_window:
            continue
        if head in WINDOW_COLUMNS:
            msg = (
                f"WHERE {canonical_sql(node)}: {column.name} is a window column and WHERE filters "
                "the source rows before windowing; filter windows in HAVING instead"
            )
            raise DefinitionError(msg)
        msg = (
            f"Column '{canonical_sql(column)}' not found in any table; the window view reads "
            f"{scope.listing()}"
        )
        raise DefinitionError(msg)


def _check_where(condition: exp.Expr, scope: _Scope) -> None:
    _check_columns(condition, scope, allow_window=False)
    if condition.find(exp.AggFunc) is not None:
        msg = (
            f"WHERE {canonical_sql(condition)}: aggregate functions are not allowed in WHERE; "
            "filter groups in HAVING"
        )
        raise DefinitionError(msg)


def _group_keys(select: exp.Select, scope: _Scope) -> list[exp.Expr]:
    group = select.args.get("group")
    keys = list(group.expressions) if group is not None else []
    for key in keys:
        _check_columns(key, scope, allow_window=True)
        if key.find(exp.AggFunc) is not None:
            msg = f"GROUP BY {canonical_sql(key)}: aggregate functions cannot be grouped by"
            raise DefinitionError(msg)
    present = {_head(k, scope).lower() for k in keys if isinstance(k, exp.Column)}
    missing = [c for c in (WINDOW_START, WINDOW_END) if c not in present]
    if missing:
        written = ", ".join(canonical_sql(k) for k in keys) or "(none)"
        wanted = ", ".join([WINDOW_START, WINDOW_END, *(
            canonical_sql(k) for k in keys
            if not (isinstance(k, exp.Column) and _head(k, scope).lower() in WINDOW_COLUMNS)
        )])
        msg = (
            f"GROUP BY {written}: a window aggregation groups by both window_start and "
            f"window_end (missing {', '.join(missing)}); write GROUP BY {wanted}"
        )
        raise DefinitionError(msg)
    return keys


def _items(select: exp.Select, scope: _Scope, grouped: list[exp.Expr]) -> tuple[WindowItem, ...]:
    items: list[WindowItem] = []
    for index, projection in enumerate(select.expressions):
        value = projection.this if isinstance(projection, exp.Alias) else projection
        if isinstance(value, exp.Star) or (isinstance(value, exp.Column)
                                           and isinstance(value.this, exp.Star)):
            msg = (
                "SELECT * is not supported in a window aggregation; name the window columns, "
                "the GROUP BY keys and the aggregates, e.g. SELECT window_start, window_end, "
                "COUNT(*) AS n"
            )
            raise DefinitionError(msg)
        if value.find(exp.Window) is not None:
            msg = (
                f"SELECT {canonical_sql(value)}: OVER windows are not supported in a window "
                "aggregation"
            )
            raise DefinitionError(msg)
        _check_columns(value, scope, allow_window=True)
        _require_grouped(value, grouped, scope, what="SELECT")
        if isinstance(projection, exp.Alias) or isinstance(value, exp.Column):
            name = projection.alias_or_name
        else:
            name = f"EXPR${index}"
        if any(item.name.lower() == name.lower() for item in items):
            msg = (
                f"SELECT: the column name {name!r} appears twice in the window view; give one "
                "of them another alias (expr AS other_name)"
            )
            raise DefinitionError(msg)
        items.append(WindowItem(name=name, expression=spark_sql(_stripped(value, scope))))
    return tuple(items)


def _require_grouped(
    value: exp.Expr, grouped: list[exp.Expr], scope: _Scope, *, what: str
) -> None:
    """Outside aggregate functions, `value` only uses GROUP BY items and window columns."""
    stripped = _stripped(value, scope)
    keys = {canonical_sql(key) for key in grouped}
    for column in _columns(stripped):
        if column.find_ancestor(exp.AggFunc) is not None or _is_window_column(column):
            continue
        if _covered(column, stripped, keys):
            continue
        msg = (
            f"{what} {canonical_sql(value)}: Expression '{canonical_sql(column)}' is not being "
            f"grouped; add it to GROUP BY or aggregate it, e.g. MAX({canonical_sql(column)})"
        )
        raise DefinitionError(msg)


def _covered(column: exp.Column, root: exp.Expr, keys: set[str]) -> bool:
    """True when an ancestor of `column` (up to `root`) is a GROUP BY expression."""
    node: exp.Expr | None = column
    while node is not None:
        if canonical_sql(node) in keys:
            return True
        if node is root:
            return False
        node = node.parent
    return False


def _stripped(node: exp.Expr, scope: _Scope) -> exp.Expr:
    """A copy of `node` with the FROM alias dropped from its columns (`t.amount` -> `amount`)."""
    copy = node.copy()
    for column in _columns(copy):
        if column.table and column.table.lower() in scope.qualifiers:
            column.set("table", None)
    return copy
