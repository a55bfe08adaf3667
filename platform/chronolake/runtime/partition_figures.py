"""What a commit did to a partitioned table's time partitions, counted before it is written.

A commit's stamp (`chronolake.lake.stamps.partitions_stamp`) lists each partition that
the commit completed (the watermark passed its end) or changed once complete (a correction,
a cancellation, a late row joined from history), with its row count after the commit, its
changes by row kind and its late rows. Dagster records those partitions as materialized from
the stamp alone, whoever made the commit (`chronolake.dagster.partitions`). Changes to a
partition not yet complete are not listed: it is counted whole when it completes.

Two small Spark jobs, for partitioned tables only: this run's changes and late rows by
complete partition, then the rows the table and its late side table already hold in the
partitions the commit affects.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from functools import reduce

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from chronolake.lake.changelog import ROW_KIND, RowKind
from chronolake.lake.stamps import PartitionFigures
from chronolake.schema.time_options import TimePartitions
from chronolake.schema.windows import Windows
from chronolake.watermarks.partitions import (
    PartitionWindow,
    complete,
    first_start_ms,
    newly_complete,
    windows_between,
)

_KEY, _START, _END = "__partition", "__start", "__end"
_TIME, _WHAT, _COUNT = "__time", "__what", "__count"
_STORED, _LATE_STORED, _LATE = "stored", "late_stored", "late"


def partition_figures(
    spark: SparkSession,
    partitions: TimePartitions,
    windows: Windows | None,
    *,
    before_ms: int | None,
    after_ms: int | None,
    changes: DataFrame,
    late: DataFrame,
    late_column: str | None,
    stored: DataFrame | None,
    stored_late: DataFrame | None,
) -> list[PartitionFigures]:
    """The partitions a commit moving the watermark from `before_ms` to `after_ms` completes
    or changes, with their figures; `changes` the commit's (with `_row_kind`), `late` its late
    rows (timed by `late_column`), `stored`/`stored_late` what the table and its late rows
    held before (None: nothing, or a full refresh that rewrites them)."""
    if after_ms is None:
        return []
    column = partitions.column
    assert column is not None, "resolved when the table was declared"
    done = complete(windows_between(partitions, first_start_ms(partitions), after_ms), windows,
                    after_ms)
    if not done:
        return []
    new = {window.key for window in newly_complete(partitions, windows, before_ms, after_ms)}
    table = _windows_frame(spark, done)
    kinds = [(changes, column, F.col(ROW_KIND))]
    if late_column is not None:
        kinds.append((late, late_column, F.lit(_LATE)))
    moved = _counts(table, kinds)  # metadata-sized: partitions x kinds
    touched = {key for key, _ in moved}
    affected = [window for window in done if window.key in new or window.key in touched]
    if not affected:
        return []
    held = [(frame, name, F.lit(what)) for frame, name, what in (
        (stored, column, _STORED), (stored_late, late_column, _LATE_STORED)
    ) if frame is not None and name is not None]
    before = _counts(_windows_frame(spark, affected), held, bounds=affected)
    return [_figures(window.key, window.key in new, moved, before) for window in affected]


def _figures(key: str, new: bool, moved: Mapping[tuple[str, str], int],
             before: Mapping[tuple[str, str], int]) -> PartitionFigures:
    def count(counts: Mapping[tuple[str, str], int], what: str) -> int:
        return counts.get((key, what), 0)

    kinds = {kind: count(moved, kind.value) for kind in RowKind}
    rows = (count(before, _STORED) + kinds[RowKind.INSERT] + kinds[RowKind.UPDATE_AFTER]
            - kinds[RowKind.UPDATE_BEFORE] - kinds[RowKind.DELETE])
    late = count(moved, _LATE)
    return PartitionFigures(
        key=key, completed=new, rows=rows, late_rows=count(before, _LATE_STORED) + late,
        new_late_rows=late, changes={kind.value: n for kind, n in kinds.items()},
    )


def _windows_frame(spark: SparkSession, windows: Sequence[PartitionWindow]) -> DataFrame:
    """The partitions as a small frame of key and bounds (timestamps), broadcast in joins."""
    rows = [(window.key, window.start_ms, window.end_ms) for window in windows]
    frame = spark.createDataFrame(rows, f"{_KEY} string, {_START} long, {_END} long")
    return F.broadcast(frame.select(
        _KEY,
        F.timestamp_millis(F.col(_START)).alias(_START),
        F.timestamp_millis(F.col(_END)).alias(_END),
    ))


def _counts(
    windows: DataFrame, frames: Iterable[tuple[DataFrame, str, Column]],
    *, bounds: Sequence[PartitionWindow] | None = None,
) -> dict[tuple[str, str], int]:
    """Rows of each frame by partition (of its time column) and by what it is, one job."""
    tagged = []
    for frame, column, what in frames:
        rows = frame.select(F.col(f"`{column}`").cast("timestamp").alias(_TIME),
                            what.cast("string").alias(_WHAT))
        if bounds:  # the table's rows: skip the files outside the partitions (data skipping)
            rows = rows.where(reduce(Column.__or__, [
                (F.col(_TIME) >= F.timestamp_millis(F.lit(start)))
                & (F.col(_TIME) < F.timestamp_millis(F.lit(end)))
                for start, end in _spans(bounds)
            ]))
        tagged.append(rows)
    if not tagged:
        return {}
    rows = reduce(DataFrame.unionByName, tagged)
    joined = rows.join(windows, (F.col(_TIME) >= F.col(_START))
                       & (F.col(_TIME) < F.col(_END)))
    grouped = joined.groupBy(_KEY, _WHAT).agg(F.count(F.lit(1)).alias(_COUNT))
    # One row per partition and kind: metadata-sized.
    return {(row[_KEY], row[_WHAT]): int(row[_COUNT]) for row in grouped.collect()}


def _spans(windows: Sequence[PartitionWindow]) -> list[tuple[int, int]]:
    """The partitions' instants as few spans as possible: adjacent partitions merged."""
    spans: list[tuple[int, int]] = []
    for window in sorted(windows, key=lambda window: window.start_ms):
        if spans and spans[-1][1] >= window.start_ms:
            spans[-1] = (spans[-1][0], max(spans[-1][1], window.end_ms))
        else:
            spans.append((window.start_ms, window.end_ms))
    return spans
