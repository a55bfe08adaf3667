"""A declared table as a Spark relation: its rows with computed and metadata columns applied;
a plain view's changes as its SELECT makes them."""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from sqlglot import exp

from chronolake.errors import DefinitionError
from chronolake.lake import LakeBackend, read_changelog, read_table_state
from chronolake.lake.changelog import (
    COMMIT_TIMESTAMP,
    COMMIT_VERSION,
    SYSTEM_COLUMNS,
)
from chronolake.lake.layout import table_location
from chronolake.lake.reader import latest_per_key
from chronolake.lake.stamps import recorded_watermarks
from chronolake.lake.tables import partition_columns
from chronolake.location import Location
from chronolake.schema import (
    ChangelogMode,
    ComputedColumn,
    MetadataColumn,
    MetadataKey,
    StartupMode,
    TableSpec,
)
from chronolake.schema.dialect import spark_sql, to_spark_sql
from chronolake.schema.options import SPLIT_BY_PARTITIONS
from chronolake.spark.types import spark_type
from chronolake.sql.current_watermark import (
    ROW_WATERMARK,
    bind,
    calls,
    held_by,
    with_row_watermark,
)
from chronolake.sql.query import parse_query
from chronolake.watermarks.assigner import WATERMARK_COLUMN, WatermarkAssigner
from chronolake.watermarks.recorded import in_force_by_commit

_METADATA_SOURCES = {
    MetadataKey.COMMIT_TIMESTAMP: COMMIT_TIMESTAMP,
    MetadataKey.COMMIT_VERSION: COMMIT_VERSION,
}


def with_declared_columns(frame: DataFrame, spec: TableSpec) -> DataFrame:
    """Project `frame` (physical columns plus changelog system columns) onto the declared columns.

    Columns come out in declaration order; computed columns are evaluated by
    Spark SQL; metadata columns come from the changelog's system columns. System
    columns present in `frame` are kept at the end, so operators still see
    arrival order and row kinds.
    """
    available = set(frame.columns)
    projected: list[Column] = []
    for column in spec.columns:
        if isinstance(column, ComputedColumn):
            projected.append(F.expr(to_spark_sql(column.expression)).alias(column.name))
        elif isinstance(column, MetadataColumn):
            source = _METADATA_SOURCES[column.key]
            if source not in available:
                raise DefinitionError(
                    f"table {spec.name!r}: metadata column {column.name!r} needs the changelog's "
                    f"{column.key.value}, which this read does not carry"
                )
            projected.append(F.col(source).cast(spark_type(column.type)).alias(column.name))
        else:
            if column.name not in available:
                stored = ", ".join(sorted(available - set(SYSTEM_COLUMNS)))
                raise DefinitionError(
                    f"table {spec.name!r}: column {column.name!r} is declared but the Delta "
                    f"table has only {stored}; fix the DDL or the table"
                )
            projected.append(F.col(f"`{column.name}`").cast(spark_type(column.type)))
    system = [F.col(name) for name in SYSTEM_COLUMNS if name in available]
    # Computed columns may refer to physical columns only (as in Flink), so one select suffices.
    return frame.select(*projected, *system)


def relation_dataframe(
    spark: SparkSession, backend: LakeBackend, spec: TableSpec, root: Location,
    version: int | None = None,
) -> DataFrame:
    """The table's state at `version` (latest when None; changelog applied) with its declared
    columns, no system columns.

    Metadata columns need each row's last change: an append-only table reads its
    whole changelog (every row is an insert), a keyed changelog its last change
    per key; a table with neither has no per-row commit to report.
    """
    if any(isinstance(c, MetadataColumn) for c in spec.columns):
        state = _state_with_commits(spark, backend, spec, root, version)
    else:
        state = read_table_state(spark, backend, spec, root, version)
    declared = with_declared_columns(state, spec)
    return declared.select(*[F.col(f"`{c.name}`") for c in spec.columns])


def changelog_dataframe(
    spark: SparkSession,
    backend: LakeBackend,
    spec: TableSpec,
    root: Location,
    start_version: int,
    end_version: int | None = None,
) -> DataFrame:
    """The table's changes between two versions with declared and system columns."""
    changes = read_changelog(spark, backend, spec, root, start_version, end_version)
    return with_declared_columns(changes, spec)


