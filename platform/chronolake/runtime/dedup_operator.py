"""Deduplication as a run operator: the row each key keeps, and its changes, as Flink emits them.

A view `SELECT ... FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY k ORDER BY t DESC|ASC)
AS rn FROM src) WHERE rn = 1` keeps one row per key (`chronolake.sql.views`):

- keep-last (`DESC`): a row whose `t` is at or after the kept row's replaces it (among rows
  with the same `t`, the later arrival wins), as Flink's `RowTimeDeduplicateFunction` keeps
  the last row. The first row of a key is `+I`; a replacement is `-U` (the row kept until
  now) then `+U`. Over a changelog source, a `-D` that is the key's latest event removes its
  row (`-D`) and `-U` rows are skipped. A row older than the kept one is dropped and counted
  (`outdated_rows`).
- keep-first (`ASC`): the first row of a key (the earliest `t`; the first arrival among
  equal ones) is `+I`, and nothing replaces it: an insert-only output.

Rows are kept as they arrive, without waiting for the watermark (Flink's deduplication
emits at once too); the output watermark is the input's. State (role `kept`) holds the
source row each key keeps. A row whose `t` is null goes to the late-rows side table.
A run collapses each key's changes into one (Flink's mini-batch deduplication does the same).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from chronolake.catalog.relations import through_view_rows
from chronolake.lake.changelog import (
    ADDITIONS,
    ARRIVAL_ORDER,
    POSITION,
    ROW_KIND,
    SYSTEM_COLUMNS,
    RowKind,
)
from chronolake.lake.diffs import with_key_of
from chronolake.runtime.inputs import InputRead
from chronolake.runtime.operator import (
    INTERNAL_COLUMNS,
    Operator,
    Region,
    Restated,
    RunContext,
    Step,
    count_figures,
)
from chronolake.runtime.reuse import reused
from chronolake.schema import ViewSpec
from chronolake.schema.spec import KeepRow
from chronolake.sql.deduplication import DeduplicationPlan
from chronolake.watermarks.late import LateReason, side_table_rows
from chronolake.watermarks.millis import within
from chronolake.watermarks.watermark import Watermark

KEPT_ROLE = "kept"
"""The state table of the source row each key keeps."""

_BEST = "__dd_best"
_KEPT = "__dd_kept"


class DeduplicateOperator(Operator):
    """A deduplication view, run incrementally into a changelog table keyed by its key."""

    def __init__(self, view: ViewSpec, plan: DeduplicationPlan) -> None:
        dedup = view.deduplication
        assert dedup is not None, "only deduplication views have this operator"
        self.source = plan.source
        self.inputs = (plan.source,)
        self.event_time = plan.source.watermark is not None
        self.key, self.order_by = dedup.key, dedup.order_by
        self.keep_last = dedup.keep is KeepRow.LAST
        self.selects = plan.selects
        self.view_key = view.primary_key

    @property
    def depends_on_processing_time(self) -> bool:
        """Also when ordered by `PROCTIME()`: the kept row is the one processed first or
        last, whatever the source's watermark."""
        proctime = self.source.proctime
        by_proctime = proctime is not None and self.order_by.lower() == proctime.lower()
        return by_proctime or not self.event_time

    def restates(self, source: str) -> bool:
        """A range of its source, when it keeps rows by event time."""
        return (not self.depends_on_processing_time
                and source == self.source.changelog_table.name.lower())

    def restated_region(self, source: str, start_ms: int, end_ms: int) -> Region | None:
        """The keys the range touched: those of the rewritten rows in it, and those whose
        kept row lay in it; a key's row may be decided by its rows of any time, so the
        recompute reads every row, and its changes tell what the next hop restates."""
        if not self.restates(source):
            return None
        return Region(input_span=(start_ms, end_ms), output_span=None, rows_of=lambda rows: rows,
                      stored_files=None, every_input_row=True)

    def restate(
        self, context: RunContext, read: InputRead, region: Region, watermark_ms: int | None
    ) -> Restated:
        """Each touched key's row among the source's rows as of the rewrite, as a refresh
        keeps it; the region's stored rows are those of the output keys of its rows before
        and after. The other keys' kept rows stay in state."""
        rows = read.rows  # held: every row as of the rewrite, inserts as a refresh reads them
        columns = [c for c in rows.columns if c not in (*SYSTEM_COLUMNS, *INTERNAL_COLUMNS)]
        kept = context.state(KEPT_ROLE)
        assert kept is not None, "a deduplication that ran keeps its rows"
        order = F.col(f"`{self.order_by}`")
        in_range = within(order, rows.schema[self.order_by].dataType, *region.input_span)
        were_kept = kept.where(within(order, kept.schema[self.order_by].dataType,
                                      *region.input_span))
        touched = reused(rows.where(in_range).select(*self.key).unionByName(
            were_kept.select(*self.key)).distinct())
        candidates = rows.where(order.isNotNull()).join(touched, on=list(self.key),
                                                        how="left_semi")
        best = reused(self._best_per_key(candidates, columns).select(*columns))
        before = kept.join(touched, on=list(self.key), how="left_semi")
        state = kept.join(touched, on=list(self.key), how="left_anti").unionByName(best)
        view_keys = list(self.view_key)
        output = self._view_rows(_as_inserts(best)).drop(ROW_KIND, *ARRIVAL_ORDER)
        keys = self._view_rows(_as_inserts(before.unionByName(best))).select(*view_keys)
        counts = count_figures({"rows_in": candidates, "state_rows": state})
        figures = {**counts, "outdated_rows": 0, "late_rows": 0, "null_rowtime_rows": 0,
                   "pending_rows": 0}
        return Restated(output=output, state={KEPT_ROLE: state}, figures=figures,
                        region=replace(region, rows_of=lambda stored: with_key_of(
                            stored, keys.distinct(), view_keys, "left_semi")))

    def step(
        self,
        context: RunContext,
        reads: Mapping[str, InputRead],
        watermark: Watermark,
        watermark_ms: int | None,
    ) -> Step:
        rows = reads[self.source.name].rows  # held (`InputRead.rows`)
        timed = F.col(f"`{self.order_by}`").isNotNull()
        events = [*ADDITIONS]
        if self.keep_last:
            events.append(RowKind.DELETE.value)  # a key's latest event may remove its row
        candidates = rows.where(timed & F.col(ROW_KIND).isin(*events))
        columns = [c for c in rows.columns if c not in (*SYSTEM_COLUMNS, *INTERNAL_COLUMNS)]
        kept = context.state(KEPT_ROLE)
        if kept is None:
            kept = candidates.select(*columns).limit(0)
        best = self._best_per_key(candidates, columns)
        joined = reused(best.join(
            kept.select(*self.key, F.struct(*columns).alias(_KEPT)), on=list(self.key),
            how="left",
        ))
        was_kept = F.col(_KEPT).isNotNull()
        if self.keep_last:
            newer = F.col(f"{_KEPT}.`{self.order_by}`") <= F.col(f"`{self.order_by}`")
            changed = joined.where(~was_kept | newer)
        else:
            changed = joined.where(~was_kept)
        deleted = F.col(ROW_KIND) == RowKind.DELETE.value
        additions = changed.where(~deleted).select(
            *columns,
            F.when(was_kept, F.lit(RowKind.UPDATE_AFTER.value))
            .otherwise(F.lit(RowKind.INSERT.value)).alias(ROW_KIND),
            *ARRIVAL_ORDER,
        )
        retractions = changed.where(was_kept).select(  # the row kept until now
            *(F.col(f"{_KEPT}.`{c}`").alias(c) for c in columns),
            F.when(deleted, F.lit(RowKind.DELETE.value))
            .otherwise(F.lit(RowKind.UPDATE_BEFORE.value)).alias(ROW_KIND),
            *[c for c in ARRIVAL_ORDER if c != POSITION],
            (F.col(POSITION) - 1).alias(POSITION),  # before its +U
        )
        changes = retractions.unionByName(additions)
        output = self._view_rows(changes)
        state = kept.join(changed.select(*self.key), on=list(self.key), how="left_anti")
        state = state.unionByName(additions.select(*columns))
        outdated = joined.where(
            was_kept & (F.col(f"{_KEPT}.`{self.order_by}`") > F.col(f"`{self.order_by}`"))
        ) if self.keep_last else joined.where(was_kept)
        late = side_table_rows(rows.where(~timed), LateReason.NULL_ROWTIME)
        counts = count_figures({
            "rows_in": rows,
            "outdated_rows": outdated,
            "late_rows": late,
            "state_rows": state,
        })
        return Step(
            output=output, late=late, state={KEPT_ROLE: state}, history=None,
            # a row without a rowtime is its only late row
            figures={**counts, "null_rowtime_rows": counts["late_rows"], "pending_rows": 0},
        )

    def _best_per_key(self, candidates: DataFrame, columns: list[str]) -> DataFrame:
        """Each key's candidate: the latest `t` (then arrival) to keep last, the earliest `t`
        (then arrival) to keep first; an aggregate, not a window (see `lake.upserts`)."""
        order = F.struct(F.col(f"`{self.order_by}`"), *ARRIVAL_ORDER)
        row = F.struct(*(F.col(f"`{c}`") for c in columns), ROW_KIND, *ARRIVAL_ORDER)
        pick = F.max_by if self.keep_last else F.min_by
        best = candidates.groupBy(*self.key).agg(pick(row, order).alias(_BEST))
        return best.select(
            *(F.col(f"{_BEST}.`{c}`").alias(c) for c in (*columns, ROW_KIND, *ARRIVAL_ORDER))
        )

    def _view_rows(self, changes: DataFrame) -> DataFrame:
        """The view's SELECTs over each change's kept row; kinds and order pass through."""
        carried = [ROW_KIND, *ARRIVAL_ORDER]
        inner, outer = self.selects
        return through_view_rows(through_view_rows(changes, inner, carried), outer, carried)


def _as_inserts(rows: DataFrame) -> DataFrame:
    """Kept source rows as `+I` changes, for the view's SELECTs (no arrival order)."""
    return rows.select("*", F.lit(RowKind.INSERT.value).alias(ROW_KIND),
                       *(F.lit(None).cast("long").alias(c) for c in ARRIVAL_ORDER))
