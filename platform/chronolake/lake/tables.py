"""Whole-table facts for assets, without Spark: version, size, schema and a first look at the
rows.

These take a table location, not a spec: Dagster assets observe and
materialize tables without a changelog in sight. The log's facts (version, commits, schema,
partitioning) come from the one log reader, so they read the same whichever engine wrote
the table; those of the files (rows, values) from delta-rs's snapshot of them.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable
from deltalake.exceptions import DeltaError
from pyspark.sql.types import StructType

from chronolake.errors import ChronolakeError
from chronolake.lake.backend import not_a_delta_table
from chronolake.lake.deletion_vectors import deleted_rows
from chronolake.lake.log_reader import latest_version, read_commits
from chronolake.lake.storage import Storage
from chronolake.lake.table_state import table_state
from chronolake.location import LocationLike


def table_version(path: LocationLike) -> int:
    """The latest Delta version at `path`, from the log alone (no Spark)."""
    version = latest_version(Storage(path))
    if version is None:
        raise not_a_delta_table(path)
    return version


def is_table(path: LocationLike) -> bool:
    """Whether `path` holds a Delta table (a commit or checkpoint in its log, no Spark)."""
    return latest_version(Storage(path)) is not None


def latest_commits(path: LocationLike, count: int) -> list[dict[str, object]]:
    """The `count` latest commits' `commitInfo` (newest first, with `version` and
    `operationMetrics`), from the log alone."""
    latest = table_version(path)
    commits = read_commits(Storage(path), range(max(latest - count + 1, 0), latest + 1))
    return [{**commit.info, "version": version}
            for version, commit in sorted(commits.items(), reverse=True)]


def table_row_count(path: LocationLike) -> int:
    """Rows in the latest version, summed from the log's per-file statistics less the rows
    deletion vectors delete (no Spark).

    Files logged without statistics count as zero rows; every writer chronolake
    uses (delta-rs, Spark through `append_dataframe`) logs them.
    """
    table = _table(path)
    # One record count per active file: metadata-sized.
    counts = pa.table(table.get_add_actions(flatten=True))["num_records"]
    return sum(count or 0 for count in counts.to_pylist()) - deleted_rows(table).num_rows


def readable_row_count(path: LocationLike) -> int | None:
    """`table_row_count`, or None when the table cannot be read (a drop that crashed
    halfway through removing it)."""
    try:
        return table_row_count(path)
    except (ChronolakeError, DeltaError, OSError):
        return None


def stored_schema(path: LocationLike, version: int | None = None) -> StructType | None:
    """The schema of the Delta table at `path` (at `version`, else the latest), from its log
    alone (no Spark); None when `path` holds no Delta table (yet)."""
    latest = latest_version(Storage(path))
    if latest is None:
        return None
    return table_state(Storage(path), latest if version is None else version).logical_schema


def partition_columns(path: LocationLike, version: int) -> list[str]:
    """The Delta table's partition columns at `version`, from its log alone."""
    return list(table_state(Storage(path), version).partition_columns)


def _table(path: LocationLike, *, with_files: bool = True) -> DeltaTable:
    """The latest version; `with_files=False` for questions of the log alone (no file list)."""
    if not DeltaTable.is_deltatable(str(path)):
        raise not_a_delta_table(path)
    return DeltaTable(str(path), without_files=not with_files)


def first_rows(path: LocationLike, rows: int) -> pa.Table:
    """Up to `rows` rows of the latest version, read by delta-rs's own engine (which honours
    deletion vectors) batch by batch until there are enough: a handful, for a person."""
    reader = pa.RecordBatchReader.from_stream(_table(path).scan())
    batches: list[pa.RecordBatch] = []
    for batch in reader:  # a loop over batches, not rows
        batches.append(batch)
        if sum(b.num_rows for b in batches) >= rows:
            break
    return pa.Table.from_batches(batches, schema=reader.schema).slice(0, rows)


def column_minimum(path: LocationLike, column: str) -> object | None:
    """The smallest value of `column` in the latest version (None when the table has no such
    column or no value), one Arrow batch of that column at a time: no Spark. Read by
    delta-rs's own engine, which honours the deletion vectors Delta's MERGE writes."""
    table = _table(path)
    if column not in [field.name for field in table.schema().fields]:
        return None
    batches = pa.RecordBatchReader.from_stream(table.scan(columns=[column]))
    # One minimum per batch of a single column: the loop is over batches, not rows.
    minima = [pc.min(batch.column(0)).as_py() for batch in batches]
    return min((value for value in minima if value is not None), default=None)


def column_maximum_ms(path: LocationLike, column: str) -> int | None:
    """The largest value of timestamp `column` (a path: `event.log_ts`) in the latest version,
    in epoch ms, from the log's per-file statistics (Delta's `maxValues`) alone: no Spark, no
    data file read. None when a file holding values of it logged no statistics of it, or the
    table has no value. A timestamp without time zone is read as UTC, as Flink does; a file
    whose rows a deletion vector deleted still counts, so this may run ahead of the rows."""
    # One statistic per active file: metadata-sized.
    actions = pa.table(_table(path).get_add_actions(flatten=True))
    maximum, nulls = f"max.{column}", f"null_count.{column}"
    if maximum not in actions.column_names:
        return None
    values, counts = actions[maximum].to_pylist(), actions["num_records"].to_pylist()
    null_counts = (actions[nulls].to_pylist() if nulls in actions.column_names
                   else [None] * len(values))
    if any(value is None and null_count != count
           for value, count, null_count in zip(values, counts, null_counts, strict=True)):
        return None
    found = [value for value in values if value is not None]
    if not found or not all(isinstance(value, datetime) for value in found):
        return None
    latest = max(value if value.tzinfo else value.replace(tzinfo=UTC) for value in found)
    return (latest - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(milliseconds=1)
