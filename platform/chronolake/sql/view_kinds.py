"""What a view is, and what its output carries.

A view is a *derived table* (run incrementally, its output a changelog table)
when an operator runs it (the operations of `chronolake.sql.operations`, which
tells a view's kind: a temporal join, a window aggregate or Top-N, a
deduplication, an interval join, a history); any other view is computed from
its inputs on read, and a plain one (a projection or filter of one table) can
feed an operator, change by change. A derived table's output
carries, as Flink's operators do:

- an *upsert key*: the probe's primary key through a temporal join, window
  bounds plus group keys out of a window aggregate, the partition key of a
  deduplication (and of a window Top-N, plus its rank number unless it keeps
  one rank), the versioned table's key plus `valid_from` out of a history; its
  rows are unique on it (an interval join has none);
- a *time attribute*: the probe's rowtime through a temporal join,
  `window_time` out of a window, the ordering rowtime of a deduplication,
  `valid_from` out of a history, when the SELECT keeps it;
- a *changelog mode*: updating (its changes hold -U/+U/-D) when its input is,
  through a temporal join (without a probe key, a retract stream: a multiset whose
  retractions take back an equal row, `chronolake.lake.multisets`) or an interval
  join (a retract stream: it has no key); insert-only out of a window aggregate; updating
  out of a keep-last deduplication, insert-only out of a keep-first one; updating
  out of a history.

A plain view passes its source's key, time attribute and changelog mode through.

A view whose output is updating must keep its upsert key: CREATE VIEW refuses
one that projects it away, naming the column.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from pyspark.sql.types import StructType
from sqlglot import exp

from chronolake.errors import DefinitionError
from chronolake.lake.multisets import ROW_IDENTITY
from chronolake.schema.join_kind import JoinKind
from chronolake.schema.options import ChangelogMode, DeltaOptions
from chronolake.schema.spec import (
    PhysicalColumn,
    TableSpec,
    ThroughView,
    ViewKind,
    ViewSpec,
    WatermarkSpec,
)
from chronolake.schema.windows import WINDOW_END, WINDOW_START, WINDOW_TIME
from chronolake.spark.types import flink_type
from chronolake.sql._names import lookup, relation_name
from chronolake.sql.current_watermark import refuse_current_watermark
from chronolake.sql.history import VALID_FROM, history_read, versioned, written_read
from chronolake.sql.interval import plan_interval_join
from chronolake.sql.operations import (
    DEDUPLICATION,
    HISTORY,
    INTERVAL_JOIN,
    PLAIN,
    TEMPORAL_JOIN,
    WINDOW_AGGREGATE,
    WINDOW_TOP_N,
    Operation,
    operation_of,
)
from chronolake.sql.query import parse_query, single_relation, temporal_joins
from chronolake.sql.window_rank import rank_outline

Catalog = Mapping[str, TableSpec | ViewSpec]


def view_kind(view: ViewSpec) -> ViewKind:
    """The view's kind: as recorded when it was registered (`with_kind`)."""
    return view.view_kind if view.view_kind is not None else operation_of(view).kind


def with_kind(view: ViewSpec) -> ViewSpec:
    """`view` with its kind recorded, told from its query once."""
    return view.model_copy(update={"view_kind": operation_of(view, recorded=False).kind})


def check_current_watermark(view: ViewSpec) -> None:
    """Refuse `CURRENT_WATERMARK` where the view's operator cannot give it a value."""
    kind = view_kind(view)
    if kind is not ViewKind.PLAIN:
        refuse_current_watermark(parse_query(view.query), view.name,
                                 kind=kind.value.replace("_", " "),
                                 filter_only=kind is ViewKind.WINDOW_AGGREGATE)


def is_derived(spec: TableSpec | ViewSpec) -> bool:
    """Whether `spec` is a derived table: a view run incrementally into a changelog table."""
    if not isinstance(spec, ViewSpec):
        return False
    return view_kind(spec) is not ViewKind.PLAIN


def is_updating(spec: TableSpec | ViewSpec) -> bool:
    """Whether the changes of `spec` may hold -U/+U/-D rows."""
    if isinstance(spec, TableSpec):
        return spec.options.changelog is not ChangelogMode.APPEND
    return spec.updating


def output_table_spec(view: ViewSpec, schema: StructType, path: str) -> TableSpec:
    """A derived view's output as a source table: its stored columns (not a multiset's hidden
    row identity), its upsert key, its time attribute (with a watermark taken from the
    commits) and its change data feed."""
    return TableSpec(
        name=view.name,
        columns=_stored_columns(view, StructType(
            [f for f in schema.fields if f.name != ROW_IDENTITY])),
        watermark=_time_attribute(view),
        primary_key=view.primary_key,
        options=DeltaOptions(
            path=path,
            changelog=ChangelogMode.CDF if view.updating else ChangelogMode.APPEND,
        ),
        derived=True,
    )


