"""Planning a window view: Flink's TUMBLE / HOP / CUMULATE window table functions aggregated.

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
DESCRIPTOR(c), slide, size)` with size a whole multiple of slide, `CUMULATE(TABLE
t, DESCRIPTOR(c), step, size)` with size a whole multiple of step; an optional
last interval is the window offset (any sign; TUMBLE's shorter than its size);
arguments may be named (`SIZE => INTERVAL ...`, `chronolake.schema.dialect`); the DESCRIPTOR
column is the source's rowtime attribute when it declares `WATERMARK FOR`; a
source without one follows processing time (its windows close by the clock)
and the DESCRIPTOR column must then be a TIMESTAMP or TIMESTAMP_LTZ column;
GROUP BY holds both `window_start` and `window_end`; every other SELECT item
is grouped or aggregated. `window_time` (end − 1 ms) may be selected too.
`SESSION(TABLE t [PARTITION BY (k, ...)], DESCRIPTOR(c), gap)` takes a positive
gap and no offset; its sessions are per PARTITION BY key, one over all rows
without it, and the GROUP BY aggregates within them (`chronolake.windows.session`).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator, Mapping

from pydantic import BaseModel, ConfigDict, Field
from sqlglot import exp

from chronolake.errors import DefinitionError
from chronolake.schema import (
    ComputedColumn,
    MetadataColumn,
    PhysicalColumn,
    StartupMode,
    TableSpec,
    ViewSpec,
)
from chronolake.schema.dialect import (
    TableArgument,
    canonical_sql,
    expression_type,
    is_timestamp_type,
    row_field_type,
    spark_sql,
)
from chronolake.schema.intervals import interval_millis, whole_millis
from chronolake.schema.windows import (
    WINDOW_COLUMNS,
    WINDOW_END,
    WINDOW_START,
    WindowKind,
    Windows,
)
from chronolake.sql._names import lookup, relation_name
from chronolake.sql.query import parse_query

_WINDOW_FUNCTIONS = ("TUMBLE", "HOP", "CUMULATE", "SESSION")
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
    slide_ms: int = Field(
        ..., gt=0, description="Window slide (the size for TUMBLE, the step for CUMULATE)."
    )
    offset_ms: int = Field(0, description="Window offset: shifts every window bound (ms).")
    gap_ms: int | None = Field(None, gt=0, description="SESSION: the gap that closes a session.")
    partition_keys: tuple[str, ...] = Field(
        (), description="SESSION: its PARTITION BY columns; sessions per key (none: one).",
    )
    group_keys: tuple[str, ...] = Field((), description="GROUP BY items besides the window.")
    items: tuple[WindowItem, ...] = Field(..., description="The SELECT items, in order.")
    where: str | None = Field(None, description="Filter on source rows, before windowing.")
    having: str | None = Field(None, description="Filter on the aggregated groups.")
    rows: bool = Field(
        False, description="No GROUP BY: the SELECT over each fired row and window, not "
        "aggregated (the window TVF under a window Top-N, `chronolake.sql.window_rank`).",
    )

    @property
    def windows(self) -> Windows:
        """The windows rows are assigned to (`chronolake.windows.assign`)."""
        return Windows(kind=self.kind, size_ms=self.size_ms, slide_ms=self.slide_ms,
                       offset_ms=self.offset_ms)

    def selected_as(self, column: str) -> str | None:
        """The output name the SELECT gives window column `column` (`window_start`, ...)
        when it selects it as it is, perhaps renamed; None when it does not."""
        return next((item.name for item in self.items
                     if item.expression.strip("`").lower() == column), None)

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
    query: str, specs: Mapping[str, TableSpec | ViewSpec], *, rows: bool = False
) -> WindowPlan:
    """Validate a window view's query against the catalog (Flink's rules, see the module).

    With `rows`, the query is a window TVF's rows, `SELECT <items> FROM TABLE(TUMBLE(...))
    [WHERE ...]`, without GROUP BY: each item is evaluated on each fired row and window.
    """
    tree = parse_query(query)
    select, call = _window_select(tree)
    written = _written(call)
    source = _source(call, specs, written)
    session = _session(call, source, written)
    windows = session[0] if session else _windows(call, written)
    time_column = _time_column(source, call.expressions[1], written)
    scope = _Scope(source, qualifiers=_qualifiers(select, source))
    where = select.args.get("where")
    if where is not None:
        _check_where(where.this, scope)
    group_keys = [] if rows else _group_keys(select, scope)
    grouped = [_stripped(key, scope) for key in group_keys]
    items = _row_items(select, scope) if rows else _items(select, scope, grouped)
    having = select.args.get("having")
    if having is not None:
        _check_columns(having.this, scope, allow_window=True)
        _require_grouped(having.this, grouped, scope, what="HAVING")
    return WindowPlan(
        query=canonical_sql(tree),
        source=source,
        time_column=time_column,
        kind=windows.kind,
        size_ms=windows.size_ms,
        slide_ms=windows.slide_ms,
        offset_ms=windows.offset_ms,
        gap_ms=windows.size_ms if session else None,
        partition_keys=session[1] if session else (),
        group_keys=tuple(
            spark_sql(key) for key in grouped if not _is_window_column(key)
        ),
        items=items,
        where=spark_sql(_stripped(where.this, scope)) if where is not None else None,
        having=spark_sql(_stripped(having.this, scope)) if having is not None else None,
        rows=rows,
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
    if name not in WindowKind.__members__:
        msg = (
            f"{written}: {name} windows are not supported; chronolake runs "
            f"{', '.join(WindowKind)} window table functions"
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


def _windows(call: exp.Anonymous, written: str) -> Windows:
    """The windows of TUMBLE(data, timecol, size[, offset]), HOP(data, timecol, slide, size[,
    offset]) or CUMULATE(data, timecol, step, size[, offset]), checked as Flink's planner does
    (`WindowUtil.convertToWindowingStrategy`), with its wording."""
    kind = WindowKind(call.name.upper())
    arguments = call.expressions
    names = {WindowKind.TUMBLE: ("size",), WindowKind.HOP: ("slide", "size"),
             WindowKind.CUMULATE: ("step", "size")}[kind]
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
    if len(intervals) not in (len(names), len(names) + 1):
        signature = ", ".join(["TABLE <table>", "DESCRIPTOR(<time column>)", *names])
        msg = (
            f"{written}: Invalid number of arguments to function '{kind}'; write "
            f"{kind}({signature}[, offset])"
        )
        raise DefinitionError(msg)
    millis = {name: _interval_ms(arg, written, kind=kind, what=name) for name, arg in zip(
        [*names, "offset"], intervals, strict=False
    )}
    size, offset = millis["size"], millis.get("offset", 0)
    slide = millis.get("slide", millis.get("step", size))
    fix = "; write a positive interval, e.g. INTERVAL '10' MINUTES"
    if kind is WindowKind.TUMBLE and size <= 0:
        msg = (
            f"{written}: TUMBLE table function based aggregate requires size to be positive, "
            f"but got {size} ms{fix}"
        )
        raise DefinitionError(msg)
    if kind is WindowKind.HOP and (slide <= 0 or size <= 0):
        msg = (
            f"{written}: HOP table function based aggregate requires slide and size to be "
            f"positive, but got slide {slide} ms and size {size} ms{fix}"
        )
        raise DefinitionError(msg)
    if kind is WindowKind.CUMULATE and (slide <= 0 or size <= 0):
        msg = (
            f"{written}: CUMULATE table function based aggregate requires maxSize and step to "
            f"be positive, but got maxSize {size} ms and step {slide} ms{fix}"
        )
        raise DefinitionError(msg)
    if size % slide:
        smaller, larger = size // slide * slide, (size // slide + 1) * slide
        part = "step" if kind is WindowKind.CUMULATE else "slide"
        problem = (
            f"CUMULATE table function based aggregate requires maxSize must be an integral "
            f"multiple of step, but got maxSize {size} ms and step {slide} ms"
            if kind is WindowKind.CUMULATE else
            f"HOP window must satisfy slide|size, but got size {size}ms and slide {slide}ms"
        )
        msg = (
            f"{written}: {problem}; make the size a whole multiple of the {part}, e.g. "
            f"{max(smaller, slide)}ms or {larger}ms"
        )
        raise DefinitionError(msg)
    if kind is WindowKind.TUMBLE and abs(offset) >= size:
        same = offset % size
        hint = f"an offset of {same} ms places the windows alike" if same else "drop the offset"
        msg = (
            f"{written}: TUMBLE table function parameters must satisfy abs(offset) < size, but "
            f"got size {size} ms and offset {offset} ms; {hint}"
        )
        raise DefinitionError(msg)
    return Windows(kind=kind, size_ms=size, slide_ms=slide, offset_ms=offset)


def _interval_ms(node: exp.Expr, written: str, *, kind: WindowKind, what: str) -> int:
    """Milliseconds of `INTERVAL 'n' UNIT` (SECOND, MINUTE, HOUR, DAY; plural allowed), of
    any sign (`INTERVAL '-16' MINUTES`, `-INTERVAL '16' MINUTES`): the caller checks it."""
    example = "INTERVAL '16' MINUTES or INTERVAL '-16' MINUTES" if what == "offset" else (
        "INTERVAL '10' MINUTES"
    )
    sign, interval = (-1, node.this) if isinstance(node, exp.Neg) else (1, node)
    if not isinstance(interval, exp.Interval):
        msg = (
            f"{written}: Cannot apply '{kind}' to {canonical_sql(node)} as its {what}. "
            f"Supported form(s): '{kind}(TABLE table_name, DESCRIPTOR(timecol), datetime "
            f"interval{', datetime interval' if kind is not WindowKind.TUMBLE else ''}"
            f"[, datetime interval])'; write the {what} as an interval, e.g. {example}"
        )
        raise DefinitionError(msg)
    exact = interval_millis(interval)
    if exact is None:
        msg = (
            f"{written}: the window {what} must be a day-time interval with one unit "
            f"(SECOND, MINUTE, HOUR or DAY), e.g. {example}; got {canonical_sql(node)}"
        )
        raise DefinitionError(msg)
    millis = whole_millis(sign * exact)
    if millis is None:
        kind_of = "whole" if what == "offset" else "positive whole"
        msg = (
            f"{written}: the window {what} {canonical_sql(node)} must be a {kind_of} "
            f"number of milliseconds, e.g. {example}"
        )
        raise DefinitionError(msg)
    return millis


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
        if not keys:  # a window TVF's rows alone: chronolake runs them aggregated or ranked
            msg += (
                ", or rank the window's rows with a window Top-N (SELECT * FROM (SELECT *, "
                "ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY ...) AS "
                "rownum FROM TABLE(...)) WHERE rownum <= N); a window table function's rows "
                "alone are not run"
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


def _row_items(select: exp.Select, scope: _Scope) -> tuple[WindowItem, ...]:
    """The SELECT items of a window TVF's rows: `*` is the source's columns then the window's;
    no aggregate, no OVER (the window Top-N planner takes the ranking out first)."""
    items: list[WindowItem] = []
    for index, projection in enumerate(select.expressions):
        value = projection.this if isinstance(projection, exp.Alias) else projection
        if isinstance(value, exp.Star) or (isinstance(value, exp.Column)
                                           and isinstance(value.this, exp.Star)):
            names = [*(c.name for c in scope.source.columns), *WINDOW_COLUMNS]
            items += [WindowItem(name=name, expression=f"`{name}`") for name in names]
            continue
        if value.find(exp.AggFunc, exp.Window) is not None:
            msg = (
                f"SELECT {canonical_sql(value)}: a window table function's rows are not "
                "aggregated here; aggregate in a subquery with GROUP BY window_start, "
                "window_end, <keys>"
            )
            raise DefinitionError(msg)
        _check_columns(value, scope, allow_window=True)
        named = isinstance(projection, exp.Alias) or isinstance(value, exp.Column)
        items.append(WindowItem(
            name=projection.alias_or_name if named else f"EXPR${index}",
            expression=spark_sql(_stripped(value, scope)),
        ))
    refuse_repeated_names(items, "the window view")
    return tuple(items)


def refuse_repeated_names(items: list[WindowItem], where: str) -> None:
    """Refuse two SELECT items of one name: the view's table needs distinct columns."""
    lowered = [item.name.lower() for item in items]
    twice = next((item.name for item in items if lowered.count(item.name.lower()) > 1), None)
    if twice is not None:
        msg = (
            f"SELECT: the column name {twice!r} appears twice in {where}; give one of them "
            "another alias (expr AS other_name)"
        )
        raise DefinitionError(msg)


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


# -- SESSION ---------------------------------------------------------------------------------


def _session(
    call: exp.Anonymous, source: TableSpec, written: str
) -> tuple[Windows, tuple[str, ...]] | None:
    """SESSION(TABLE t [PARTITION BY (k, ...)], DESCRIPTOR(timecol), gap): (windows with the
    gap as size, the partition columns), checked as Flink does; None for the other windows.

    A PARTITION BY on another window function's table is refused (Flink: row semantics)."""
    first = call.expressions[0]
    partition = first.args.get("partition") or [] if isinstance(first, TableArgument) else []
    name = call.name.upper()
    if name != WindowKind.SESSION:
        if partition:
            msg = (
                f"{written}: Only table with set semantics may be partitioned. Invalid PARTITION "
                f"BY clause in the 0-th operand of table function '{name}': only SESSION takes "
                "TABLE t PARTITION BY k; drop the PARTITION BY and GROUP BY the keys instead"
            )
            raise DefinitionError(msg)
        return None
    signature = "SESSION(TABLE table_name [PARTITION BY (keycols, ...)], DESCRIPTOR(timecol), gap)"
    arguments = call.expressions
    if len(arguments) == 4 and isinstance(arguments[1], exp.Column) and partition:
        msg = (
            f"{written}: several PARTITION BY columns go in parentheses, written "
            f"TABLE {canonical_sql(first.this)} PARTITION BY ({canonical_sql(partition[0])}, "
            f"{canonical_sql(arguments[1])})"
        )
        raise DefinitionError(msg)
    descriptor = arguments[1] if len(arguments) > 1 else None
    if len(arguments) != 3 or not (
        isinstance(descriptor, exp.Anonymous) and descriptor.name.upper() == "DESCRIPTOR"
        and len(descriptor.expressions) == 1 and isinstance(descriptor.expressions[0], exp.Column)
    ):
        msg = (
            f"{written}: Invalid arguments to function 'SESSION' (it takes no offset); write "
            f"{signature}, e.g. SESSION(TABLE t PARTITION BY user_id, DESCRIPTOR(ts), "
            "INTERVAL '10' MINUTES)"
        )
        raise DefinitionError(msg)
    gap = arguments[2]
    negated = isinstance(gap, exp.Neg) and isinstance(gap.this, exp.Interval)
    if not (isinstance(gap, exp.Interval) or negated):
        msg = (
            f"{written}: Cannot apply 'SESSION' to {canonical_sql(gap)} as its gap. Supported "
            f"form(s): '{signature}'; write the gap as an interval, e.g. INTERVAL '10' MINUTES"
        )
        raise DefinitionError(msg)
    gap_ms = _interval_ms(gap, written, kind=WindowKind.SESSION, what="gap")
    if gap_ms <= 0:
        msg = (
            f"{written}: SESSION table function based aggregate requires gap to be positive, "
            f"but got gap {gap_ms} ms; write a positive interval, e.g. INTERVAL '10' MINUTES"
        )
        raise DefinitionError(msg)
    keys = tuple(_partition_column(column, source, written) for column in partition)
    return Windows(kind=WindowKind.SESSION, size_ms=gap_ms, slide_ms=gap_ms), keys


def _partition_column(column: exp.Expr, source: TableSpec, written: str) -> str:
    """A PARTITION BY column: a top-level column of the source, as declared."""
    declared = source.column(column.name) if isinstance(column, exp.Column) else None
    if declared is None or (isinstance(column, exp.Column) and column.table
                            and column.table.lower() != source.name.lower()):
        names = [c.name for c in source.columns]
        close = difflib.get_close_matches(column.name.lower(), [n.lower() for n in names], n=1)
        hint = next((n for n in names if close and n.lower() == close[0]), None)
        fix = f"did you mean {hint!r}?" if hint else f"partition by some of {', '.join(names)}"
        msg = (
            f"{written}: PARTITION BY {canonical_sql(column)}: Column '{column.name}' not found "
            f"in table {source.name!r}; {fix}"
        )
        raise DefinitionError(msg)
    return declared.name