def through_view_rows(
    rows: DataFrame, query: str, carried: Sequence[str], source: TableSpec | None = None
) -> DataFrame:
    """A plain view's SELECT (`query`, over one relation) applied to each change of its
    source, as Flink's Calc applies it: the WHERE drops a change (an update's two halves are
    judged each on its own values), the SELECT list computes the view's columns, and the
    `carried` columns (row kind, arrival order, watermark annotations) pass through.
    `CURRENT_WATERMARK` of `source`'s rowtime is each row's `_watermark`, the watermark in
    force when it arrived (`chronolake.sql.current_watermark`)."""
    select = parse_query(query)
    alias = select.args["from_"].this.alias_or_name
    own = [c for c in rows.columns if c not in carried]
    if calls(select):
        held = held_by(source, per_row=True, qualifier=alias) if source else None
        select = bind(select, {alias.lower(): held} if held else {}, where=f"view {query!r}")
        if held is not None:
            rows = with_row_watermark(rows, held.rowtime)
    frame = rows.alias(alias)
    where = select.args.get("where")
    if where is not None:
        frame = frame.where(F.expr(spark_sql(where.this)))
    items: list[Column] = []
    for item in select.expressions:
        value = item.this if isinstance(item, exp.Alias) else item
        if isinstance(value, exp.Star) or isinstance(value.args.get("this"), exp.Star):
            items += [F.col(f"`{column}`") for column in own]
        else:
            items.append(F.expr(spark_sql(value)).alias(item.alias_or_name))
    return frame.select(*items, *(F.col(c) for c in carried))


def has_row_watermarks(spec: TableSpec) -> bool:
    """Whether `spec`'s rows arrive with event-time watermarks: a derived table's, as its
    commits recorded them; a source's, generated by its WATERMARK FOR (a source read
    snapshot-first follows processing time: none)."""
    if spec.rowtime is None:
        return False
    snapshot_first = spec.options.startup_mode is StartupMode.SNAPSHOT_THEN_CHANGELOG
    return spec.derived or not snapshot_first


def relation_with_row_watermarks(
    spark: SparkSession, backend: LakeBackend, spec: TableSpec, root: Location,
    version: int | None = None,
) -> DataFrame:
    """`relation_dataframe` plus `ROW_WATERMARK`, what `CURRENT_WATERMARK` is on each row: the
    watermark in force when the change that made the row arrived. For a source, its strategy
    applied over its commits in order (`WatermarkAssigner`: one Spark job, as a run's); for a
    derived table, the watermark the commit before the row's recorded."""
    changes = changelog_dataframe(spark, backend, spec, root, 0, version)
    path = table_location(root, spec.options.path)
    end = backend.latest_version(path) if version is None else version
    if spec.derived:
        in_force = in_force_by_commit(recorded_watermarks(backend, path, -1, end))
        stamped = changes.withColumn(WATERMARK_COLUMN, in_force)
    else:
        by_partitions = spec.options.split_by == SPLIT_BY_PARTITIONS
        partitions = partition_columns(path, end) if by_partitions else None
        assigner = WatermarkAssigner.for_table(spec, partition_columns=partitions)
        stamped = assigner.assign(changes).rows
    why = "CURRENT_WATERMARK reports when each row's last change arrived"
    state = _applied(spec, stamped, why=why, fix="read it without CURRENT_WATERMARK")
    assert spec.rowtime is not None, "CURRENT_WATERMARK binds per row only to a rowtime"
    with_value = with_row_watermark(state, spec.rowtime)
    return with_value.select(*[F.col(f"`{c.name}`") for c in spec.columns], ROW_WATERMARK)


def _state_with_commits(
    spark: SparkSession, backend: LakeBackend, spec: TableSpec, root: Location,
    version: int | None,
) -> DataFrame:
    changes = read_changelog(spark, backend, spec, root, 0, version)
    return _applied(spec, changes, why="its metadata columns report each row's last change",
                    fix="drop the metadata columns")


def _applied(spec: TableSpec, changes: DataFrame, *, why: str, fix: str) -> DataFrame:
    """The table's state as its changes applied, system columns kept: an append-only table's
    every change, a keyed table's last change per key; refused for a keyless one with
    updates, whose rows cannot be told apart (`why` needs them, `fix` says what else to do)."""
    if spec.options.changelog is ChangelogMode.APPEND:
        return changes
    if not spec.primary_key:
        raise DefinitionError(
            f"table {spec.name!r}: {why}, which a 'changelog' = "
            f"'{spec.options.changelog.value}' table can only tell per key; declare "
            f"PRIMARY KEY (...) NOT ENFORCED, or {fix}"
        )
    return latest_per_key(changes, spec.primary_key)
