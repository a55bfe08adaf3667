"""Versions of a deduplication view, the build side of a temporal join.

Keep-last, FLIP-132's versioned view `ROW_NUMBER() OVER (PARTITION BY k ORDER BY t DESC)
= 1`: per key, the row with the greatest `t` seen so far; a row arriving with an older
`t` than the key's current version is dropped (a late version), one with an equal or
newer `t` replaces it. Each version is valid from its `t` on.

Keep-first (`ORDER BY t ASC`): Flink's `RowTimeDeduplicateKeepFirstRowFunction` keeps
each key's row with the earliest `t` (the first arrival among equal ones), drops a row
older than the watermark in force when it arrives, and emits the kept row once the
watermark reaches its `t`, insert-only: an earlier row replaces the kept one only
before that, when no probe row could have joined it yet. So a key has one version,
its earliest on-time row, valid from its `t` on.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from chronolake.lake.changelog import ADDITIONS, ARRIVAL_ORDER, ROW_KIND, RowKind
from chronolake.schema.spec import KeepRow
from chronolake.watermarks.assigner import WATERMARK_COLUMN

STALE_VERSION = "__cl_stale_version"
_RANK = "__cl_first_rank"


def mark_stale_versions(events: DataFrame, key: Sequence[str], time: str) -> DataFrame:
    """Add `__cl_stale_version`: true for a version older than its key's current one."""
    before = (
        Window.partitionBy(*key)
        .orderBy(*[F.col(c) for c in ARRIVAL_ORDER])
        .rowsBetween(Window.unboundedPreceding, -1)
    )
    is_version = (
        F.col(ROW_KIND).isin(*ADDITIONS)
        if ROW_KIND in events.columns
        else F.lit(True)
    )
    newest_before = F.max(F.when(is_version, F.col(time))).over(before)
    return events.withColumn(
        STALE_VERSION, F.coalesce(is_version & (F.col(time) < newest_before), F.lit(False))
    )


def forward_newer_versions(events: DataFrame, key: Sequence[str], time: str) -> DataFrame:
    """The events a deduplication view forwards (stale versions dropped)."""
    return mark_stale_versions(events, key, time).where(~F.col(STALE_VERSION)).drop(STALE_VERSION)


def first_versions(events: DataFrame, key: Sequence[str], time: str | None) -> DataFrame:
    """A keep-first deduplication's one version per key: its `+I`/`+U` event with the
    earliest `time` (the first arrival among equal ones; the first arrival when `time` is
    None, a processing-time order). Events without a time are no versions."""
    if ROW_KIND in events.columns:
        kept = F.col(ROW_KIND).isin(*ADDITIONS)
        events = events.where(F.coalesce(kept, F.lit(True)))
    order = [F.col(c) for c in ARRIVAL_ORDER]
    if time is not None:
        events = events.where(F.col(time).isNotNull())
        order = [F.col(time), *order]
    first = Window.partitionBy(*key).orderBy(*order)
    return (
        events.withColumn(_RANK, F.row_number().over(first))
        .where(F.col(_RANK) == 1)
        .drop(_RANK)
    )


def kept_versions(events: DataFrame, key: Sequence[str], time: str, keep: KeepRow | None
                  ) -> DataFrame:
    """The version events a versioned table holds among a changelog's `events`: a table's
    all; a deduplication view's (`keep` its rule) those it forwards, as the module says."""
    if keep is KeepRow.FIRST:
        return first_versions(events, key, time)
    if keep is KeepRow.LAST:
        return forward_newer_versions(events, key, time)
    return events


def on_time_for_first_row(rows: DataFrame, time: str) -> DataFrame:
    """The rows a keep-first deduplication on event time considers: those not older than the
    watermark in force when they arrived (`_watermark`; Flink drops them as late)."""
    rows_ms = F.unix_micros(F.col(time).cast("timestamp")) / 1000
    return rows.where(~F.coalesce(rows_ms < F.col(WATERMARK_COLUMN), F.lit(False)))


def retained_versions(
    events: DataFrame, key: Sequence[str], time: str, watermark_ms: int
) -> DataFrame:
    """The versions state keeps: every event newer than the watermark plus, per key, the
    latest event at or below it (which is valid at the watermark); `-U` events are dropped.

    Older versions are no longer needed by probe rows on time; late probe rows find
    them in the run history instead.
    """
    events_ms = F.unix_micros(F.col(time).cast("timestamp")) / 1000
    if ROW_KIND in events.columns:
        events = events.where(F.col(ROW_KIND) != RowKind.UPDATE_BEFORE.value)
    newest_first = Window.partitionBy(*key).orderBy(
        F.col(time).desc(), *[F.col(c).desc() for c in ARRIVAL_ORDER]
    )
    at_or_below = events.where(events_ms <= watermark_ms)
    latest = (
        at_or_below.withColumn("__tj_rank", F.row_number().over(newest_first))
        .where(F.col("__tj_rank") == 1)
        .drop("__tj_rank")
    )
    return events.where(events_ms > watermark_ms).unionByName(latest)