def through_view_spec(view: ViewSpec, source: TableSpec, schema: StructType) -> TableSpec:
    """A plain view over `source` as an operator's input: the view's columns (`schema`), the
    key and time attribute it passes through, and `source`'s changes, read through its SELECT.
    Its ticks and alignment are its source's own business: the view reads in one tick."""
    options = source.options.model_copy(update={
        "max_rows_per_tick": None, "alignment_group": None, "split_by": None,
    })
    return TableSpec(
        name=view.name, columns=_stored_columns(view, schema), watermark=_time_attribute(view),
        primary_key=view.primary_key, options=options,
        through_view=ThroughView(source=source, query=view.query),
    )


def plain_source(query: str) -> str | None:
    """The one table a plain view projects and filters (Flink's Calc: row by row, so its
    changes keep their kinds); None for a view that joins, groups, orders or ranks."""
    table = single_relation(query)
    if table is None or table.args.get("version") is not None:
        return None
    return relation_name(table)


def derived_view(view: ViewSpec, catalog: Catalog) -> ViewSpec:
    """`view` with the upsert key, time attribute and changelog mode its output carries."""
    select = parse_query(view.query)
    if not isinstance(select, exp.Select):
        return view
    return _OUTPUTS[operation_of(view)](view, select, catalog)


def _through_temporal_join(view: ViewSpec, select: exp.Select, catalog: Catalog) -> ViewSpec:
    """The probe's key and rowtime, through the join; updating when the probe is."""
    refs = temporal_joins(view.query)
    ref = refs[0] if refs else None
    if ref is None or ref.probe_table is None:
        return view
    probe = lookup(catalog, ref.probe_table, reader=f"view {view.name!r}")
    updating = is_updating(probe)
    key = tuple(_passed_through(select, ref.probe_alias, column) for column in probe.primary_key)
    dropped = [column for column, out in zip(probe.primary_key, key, strict=True) if out is None]
    if dropped and updating:
        msg = (
            f"view {view.name!r}: its probe {probe.name!r} has updates and deletes, which the "
            f"view's rows follow by the probe's primary key ({', '.join(probe.primary_key)}), "
            f"but the SELECT drops {dropped[0]!r}; add {ref.probe_alias}.{dropped[0]} to the "
            "SELECT list"
        )
        raise DefinitionError(msg)
    rowtime = _passed_through(select, ref.probe_alias, probe.rowtime) if probe.rowtime else None
    return view.model_copy(update={
        "primary_key": () if dropped else tuple(k for k in key if k is not None),
        "rowtime": rowtime,
        "updating": updating,
    })


def _through_plain_view(view: ViewSpec, select: exp.Select, catalog: Catalog) -> ViewSpec:
    """The key, time attribute and changelog mode a projection or filter passes through;
    nothing through any other plain view."""
    source_name = plain_source(view.query)
    if source_name is None:
        return view
    source = lookup(catalog, source_name, reader=f"view {view.name!r}")
    alias = select.args["from_"].this.alias_or_name
    key = [_passed_through(select, alias, column) for column in source.primary_key]
    return view.model_copy(update={
        "primary_key": tuple(k for k in key if k is not None) if all(key) else (),
        "rowtime": _passed_through(select, alias, source.rowtime),
        "updating": is_updating(source),
    })


def _out_of_interval_join(view: ViewSpec, select: exp.Select, catalog: Catalog) -> ViewSpec:
    """An interval join's output (checked with Flink's rules): no key; insert-only, or, when
    an input is updating, a retract stream (a multiset). Flink keeps both
    inputs' rowtimes as time attributes; a table has one: the preserved side's (the right's
    for a RIGHT JOIN, else the left's) when the SELECT keeps it, else the other's."""
    plan = plan_interval_join(view.query, catalog, view=view.name)
    sides = [(plan.left_alias, plan.left_time), (plan.right_alias, plan.right_time)]
    if plan.kind is JoinKind.RIGHT:
        sides.reverse()
    kept = [_passed_through(select, alias, column) for alias, column in sides]
    return view.model_copy(update={
        "primary_key": (), "rowtime": next((k for k in kept if k), None),
        "updating": is_updating(plan.left) or is_updating(plan.right),
    })


def _out_of_history(view: ViewSpec, select: exp.Select, catalog: Catalog) -> ViewSpec:
    """A history's rows are the versions of the table it reads, keyed by that table's key
    and `valid_from` (the time attribute); updating: a late version splits an interval."""
    table = history_read(view.query)
    assert table is not None, "a history view reads one history"
    spec = lookup(catalog, relation_name(table), reader=f"view {view.name!r}")
    how = versioned(spec, f"view {view.name!r} reads {written_read(table)}")
    columns = (*how.key, VALID_FROM)
    key = [_passed_through(select, table.alias_or_name, column) for column in columns]
    dropped = [column for column, out in zip(columns, key, strict=True) if out is None]
    if dropped:
        msg = (
            f"view {view.name!r}: its rows are the versions of {spec.name!r}, keyed by "
            f"({', '.join(columns)}), which later runs update; the SELECT drops "
            f"{dropped[0]!r}: add it to the SELECT list"
        )
        raise DefinitionError(msg)
    kept = tuple(k for k in key if k is not None)
    return view.model_copy(update={"primary_key": kept, "rowtime": kept[-1], "updating": True})


