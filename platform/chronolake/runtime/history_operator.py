"""A history view as a run operator: every version of a versioned table as a row, kept current.

A view `SELECT ... FROM rates FOR SYSTEM_TIME ALL [WHERE ...]` holds one row per version
(`chronolake.sql.history`), keyed by the table's key and `valid_from`. A run recomputes the
history of the keys its new changes touch, from their events so far (the derived table's
history table, which each run appends its version events to, as a temporal join's) and the
new ones, and emits the difference as a changelog:

- a new version is `+I`; one that arrives late, between two others, also ends the interval
  before it: `-U`/`+U` of that row, whose `valid_to` moves back;
- a correction (a later change with the same key and time) is `-U`/`+U` of its row;
- a delete ends the current interval (`-U`/`+U`), and a delete at a version's own time
  erases that version (`-D`).

Rows are emitted at once, not held for the watermark (like a deduplication); the output
watermark is the input's. A run writes in proportion to its new changes (their events, and
the changed rows of their keys); it scans the history table once for the touched keys.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from chronolake.catalog.relations import through_view_rows
from chronolake.joins.version_history import version_events, version_history
from chronolake.joins.versions import kept_versions, on_time_for_first_row
from chronolake.lake.changelog import ARRIVAL_ORDER, COMMIT_VERSION, POSITION, ROW_KIND, RowKind
from chronolake.lake.diffs import with_key_of
from chronolake.runtime.inputs import InputRead
from chronolake.runtime.operator import (
    Operator,
    Region,
    Restated,
    RunContext,
    Step,
    count_figures,
    without_annotations,
)
from chronolake.runtime.reuse import reused
from chronolake.schema import ViewSpec
from chronolake.schema.spec import KeepRow
from chronolake.sql.history import HistoryPlan
from chronolake.watermarks.late import LateReason, side_table_rows
from chronolake.watermarks.millis import within
from chronolake.watermarks.watermark import Watermark

_ARRIVAL = "__hv_arrival"
_ARRIVAL_TYPE = f"struct<{COMMIT_VERSION}: bigint, {POSITION}: bigint>"
_BEFORE = "__hv_before"
_AFTER = "__hv_after"


class HistoryOperator(Operator):
    """A history view, run incrementally into a changelog table keyed by (key, `valid_from`)."""

    def __init__(self, view: ViewSpec, plan: HistoryPlan) -> None:
        self.plan = plan
        self.source = plan.source
        self.inputs = (plan.source,)
        self.event_time = plan.source.watermark is not None
        self.output_key = view.primary_key

    def restates(self, source: str) -> bool:
        """A range of its source, when its versions follow event time."""
        return self.event_time and source == self.source.changelog_table.name.lower()

    def restated_region(self, source: str, start_ms: int, end_ms: int) -> Region | None:
        """The keys with a version in the range, before or after the rewrite: their rows,
        found by the recompute (`restate`), whose valid intervals may end or begin anywhere."""
        if not self.restates(source):
            return None
        return Region(input_span=(start_ms, end_ms), output_span=None, rows_of=lambda rows: rows,
                      stored_files=None)

    def restate(
        self, context: RunContext, read: InputRead, region: Region, watermark_ms: int | None
    ) -> Restated:
        """The history's version events in the range replaced by the rewrite's (`read`); each
        touched key's rows recomputed from its events, and diffed with its stored rows (the
        region: the output keys of its rows before and after)."""
        how = self.plan.versioned
        key = list(how.key)
        stored = context.history()
        assert stored is not None, "a history view that ran keeps its events"
        fresh = reused(version_events(without_annotations(read.rows), how.key, how.time,
                                      ROW_KIND))
        in_span = F.coalesce(within(F.col(f"`{how.time}`"), stored.schema[how.time].dataType,
                                    *region.input_span), F.lit(False))
        touched = reused(fresh.select(*key).unionByName(stored.where(in_span).select(*key))
                         .distinct().select(*key, F.lit(None).cast(_ARRIVAL_TYPE).alias(_ARRIVAL)))
        events = reused(stored.where(~in_span).unionByName(fresh))
        before = stored.join(touched.select(*key), on=key, how="left_semi")
        after = kept_versions(events.join(touched.select(*key), on=key, how="left_semi"), key,
                              how.time, how.keep)
        rows_before, rows_after = (self._rows(frame, touched).drop(_ARRIVAL)
                                   for frame in (before, after))
        keys = reused(rows_before.unionByName(rows_after).select(*self.output_key).distinct())
        counts = count_figures({"rows_in": read.rows, "versions_in": fresh,
                                "touched_keys": touched})
        return Restated(
            output=rows_after, state={}, history=events,
            figures={**counts, "late_rows": 0, "null_rowtime_rows": 0, "pending_rows": 0},
            region=replace(region, rows_of=lambda rows: with_key_of(rows, keys, self.output_key,
                                                                    "left_semi")),
        )

    def step(
        self,
        context: RunContext,
        reads: Mapping[str, InputRead],
        watermark: Watermark,
        watermark_ms: int | None,
    ) -> Step:
        how = self.plan.versioned
        rows = reads[self.source.name].rows  # held (`InputRead.rows`)
        considered = on_time_for_first_row(rows, how.time) if how.keep is KeepRow.FIRST else rows
        fresh = reused(version_events(without_annotations(considered), how.key, how.time,
                                      ROW_KIND))
        key = list(how.key)
        # Per touched key, its latest new change: the arrival its output changes take.
        touched = reused(fresh.groupBy(*key).agg(F.max(F.struct(*ARRIVAL_ORDER)).alias(_ARRIVAL)))
        late = side_table_rows(rows.where(F.col(f"`{how.time}`").isNull()),
                               LateReason.NULL_ROWTIME)
        counts = count_figures({
            "rows_in": rows, "versions_in": fresh, "touched_keys": touched, "late_rows": late,
        })
        stored = context.history()
        # one scan of the history for the touched keys, read by both histories below
        before = (fresh.limit(0) if stored is None
                  else reused(stored.join(touched.select(*key), on=key, how="left_semi")))
        after = kept_versions(before.unionByName(fresh), key, how.time, how.keep)
        changes = _differences(self._rows(before, touched), self._rows(after, touched),
                               self.output_key)
        first_run = stored is None
        return Step(
            output=changes, late=late, state={},
            history=fresh if counts["versions_in"] or first_run else None,
            # a row without a rowtime is its only late row
            figures={**counts, "null_rowtime_rows": counts["late_rows"], "pending_rows": 0},
        )

    def _rows(self, events: DataFrame, touched: DataFrame) -> DataFrame:
        """The view's rows over the history of `events`, each with its key's `_ARRIVAL`."""
        how = self.plan.versioned
        history = version_history(events, keys=how.key, time=how.time)
        if self.plan.condition is not None:
            history = history.where(self.plan.condition)
        arrived = history.join(touched, on=list(how.key))
        return through_view_rows(arrived, self.plan.select, [_ARRIVAL])


def _differences(before: DataFrame, after: DataFrame, key: Sequence[str]) -> DataFrame:
    """The changes from rows `before` to rows `after` (both unique on `key`): `-U`/`+U` of
    a changed row, `-D` of a vanished one, `+I` of a new one, in their key's arrival."""
    columns = [c for c in after.columns if c != _ARRIVAL]
    old = before.select(*key, F.struct(*columns).alias(_BEFORE), F.col(_ARRIVAL))
    new = after.select(*key, F.struct(*columns).alias(_AFTER), F.col(_ARRIVAL).alias("__hv_a"))
    paired = old.join(new, on=list(key), how="full_outer")
    was, now = F.col(_BEFORE).isNotNull(), F.col(_AFTER).isNotNull()
    changed = was & now & ~F.col(_BEFORE).eqNullSafe(F.col(_AFTER))
    arrival = F.coalesce(F.col("__hv_a"), F.col(_ARRIVAL))
    retractions = paired.where(changed | (was & ~now)).select(
        *_fields(_BEFORE, columns),
        F.when(now, RowKind.UPDATE_BEFORE.value).otherwise(RowKind.DELETE.value).alias(ROW_KIND),
        *_arrival(arrival, 0),
    )
    additions = paired.where(changed | (now & ~was)).select(
        *_fields(_AFTER, columns),
        F.when(was, RowKind.UPDATE_AFTER.value).otherwise(RowKind.INSERT.value).alias(ROW_KIND),
        *_arrival(arrival, 1),
    )
    return retractions.unionByName(additions)


def _fields(struct: str, columns: Sequence[str]) -> list[Column]:
    return [F.col(f"{struct}.`{c}`").alias(c) for c in columns]


def _arrival(arrival: Column, offset: int) -> list[Column]:
    """A change's arrival order: its key's latest new change, a retraction before its
    addition."""
    return [
        arrival[COMMIT_VERSION].alias(COMMIT_VERSION),
        (arrival[POSITION] * 2 + offset).alias(POSITION),
    ]
