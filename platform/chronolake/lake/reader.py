"""A declared table's changelog and state, whichever way its rows become changes.

`'changelog' = 'cdf'` reads Delta's change data feed, `'append'` reads added
rows as inserts, `'op-column'` reads added rows and takes each row's kind from
its operation column (which the changelog then drops: the kind is the
operation). Every result follows `chronolake.lake.changelog`.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from chronolake.errors import DefinitionError
from chronolake.lake.backend import LakeBackend
from chronolake.lake.changelog import ARRIVAL_ORDER, POSITION, ROW_KIND, SYSTEM_COLUMNS, RowKind
from chronolake.lake.file_span import FileSpan
from chronolake.lake.layout import table_location
from chronolake.lake.op_column import op_row_kind
from chronolake.lake.selector import backend_for
from chronolake.location import LocationLike
from chronolake.schema import ChangelogMode, TableSpec


def read_changelog(
    spark: SparkSession,
    backend: LakeBackend | None,
    spec: TableSpec,
    root: LocationLike,
    start_version: int,
    end_version: int | None = None,
) -> DataFrame:
    """The changes of versions `start_version..end_version` (inclusive; latest when None),
    read through `backend` (None: `backend_for(spark)`).

    Example:
        >>> read_changelog(spark, None, rates, "/lake", 1).orderBy(*ARRIVAL_ORDER)
    """
    backend = backend or backend_for(spark)
    path = table_location(root, spec.options.path)
    mode = spec.options.changelog
    if mode is ChangelogMode.CDF:
        return backend.changes(path, start_version, end_version)
    rows = backend.appends(path, start_version, end_version)
    if mode is ChangelogMode.APPEND:
        return rows
    op = _op_column(spec)
    return rows.withColumn(ROW_KIND, op_row_kind(op, table=spec.name)).drop(op)


def read_table_state(
    spark: SparkSession,
    backend: LakeBackend | None,
    spec: TableSpec,
    root: LocationLike,
    version: int | None = None,
) -> DataFrame:
    """The table's rows at `version` (latest when None), without system columns, read
    through `backend` (None: `backend_for(spark)`).

    For `cdf` and `append` tables this is the Delta snapshot. For `op-column`
    tables it is the changelog applied: per primary key the last change by
    arrival order, kept unless it is a `-D` (or a `-U` whose `+U` has not
    arrived), which needs the table's PRIMARY KEY.
    """
    backend = backend or backend_for(spark)
    path = table_location(root, spec.options.path)
    if spec.options.changelog is not ChangelogMode.OP_COLUMN:
        return backend.snapshot(path, version)
    if not spec.primary_key:
        msg = (
            f"table {spec.name!r}: the state of a 'changelog' = 'op-column' table is its "
            "changes applied per key, so it needs a key; expected PRIMARY KEY (...) NOT "
            "ENFORCED; declare the key the operation column refers to"
        )
        raise DefinitionError(msg)
    changes = read_changelog(spark, backend, spec, root, 0, version)
    return latest_per_key(changes, spec.primary_key).drop(*SYSTEM_COLUMNS)


def read_table_arrivals(
    spark: SparkSession,
    backend: LakeBackend | None,
    spec: TableSpec,
    root: LocationLike,
    version: int,
    span: FileSpan | None = None,
) -> DataFrame:
    """`read_table_state` at `version` plus `_position`, the order the rows arrived in: by
    the commit that added each row, then the row's place in that commit
    (`LakeBackend.arrival_snapshot`), so a key written several times has its latest write
    last. An op-column table's state holds one row per key, so any distinct positions do.
    A `span` skips the files that hold no rows in it (`FileSpan`; an op-column table's state
    is read whole).
    """
    backend = backend or backend_for(spark)
    if spec.options.changelog is not ChangelogMode.OP_COLUMN:
        return backend.arrival_snapshot(table_location(root, spec.options.path), version,
                                        span=span)
    state = read_table_state(spark, backend, spec, root, version)
    return state.withColumn(POSITION, F.monotonically_increasing_id())


def latest_per_key(changes: DataFrame, key: Sequence[str]) -> DataFrame:
    """A changelog applied: per key its last change by arrival, unless that is a `-D` (or a
    `-U` whose `+U` has not arrived); system columns kept."""
    latest = Window.partitionBy(*(F.col(f"`{k}`") for k in key)).orderBy(
        *(F.col(c).desc() for c in ARRIVAL_ORDER)
    )
    return (
        changes.withColumn("__chronolake_rank", F.row_number().over(latest))
        .where(
            (F.col("__chronolake_rank") == 1)
            & ~F.col(ROW_KIND).isin(RowKind.DELETE.value, RowKind.UPDATE_BEFORE.value)
        )
        .drop("__chronolake_rank")
    )


def _op_column(spec: TableSpec) -> str:
    if not spec.options.op_column:
        msg = (
            f"table {spec.name!r}: 'changelog' = 'op-column' needs the column that holds the "
            "operation; expected e.g. 'changelog.op-column' = 'op'"
        )
        raise DefinitionError(msg)
    return spec.options.op_column
