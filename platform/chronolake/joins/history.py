"""The slice of a versioned table's history that late probe rows can meet.

A late probe row (at or below the join's state horizon) joins the version of its key valid at
its rowtime among all build events so far, so the runtime keeps every build event in a history
table. Most late rows do not need it: state still holds the version valid at their rowtime
(`mark_rows_needing_history`). For the others, handing the whole history to the as-of join
makes a run cost in proportion to the history's age; cutting it first to the events that can
decide those rows makes that work follow the late rows' keys and the time span they reach back.

The history table is laid out for that cut: each file sorted by key, then time, in small
Parquet pages (`sorted_for_lookups`, `HISTORY_PAGE_ROWS`), and the late rows' keys reach the
scan as literals (`history_lookup`), which Parquet checks against each page's min and max,
so a run reads the pages holding those keys' events instead of the whole table.
"""

from __future__ import annotations

from typing import NamedTuple

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import (
    BooleanType,
    DataType,
    DateType,
    DecimalType,
    IntegralType,
    StringType,
    StructType,
)

from chronolake.joins._columns import all_of, is_version_event, quote
from chronolake.lake.changelog import ROW_KIND
from chronolake.sql.temporal import TemporalJoinPlan

HISTORY_PAGE_ROWS = 256
"""Rows per Parquet page of the history table: a lookup of one key reads about a page or two
of its events (Parquet's default is 20,000 rows a page)."""

ONE_FILE_MAX_ROWS = 1_000_000
"""Most build events a run writes to the history as one file (one task sorts them)."""

LOOKUP_KEYS = 256
"""Most distinct keys of late rows named in the history scan; with more, the scan reads the
whole history (Spark cannot push a join's keys into Parquet, only literals)."""

_KEY = "__lh_k"
_EARLIEST = "__lh_lo"
_LATEST = "__lh_hi"
_FLOOR = "__lh_floor"
_NEEDS_HISTORY = "__lh_needs_history"


def mark_rows_needing_history(
    late: DataFrame, events: DataFrame, plan: TemporalJoinPlan, horizon_ms: int
) -> DataFrame:
    """`late` probe rows with `__lh_needs_history`: true for a row older than its key's
    latest version at or below the horizon (its *floor*).

    `events` are the state's versions plus this run's build events. State keeps every event
    newer than the horizon and, per key, the latest one at or below it
    (`chronolake.joins.versions.retained_versions`), so every event it no longer holds is at
    or before that floor's time, and loses the tie there to the floor, a later arrival. A
    row at or after its key's floor therefore meets the same version among `events` as
    among the whole history; only a row before it can meet a version that left state. A key
    without a floor has no event at or below the horizon outside state either. The floor is
    taken over `events`, this run's late build events included: one of those can only raise
    it, which sends more rows to the history, never fewer.
    """
    assert plan.build_time is not None, "an event-time join has a build time"
    keys = [f"{_KEY}{i}" for i in range(len(plan.build_keys))]
    build_ms = F.unix_micros(F.col(quote(plan.build_time)).cast("timestamp")) / 1000
    floors = (
        events.where(is_version_event(ROW_KIND if ROW_KIND in events.columns else None))
        .where(build_ms <= horizon_ms)
        .groupBy(*[F.col(quote(k)).alias(name) for k, name in zip(plan.build_keys, keys,
                                                                     strict=True)])
        .agg(F.max(F.col(quote(plan.build_time)).cast("timestamp")).alias(_FLOOR))
    )
    same_key = [
        F.col(quote(p)) == F.col(name) for p, name in zip(plan.probe_keys, keys, strict=True)
    ]
    probe_time = F.col(quote(plan.probe_time)).cast("timestamp")
    return late.join(floors, on=all_of(same_key), how="left").select(
        *[F.col(quote(c)) for c in late.columns],
        F.coalesce(probe_time < F.col(_FLOOR), F.lit(False)).alias(_NEEDS_HISTORY),
    )


class HistoryLookup(NamedTuple):
    """What the late rows that state cannot answer need of the history."""

    needed: bool
    """Whether any late row needs it."""
    condition: Column | None
    """A filter of the history to what those rows can meet, in literals Parquet skips pages
    with; None when the history is read whole (too many keys, or key types not listed)."""


def sorted_for_lookups(events: DataFrame, plan: TemporalJoinPlan, rows: int) -> DataFrame:
    """A run's `rows` build events in the history table's layout: files of disjoint key
    ranges, each sorted by key, then time. A key's events share a page or two, and a lookup
    skips the pages and files whose key range leaves the key out. (With hash partitioning
    every file would hold a page whose range spans a missing key.)

    Up to `ONE_FILE_MAX_ROWS` rows go to one file, sorted in one task: a range partitioning
    costs two Spark jobs (sampling, then the shuffle), most of a small run's commit.
    """
    assert plan.build_time is not None, "an event-time join has a build time"
    keys = [F.col(quote(k)) for k in plan.build_keys]
    spread = events.coalesce(1) if rows <= ONE_FILE_MAX_ROWS else events.repartitionByRange(*keys)
    return spread.sortWithinPartitions(*keys, F.col(quote(plan.build_time)))


