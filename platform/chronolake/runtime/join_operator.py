"""The temporal join as a run operator: probe rows wait for the watermark, then join.

Event time (`FOR SYSTEM_TIME AS OF o.rowtime`): a probe row is emitted once the
combined watermark of both inputs reaches its rowtime and joins the version of
its key valid then among the build events arrived so far. State keeps the
build versions newer than the watermark plus the latest one at or below it;
every build event is also appended to the history. A late probe row (at or
below the state's horizon) joins the version valid at its rowtime: from state
when it is not older than its key's latest version there, else from the history.

Processing time (`FOR SYSTEM_TIME AS OF o.proctime`): probe rows wait until the
build side's watermark follows processing time (a source without watermarks at
once, a hybrid source once its snapshot is read), then join the latest version
of their key.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from chronolake.catalog import Catalog
from chronolake.errors import DefinitionError
from chronolake.joins.history import (
    history_for_late_rows,
    history_lookup,
    mark_rows_needing_history,
    sorted_for_lookups,
    split_marked_rows,
)
from chronolake.joins.temporal import join_query, latest_versions, matched_latest, matched_versions
from chronolake.joins.versions import (
    first_versions,
    kept_versions,
    on_time_for_first_row,
    retained_versions,
)
from chronolake.lake.changelog import ROW_KIND, RowKind
from chronolake.lake.file_span import FileSpan
from chronolake.runtime.inputs import InputRead
from chronolake.runtime.operator import (
    OUTPUT,
    Operator,
    Region,
    Restated,
    RunContext,
    Step,
    Tallied,
    Where,
    count_figures,
    without_annotations,
)
from chronolake.runtime.reuse import reused
from chronolake.runtime.tally import Tally
from chronolake.schema import TableSpec, ViewSpec
from chronolake.schema.spec import KeepRow
from chronolake.sql.temporal import TemporalJoinPlan, TimeMode
from chronolake.watermarks.assigner import LATE_COLUMN
from chronolake.watermarks.late import LateReason, side_table_rows
from chronolake.watermarks.millis import within
from chronolake.watermarks.watermark import LONG_MAX, LONG_MIN, Watermark


class TemporalJoinOperator(Operator):
    """A view whose query joins a probe table with a versioned (or regular) build side."""

    def __init__(self, catalog: Catalog, plan: TemporalJoinPlan, *,
                 output_rowtime: str | None = None) -> None:
        self.plan = plan
        self.probe = self.plan.probe
        self.build = _build_table(catalog, self.plan.build)
        self.inputs = (self.probe, self.build)
        self.event_time = self.plan.mode is TimeMode.EVENT_TIME
        self.output_rowtime = output_rowtime
        """The view's rowtime, the probe's passed through (None when its SELECT drops it)."""

    def restates(self, source: str) -> bool:
        """A range of either side of an event-time join whose output keeps the probe's rowtime;
        of the build side when it is a table (a deduplication view's versions are not built)."""
        if not self.event_time or self.output_rowtime is None:
            return False
        if source == self.probe.changelog_table.name.lower():
            return True
        return (source == self.build.changelog_table.name.lower()
                and isinstance(self.plan.build, TableSpec))

    def restated_region(self, source: str, start_ms: int, end_ms: int) -> Region | None:
        """Probe side: the probe rows with rowtime in [`start_ms`, `end_ms`), and their output
        rows. Build side: the build events in the range, and the probe rows from `start_ms` on
        that joined a version of their keys, up to each key's next version after the range
        (found by the recompute, `restate`)."""
        rowtime = self.output_rowtime
        if not self.restates(source) or rowtime is None:
            return None
        if source == self.probe.changelog_table.name.lower():
            return self._output_region(start_ms, end_ms)
        return Region(input_span=(start_ms, end_ms), output_span=None, rows_of=lambda rows: rows,
                      stored_files=None, late_rows_of_input=False)

    def _output_region(self, start_ms: int, end_ms: int) -> Region:
        """The probe rows with rowtime in [`start_ms`, `end_ms`), and their output rows."""
        rowtime = self.output_rowtime
        assert rowtime is not None  # `restates`

        def rows_of(output: DataFrame) -> DataFrame:
            return output.where(within(F.col(f"`{rowtime}`"), output.schema[rowtime].dataType,
                                       start_ms, end_ms))

        return Region(input_span=(start_ms, end_ms), output_span=(start_ms, end_ms),
                      rows_of=rows_of, stored_files=FileSpan(rowtime, start_ms, end_ms))

    def restate(
        self, context: RunContext, read: InputRead, region: Region, watermark_ms: int | None
    ) -> Restated:
        """The region's probe rows at or below the committed watermark join the version valid
        at their rowtime among every build event so far (the history, as late probe rows do);
        the others replace the span's pending rows. Then the watermark the rewrite's rows
        moved releases pending rows as an ordinary run does (`Restated.emitted`)."""
        if read.spec.name == self.build.name:
            return self._restate_build(context, read, region, watermark_ms)
        before, ending = _watermarks(context, watermark_ms)
        probe_time = F.col(self.plan.probe_time)
        rowtime_ms = _millis(probe_time)
        rows = read.rows
        ready = reused(rows.where(rowtime_ms <= before))
        held = rows.where(rowtime_ms > before)
        pending = context.state("pending")
        if pending is not None:
            in_span = within(probe_time, pending.schema[self.plan.probe_time].dataType,
                             *region.input_span)
            held = pending.where(~F.coalesce(in_span, F.lit(False))).unionByName(held)
        versions, history = context.state("versions"), context.history()
        assert versions is not None, "an event-time join that ran keeps its versions"
        needed = history_for_late_rows(versions if history is None else history, ready,
                                       self.plan)
        output = join_query(self.plan, without_annotations(ready),
                            matched_versions(self.plan, ready, needed))
        kept, emitted = self._released(held, versions, before, ending)
        state = {"pending": kept, "versions": versions}
        counts = count_figures({"rows_in": rows, "pending_rows": kept})
        figures = {**counts, "late_rows": 0, "state_rows": counts["pending_rows"]}
        return Restated(output=output, state=state, figures=figures, emitted=emitted)

    def _restate_build(
        self, context: RunContext, read: InputRead, region: Region, watermark_ms: int | None
    ) -> Restated:
        """The build events in the region's span replaced by the rewrite's (`read`) in the
        history and in state; the emitted probe rows from the span's start on re-joined, up to
        the first event after the span of every key it touched (later probe rows join that
        event or a later one) or the committed watermark; pending rows released as an
        ordinary run releases them when the rewrite moved the watermark."""
        before, ending = _watermarks(context, watermark_ms)
        start_ms, end_ms = region.input_span
        build_time = F.col(self.build_time)
        versions, history = context.state("versions"), context.history()
        assert versions is not None and history is not None, "an event-time join that ran"
        rewritten = without_annotations(read.rows)
        in_span = F.coalesce(within(build_time, history.schema[self.build_time].dataType,
                                    start_ms, end_ms), F.lit(False))
        events = reused(history.where(~in_span).unionByName(
            rewritten, allowMissingColumns=True).select(*history.columns))
        keys = list(self.plan.build_keys)
        touched = reused(rewritten.select(*keys).unionByName(history.where(in_span).select(*keys))
                         .unionByName(versions.where(in_span).select(*keys)).distinct())
        # emitted probe rows only: those above `before` are pending
        region_end = max(start_ms, min(self._next_versions(events, touched, end_ms), before + 1))
        rows = self._consumed_probe_rows(context, start_ms, region_end)
        output = join_query(self.plan, rows, matched_versions(
            self.plan, rows, history_for_late_rows(events, rows, self.plan)))
        touched_events = events.join(touched, on=keys, how="left_semi")
        versions = reused(versions.join(touched, on=keys, how="left_anti").unionByName(
            retained_versions(touched_events, keys, self.build_time, ending).select(
                *versions.columns)))
        pending = context.state("pending")
        held = rows.limit(0) if pending is None else pending
        kept, emitted = self._released(held, versions, before, ending)
        counts = count_figures({"rows_in": read.rows, "pending_rows": kept, "events": events})
        figures = {"rows_in": counts["rows_in"], "pending_rows": counts["pending_rows"],
                   "late_rows": 0, "state_rows": counts["pending_rows"]}
        return Restated(
            output=output, state={"pending": kept, "versions": versions}, figures=figures,
            emitted=emitted, history=sorted_for_lookups(events, self.plan, counts["events"]),
            region=replace(self._output_region(start_ms, region_end), late_rows_of_input=False),
        )

    def _next_versions(self, events: DataFrame, touched: DataFrame, end_ms: int) -> int:
        """The latest, over the `touched` keys, of each key's first event at or after `end_ms`
        (epoch ms): from there on every probe row joins a version the rewrite left alone. The
        largest long when a touched key has none. One small Spark job."""
        keys = list(self.plan.build_keys)
        event_ms = _millis(F.col(self.build_time))
        after = events.where(event_ms >= end_ms)
        if ROW_KIND in events.columns:  # a -U carries the time of the version it ends
            after = after.where(F.col(ROW_KIND) != RowKind.UPDATE_BEFORE.value)
        first = after.groupBy(*keys).agg(F.min(event_ms).alias(_NEXT))
        ending = touched.join(first, on=keys, how="left").agg(
            F.max(F.coalesce(F.col(_NEXT), F.lit(LONG_MAX))).cast("long")).first()  # one row
        return LONG_MAX if ending is None or ending[0] is None else int(ending[0])

    def _consumed_probe_rows(self, context: RunContext, start_ms: int, end_ms: int
                             ) -> DataFrame:
        """The probe's rows with rowtime in [`start_ms`, `end_ms`) as the last run consumed
        them."""
        assert context.consumed_rows is not None, "a restatement reads the other input"
        probe = self.probe.name
        rowtime = self.probe.rowtime
        span = None if rowtime is None else FileSpan(rowtime, start_ms, end_ms)
        rows = context.consumed_rows(probe, span)
        probe_time = self.plan.probe_time
        return reused(rows.where(within(F.col(probe_time), rows.schema[probe_time].dataType,
                                        start_ms, end_ms)))

    def _released(
        self, held: DataFrame, versions: DataFrame, before: int, ending: int
    ) -> tuple[DataFrame, DataFrame | None]:
        """The `held` probe rows the watermark keeps above `ending`, and those it released
        joined as an ordinary run joins them (None when it did not move from `before`)."""
        rowtime_ms = _millis(F.col(self.plan.probe_time))
        kept = held.where(rowtime_ms > ending)
        if ending <= before:  # held rows are above `before`: only a moved watermark releases
            return kept, None
        released = held.where(rowtime_ms <= ending)
        return kept, join_query(self.plan, without_annotations(released),  # as a run would
                                matched_versions(self.plan, released, versions), changelog=True)

    def step(
        self,
        context: RunContext,
        reads: Mapping[str, InputRead],
        watermark: Watermark,
        watermark_ms: int | None,
    ) -> Step:
        probe, build = reads[self.probe.name], reads[self.build.name]
        if self.event_time:
            return self._event_time_step(context, probe, build, watermark_ms)
        return self._processing_time_step(context, probe, build)

    def _event_time_step(
        self, context: RunContext, probe: InputRead, build: InputRead, watermark_ms: int | None
    ) -> Step:
        threshold = watermark_ms if watermark_ms is not None else Watermark.MIN_WATERMARK.timestamp
        horizon = context.checkpoint.horizon
        rows = reused(_with_pending(context, probe.rows))
        rowtime_ms = _millis(F.col(self.plan.probe_time))
        is_ready = rowtime_ms <= threshold
        behind_horizon = F.lit(False) if horizon is None else rowtime_ms <= horizon
        # The step's figures in the job that first reads its rows, one pass over each side
        # (not one per filtered frame); the rest are counted as the output and state are
        # written (`_tallied`).
        counts = count_figures({
            **_probe_figures(rows),
            **_build_figures(build),
            "emitted_probe_rows": Where(rows, is_ready),
            "pending_rows": Where(rows, rowtime_ms > threshold),
            "null_rowtime_rows": Where(rows, F.col(self.plan.probe_time).isNull()),
            "behind_horizon": Where(rows, is_ready & behind_horizon),
        })
        rows = rows.drop(_HELD)
        ready = reused(rows.where(is_ready))
        pending = rows.where(rowtime_ms > threshold)
        nulls = rows.where(F.col(self.plan.probe_time).isNull())

        build_rows = self._version_events(context, build.rows)
        new_events = build_rows.where(F.col("__tj_new")).drop("__tj_new")
        events = reused(build_rows.drop("__tj_new"))

        if horizon is None:
            matched = matched_versions(self.plan, ready, events)
        else:
            fresh, late = ready.where(~behind_horizon), ready.where(behind_horizon)
            from_history = None
            if counts["behind_horizon"]:
                answered, from_history = self._late_rows(context, late, events, new_events,
                                                         horizon)
                fresh = fresh.unionByName(answered)
            matched = matched_versions(self.plan, fresh, events)
            if from_history is not None:
                matched = matched.unionByName(from_history)
        held = context.tallies_counted
        matches = Tally(matched, _row_count("matched_rows"), held=held, behind_view=True)
        output = join_query(self.plan, without_annotations(ready), matches.observed,
                            changelog=True)
        retained = Tally(
            retained_versions(events, self.plan.build_keys, self.build_time, threshold),
            _row_count("kept_versions"), held=held,
        )
        late_rows = side_table_rows(nulls, LateReason.NULL_ROWTIME)
        # Nothing new to append to the history (a first run or a refresh writes it anyway)
        appends_nothing = not counts["build_rows_in"] and horizon is not None
        return Step(
            output=output,
            late=late_rows,
            state={"pending": pending, "versions": retained.observed},
            history=None if appends_nothing else sorted_for_lookups(
                new_events, self.plan, counts["build_rows_in"]
            ),
            figures=_counted(counts),
            tallied=_tallied(counts, matches, "versions", retained),
        )

    def _processing_time_step(
        self, context: RunContext, probe: InputRead, build: InputRead
    ) -> Step:
        marked = reused(_with_pending(context, probe.rows))
        rows = marked.drop(_HELD)
        previous = context.state("latest")
        events = without_annotations(build.rows)
        if previous is not None:
            events = previous.unionByName(events, allowMissingColumns=True)
        if self._dedup_keep() is KeepRow.FIRST:  # the first row stays a key's latest version
            latest = reused(first_versions(events, self.plan.build_keys, self.plan.build_time))
        else:
            latest = reused(latest_versions(events, self.plan.build_keys))
        releasing = build.watermark.use_processing_time
        if releasing:
            ready, pending, reason = rows, rows.limit(0), None
        else:
            ready, pending = rows.limit(0), rows
            reason = (
                f"probe rows are held: the build side {self.build.name!r} has not switched to "
                "processing time (its watermark follows event time); declare it with "
                "'scan.startup.mode' = 'snapshot-then-changelog' or without WATERMARK FOR"
            )
        matched = Tally(matched_latest(self.plan, ready, latest), _row_count("matched_rows"),
                        held=context.tallies_counted, behind_view=True)
        output = join_query(self.plan, without_annotations(ready), matched.observed,
                            changelog=True)
        kept = Tally(latest, _row_count("kept_versions"))
        counts = {**count_figures({
            **_probe_figures(marked),
            **_build_figures(build),
            "emitted_probe_rows": Where(marked, F.lit(releasing)),
            "pending_rows": Where(marked, F.lit(not releasing)),
        }), "null_rowtime_rows": 0}
        return Step(
            output=output,
            late=side_table_rows(rows.limit(0), LateReason.NULL_ROWTIME),
            state={"pending": pending, "latest": kept.observed},
            history=None,
            figures=_counted(counts),
            tallied=_tallied(counts, matched, "latest", kept),
            waiting_reason=reason,
        )

    @property
    def build_time(self) -> str:
        assert self.plan.build_time is not None
        return self.plan.build_time

    def _late_rows(
        self, context: RunContext, late: DataFrame, events: DataFrame, new_events: DataFrame,
        horizon: int,
    ) -> tuple[DataFrame, DataFrame | None]:
        """The late probe rows `events` (state and this run's build events) answer, those not
        older than their key's version in state; and the versions the others meet in the
        history (None when there are none)."""
        marked = reused(mark_rows_needing_history(late, events, self.plan, horizon))
        answered, older = split_marked_rows(marked)
        lookup = history_lookup(older, self.plan, new_events.schema)
        if not lookup.needed:
            return answered, None
        stored = context.history()
        history = new_events if stored is None else stored.unionByName(new_events)
        if lookup.condition is not None:
            history = history.where(lookup.condition)  # the pages of the older rows' keys
        # one scan of the history, cut to the events the older late rows can meet
        needed = reused(history_for_late_rows(history, older, self.plan))
        return answered, matched_versions(self.plan, older, needed)

    def _version_events(self, context: RunContext, new_rows: DataFrame) -> DataFrame:
        """State versions plus this run's build events (`__tj_new` marks the latter); for a
        deduplication view, the versions it keeps (`chronolake.joins.versions`): keep-last
        drops versions older than their key's current one, keep-first keeps each key's
        earliest on-time row."""
        keep = self._dedup_keep()
        if keep is KeepRow.FIRST:
            new_rows = on_time_for_first_row(new_rows, self.build_time)
        fresh = without_annotations(new_rows).withColumn("__tj_new", F.lit(True))
        previous = context.state("versions")
        events = fresh if previous is None else previous.withColumn(
            "__tj_new", F.lit(False)
        ).unionByName(fresh)
        return kept_versions(events, self.plan.build_keys, self.build_time, keep)

    def _dedup_keep(self) -> KeepRow | None:
        """Which row a deduplication view on the build side keeps; None for a table."""
        build = self.plan.build
        if isinstance(build, ViewSpec) and build.deduplication is not None:
            return build.deduplication.keep
        return None


def _build_table(catalog: Catalog, build: TableSpec | ViewSpec) -> TableSpec:
    """The table whose commits feed the build side (a deduplication view's source)."""
    if isinstance(build, TableSpec):
        return build
    assert build.deduplication is not None, "planning refuses other views"
    source = catalog.spec(build.deduplication.source)
    if not isinstance(source, TableSpec):
        raise DefinitionError(
            f"deduplication view {build.name!r} reads {source.name!r}, a view; runs need it to "
            "read a table"
        )
    return source


_HELD = "__tj_held"
"""Marks the probe rows held from earlier runs (pending state) among a run's probe rows."""


def _with_pending(context: RunContext, new_rows: DataFrame) -> DataFrame:
    """The probe rows held from earlier runs and `new_rows`, the former marked `_HELD`."""
    pending = context.state("pending")
    new_rows = new_rows.withColumn(_HELD, F.lit(False))
    return new_rows if pending is None else pending.withColumn(_HELD, F.lit(True)).unionByName(
        new_rows
    )


def _probe_figures(marked: DataFrame) -> dict[str, Where]:
    """The run's new probe rows among `marked` (`_with_pending`'s), and the late ones."""
    new = ~F.col(_HELD)
    return {
        "probe_rows_in": Where(marked, new),
        "late_probe_rows": Where(marked, new & F.col(LATE_COLUMN)),
    }


def _build_figures(build: InputRead) -> dict[str, DataFrame | Where]:
    """The run's new build events, and the late ones."""
    return {"build_rows_in": build.rows, "late_build_rows": Where(build.rows, F.col(LATE_COLUMN))}


def _counted(counts: Mapping[str, int]) -> dict[str, int]:
    """The figures the step's own job counted."""
    return {
        "rows_in": counts["probe_rows_in"] + counts["build_rows_in"],
        "probe_rows_in": counts["probe_rows_in"],
        "build_rows_in": counts["build_rows_in"],
        "late_probe_rows": counts["late_probe_rows"],
        "late_build_rows": counts["late_build_rows"],
        # The side table's rows: those without a rowtime. Rows behind the watermark are
        # still answered from the history (late_probe_rows, late_build_rows).
        "late_rows": counts["null_rowtime_rows"],
        "emitted_probe_rows": counts["emitted_probe_rows"],
        "pending_rows": counts["pending_rows"],
        "null_rowtime_rows": counts["null_rowtime_rows"],
    }


def _row_count(name: str) -> dict[str, Column]:
    """A tally of a frame's rows, as figure `name`."""
    return {name: F.count(F.lit(1))}


def _tallied(counts: Mapping[str, int], matched: Tally, kept_role: str, kept: Tally) -> Tallied:
    """The figures that follow from the output's matches (counted as the output is written)
    and from the kept versions (as state role `kept_role` is written)."""

    def figures(tallied: Mapping[str, int]) -> dict[str, int]:
        return {
            "unmatched_rows": counts["emitted_probe_rows"] - tallied["matched_rows"],
            "state_rows": counts["pending_rows"] + tallied["kept_versions"],
        }

    return Tallied({OUTPUT: matched, kept_role: kept}, figures)


_NEXT = "__tj_next"


def _watermarks(context: RunContext, watermark_ms: int | None) -> tuple[int, int]:
    """The committed watermark a restatement starts from, and the one it ends at."""
    started = context.checkpoint.watermark
    before = LONG_MIN if started is None else started
    return before, before if watermark_ms is None else watermark_ms


def _millis(column: Column) -> Column:
    """A probe or build time as epoch milliseconds."""
    return F.unix_micros(column.cast("timestamp")) / 1000