def _stored_columns(view: ViewSpec, schema: StructType) -> tuple[PhysicalColumn, ...]:
    """The view's columns as a table declares them; a time attribute's precision is <= 3."""
    columns = []
    for field in schema.fields:
        declared = flink_type(field.dataType)
        if view.rowtime is not None and field.name.lower() == view.rowtime.lower():
            declared = declared.replace("(6)", "(3)")
        columns.append(PhysicalColumn(name=field.name, type=declared))
    return tuple(columns)


def _time_attribute(view: ViewSpec) -> WatermarkSpec | None:
    """The view's rowtime as a table's: its watermark comes from upstream, not from a rule."""
    if view.rowtime is None:
        return None
    return WatermarkSpec(rowtime=view.rowtime, expression=view.rowtime)


def _out_of_window(view: ViewSpec, select: exp.Select, catalog: Catalog) -> ViewSpec:
    """Window bounds plus group keys, when the SELECT keeps them all; `window_time`."""
    group = select.args.get("group")
    keys = list(group.expressions) if group else []
    key = [
        _passed_through(select, None, k.name) if isinstance(k, exp.Column) else None
        for k in keys
    ]
    # the bounds may be renamed (Flink's cascading windows do): they stay the key's
    names = {k.name.lower() for k, out in zip(keys, key, strict=True) if out is not None}
    complete = all(k is not None for k in key) and {WINDOW_START, WINDOW_END} <= names
    return view.model_copy(update={
        "primary_key": tuple(k for k in key if k is not None) if complete else (),
        "rowtime": _passed_through(select, None, WINDOW_TIME),
        "updating": False,
    })


def _out_of_window_rank(view: ViewSpec, select: exp.Select, catalog: Catalog) -> ViewSpec:
    """A window Top-N's output (insert-only), as Flink's `FlinkRelMdUniqueKeys` for a rank
    says: unique on its PARTITION BY columns (window bounds first) when one rank is kept,
    plus the rank number when the SELECT keeps it; `window_time` through the ranking, or the
    window TVF's rowtime (both stay time attributes in Flink)."""
    outline = rank_outline(view.query)

    def out(column: str | None) -> str | None:  # through the ranking, then the outer SELECT
        return _passed_through(outline.outer, None, _passed_through(
            outline.ranking, None, column))

    key = [out(column) for column in outline.partition_by]
    rank = _passed_through(outline.outer, None, outline.rank)
    if not outline.single_rank:
        key = [*key, rank] if rank is not None else [None]
    rowtime = out(WINDOW_TIME if outline.aggregate is None else _passed_through(
        outline.aggregate, None, WINDOW_TIME))
    if rowtime is None and outline.aggregate is None and outline.source is not None:
        rowtime = out(lookup(catalog, outline.source, reader=f"view {view.name!r}").rowtime)
    return view.model_copy(update={
        "primary_key": tuple(k for k in key if k is not None) if all(key) else (),
        "rowtime": rowtime,
        "updating": False,
    })


_OUTPUTS: Mapping[Operation, Callable[[ViewSpec, exp.Select, Catalog], ViewSpec]] = {
    TEMPORAL_JOIN: _through_temporal_join,
    WINDOW_TOP_N: _out_of_window_rank,
    WINDOW_AGGREGATE: _out_of_window,
    DEDUPLICATION: lambda view, select, catalog: view,  # `chronolake.sql.views` derives it
    INTERVAL_JOIN: _out_of_interval_join,
    HISTORY: _out_of_history,
    PLAIN: _through_plain_view,
}
"""What each operation's output carries, told from the view's SELECT."""


def _passed_through(select: exp.Select, alias: str | None, column: str | None) -> str | None:
    """The output name of `alias.column` when the SELECT passes it through unchanged."""
    if column is None:
        return None
    for projection in select.expressions:
        value = projection.this if isinstance(projection, exp.Alias) else projection
        if isinstance(value, exp.Star):
            qualifier = value.args.get("table")
            if alias is None or qualifier is None or qualifier.name == alias:
                return column
            continue
        if not isinstance(value, exp.Column) or value.name.lower() != column.lower():
            continue
        if isinstance(value.this, exp.Star):
            if alias is None or value.table in ("", alias):
                return column
            continue
        if alias is None or value.table in ("", alias):
            return projection.alias_or_name
    return None