def history_lookup(late: DataFrame, plan: TemporalJoinPlan, history: StructType) -> HistoryLookup:
    """Whether `late` probe rows need the history (schema `history`) and, when they have at
    most `LOOKUP_KEYS` distinct keys, the filter `(key = k AND time <= t_k) OR ...` with t_k
    the latest rowtime among key k's late rows: every event `history_for_late_rows` keeps for
    them, and none of other keys or later times.

    One small Spark job brings the keys and times to the driver, as data skipping needs
    them there. Keys are named as literals only where probe and build key have the same
    type and that type's literal is exact (integers, strings, booleans, dates, decimals);
    otherwise the filter is None. Times go as epoch microseconds, whatever the session's
    time zone.
    """
    assert plan.build_time is not None, "an event-time join has a build time"
    latest = F.max(F.unix_micros(F.col(quote(plan.probe_time)).cast("timestamp")))
    keyed = late.where(all_of([F.col(quote(k)).isNotNull() for k in plan.probe_keys]))
    # metadata-sized: one row per late key, LOOKUP_KEYS + 1 at most
    bounds = (
        keyed.groupBy(*[F.col(quote(k)) for k in plan.probe_keys])
        .agg(latest.alias(_LATEST))
        .limit(LOOKUP_KEYS + 1)
        .collect()
    )
    if not bounds:
        return HistoryLookup(needed=False, condition=None)
    key_types = [history[k].dataType for k in plan.build_keys]
    listable = len(bounds) <= LOOKUP_KEYS and all(
        _has_exact_literals(t) and late.schema[p].dataType == t
        for p, t in zip(plan.probe_keys, key_types, strict=True)
    )
    if not listable:
        return HistoryLookup(needed=True, condition=None)
    time_type = history[plan.build_time].dataType
    terms = [
        all_of([
            *[
                F.col(quote(k)) == F.lit(row[i]).cast(t)
                for i, (k, t) in enumerate(zip(plan.build_keys, key_types, strict=True))
            ],
            F.col(quote(plan.build_time))
            <= F.timestamp_micros(F.lit(row[_LATEST])).cast(time_type),
        ])
        for row in bounds
    ]
    return HistoryLookup(needed=True, condition=_any_of(terms))


def _has_exact_literals(data_type: DataType) -> bool:
    """Whether values of `data_type` come back from the driver as the same literal."""
    return isinstance(data_type, IntegralType | StringType | BooleanType | DateType | DecimalType)


def _any_of(conditions: list[Column]) -> Column:
    """The disjunction as a balanced tree (hundreds of terms, shallow plans)."""
    while len(conditions) > 1:
        pairs = zip(conditions[::2], conditions[1::2], strict=False)
        conditions = [a | b for a, b in pairs] + conditions[len(conditions) // 2 * 2:]
    return conditions[0]


def split_marked_rows(marked: DataFrame) -> tuple[DataFrame, DataFrame]:
    """`mark_rows_needing_history`'s rows as (those state answers, those that need the
    history), without the marker."""
    marker = F.col(_NEEDS_HISTORY)
    return (
        marked.where(~marker).drop(_NEEDS_HISTORY),
        marked.where(marker).drop(_NEEDS_HISTORY),
    )


def history_for_late_rows(
    history: DataFrame, late: DataFrame, plan: TemporalJoinPlan
) -> DataFrame:
    """`history` cut to the build events that decide which version each `late` row joins.

    For a key whose late probe rows have rowtimes in [lo, hi], the as-of join
    (`chronolake.joins.asof.join_valid_versions`) needs the key's events from its *floor*,
    the latest version time at or below lo, through hi: every event at the floor time
    (ties go to the later arrival, and a winning `-D` erases the version), and everything
    after it up to hi. An earlier event's validity ends at or before the floor; a later one
    starts after every late row of the key, and dropping it only turns the last kept
    interval's end from a time above hi into "open". `-U` events (never versions) and keys
    without late rows are dropped too; when a key has no version at or below lo, all its
    events up to hi stay. Columns are `history`'s; the result is correct for any `late`
    rows, only its size depends on them being few.

    Example:
        >>> needed = history_for_late_rows(history, late_probe_rows, plan)
        >>> matched = matched_versions(plan, late_probe_rows, needed)
    """
    assert plan.build_time is not None, "an event-time join has a build time"
    keys = [f"{_KEY}{i}" for i in range(len(plan.probe_keys))]
    probe_time = F.col(quote(plan.probe_time))
    # One row per distinct key of the late rows: few, so broadcast, and the history is
    # filtered where it is scanned instead of shuffled to meet them.
    bounds = (
        late.where(all_of([F.col(quote(k)).isNotNull() for k in plan.probe_keys]))
        .groupBy(*[F.col(quote(k)).alias(name) for k, name in zip(plan.probe_keys, keys,
                                                                     strict=True)])
        .agg(F.min(probe_time).alias(_EARLIEST), F.max(probe_time).alias(_LATEST))
    )
    build_time = F.col(quote(plan.build_time))
    same_key = [
        F.col(quote(b)) == F.col(name) for b, name in zip(plan.build_keys, keys, strict=True)
    ]
    candidates = (
        history.where(is_version_event(ROW_KIND if ROW_KIND in history.columns else None))
        .join(F.broadcast(bounds), on=all_of(same_key), how="inner")
        .where(build_time <= F.col(_LATEST))
    )
    floor = F.max(F.when(build_time <= F.col(_EARLIEST), build_time)).over(
        Window.partitionBy(*keys)
    )
    needed = candidates.withColumn(_FLOOR, floor).where(
        F.col(_FLOOR).isNull() | (build_time >= F.col(_FLOOR))
    )
    return needed.select(*[F.col(quote(c)) for c in history.columns])
