"""Runs of a derived table: a view materialized incrementally, exactly once.

A run reads each input's commits since the checkpoint, assigns their
watermarks, hands the rows to the view's operator (a temporal join, a window
aggregate or Top-N, a deduplication or an interval join:
`chronolake.runtime.operators`), and commits output, late rows, state and
checkpoint exactly once (see `chronolake.catalog.checkpoint` for the
protocol). Rows the watermark has not reached stay in state; the next run
takes them back. Results already emitted are never revised.

A run goes in five stages: `prepare` (what to read), `read` (the inputs'
rows), `assign` (their watermarks), `operate` (the operator's step) and
`commit`; Dagster shows them as four ops (`read_changelog` does the first
two). `run()` does them all under the table's run lock; staged callers take it
at `commit`, which refuses when another run committed in between.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from chronolake.catalog import Catalog
from chronolake.catalog.checkpoint import (
    Checkpoint,
    CheckpointStore,
    InputPosition,
    ReadPhase,
    RestatedRange,
    RunIntent,
)
from chronolake.clock import Clock, WallClock
from chronolake.errors import ChronolakeError, DefinitionError, RunError
from chronolake.faults import FaultPoint, fault_point
from chronolake.joins.history import HISTORY_PAGE_ROWS
from chronolake.lake.changelog import SYSTEM_COLUMNS, RowKind
from chronolake.lake.diffs import row_diff
from chronolake.lake.file_span import FileSpan
from chronolake.lake.layout import history_path, late_path, lock_dir, output_path
from chronolake.lake.lock import run_lock
from chronolake.lake.multisets import ROW_IDENTITY, row_changes
from chronolake.lake.stamps import (
    input_versions_stamp,
    partitions_stamp,
    restated_commits,
    restated_stamp,
    watermark_stamp,
)
from chronolake.lake.upserts import final_rows
from chronolake.location import Location
from chronolake.runtime.attempt import RunPlan, begin_writing, pass_commit_point
from chronolake.runtime.figures import run_figures
from chronolake.runtime.inputs import (
    ChangelogRead,
    InputRead,
    assign_all,
    combined_of,
    combined_watermark,
    initial_position,
    position_watermark,
    read_input,
    refresh_position,
)
from chronolake.runtime.operator import OUTPUT, Region, RunContext, Step, as_changes
from chronolake.runtime.operators import operator_for
from chronolake.runtime.output_figures import KIND_FIGURES, OutputFigures
from chronolake.runtime.partition_figures import partition_figures
from chronolake.runtime.restate_check import AcceptedRewrite
from chronolake.runtime.restate_next import restated_input
from chronolake.runtime.restate_run import (
    can_restate,
    changed_span,
    region_read,
    restated_region,
)
from chronolake.runtime.result import RunResult, RunStatus
from chronolake.runtime.reuse import reused
from chronolake.runtime.source_checks import (
    OverwritePolicy,
    check_columns,
    declared_column_types,
    overwrite_error,
    overwrite_versions,
    require_delta_table,
)
from chronolake.runtime.stored import SOURCE_PREFIX, from_stored, stored
from chronolake.runtime.ticks import plan_ticks, step_ticks
from chronolake.schema import TableSpec, ViewSpec
from chronolake.spark.session import parquet_pages_of
from chronolake.sql.operations import operation_planned
from chronolake.watermarks.assigner import WatermarkAssigner
from chronolake.watermarks.millis import utc_text, within
from chronolake.watermarks.watermark import Watermark


class DerivedTable:
    """Incremental, exactly-once runs of a view that an operator runs (`ViewKind`).

    Example:
        >>> result = DerivedTable(catalog, "orders_enriched").run()
        >>> result.figures["rows_out"], result.watermark_ms
    """

    def __init__(
        self,
        catalog: Catalog,
        name: str,
        *,
        clock: Clock | None = None,
        on_source_overwrite: OverwritePolicy = OverwritePolicy.FAIL,
    ) -> None:
        self.catalog = catalog
        self.name = name.lower()
        self.clock = clock or WallClock()
        self.on_source_overwrite = OverwritePolicy(on_source_overwrite)
        view = catalog.spec(name)
        if not isinstance(view, ViewSpec):
            raise DefinitionError(f"{name!r} is a table; only views are materialized by runs")
        self.view = view
        self.bound_plan = catalog.operator_plan(view)
        self.operator = operator_for(catalog, view, self.bound_plan.plan)
        self.inputs = {spec.name: spec for spec in self.operator.inputs}
        root = catalog.root
        self.output_path = output_path(root, self.name)
        self.late_path = late_path(root, self.name)
        self.history_path = history_path(root, self.name)
        self.store = CheckpointStore.of(root, self.name)
        self._locks = lock_dir(root)

    # -- the run ---------------------------------------------------------------------------

    def run(self, *, full_refresh: bool = False) -> RunResult:
        """One run: new commits in, output and state out, committed exactly once.

        `full_refresh=True` rebuilds the table from scratch instead (see
        `chronolake.runtime.refresh`). Raises `RunError` when another run of the
        table holds the lock, `SourceError` for a bad input; either way nothing
        has been written.
        """
        with run_lock(self._locks, self.name):
            self._check_registration()
            plan = self.prepare(full_refresh=full_refresh)
            if plan is None:
                return self.up_to_date()
            if plan.intent.restate is not None:  # an interrupted restatement: finished first
                return self._restated(plan)
            reads = self.assign(self.read(plan))
            return self._commit(plan, reads, self.operate(plan, reads))

    def _check_registration(self) -> None:
        """Refuse to write when the view was dropped or replaced after this run loaded it (a
        DROP or CREATE OR REPLACE holds the run lock while it removes the view's data, so,
        under the lock, the registration read now is the one the output must follow); else
        keep the run's bound plan in it for the runs after."""
        try:
            current = self.catalog.spec(self.name)
        except (ChronolakeError, OSError):  # gone, or its entry moved aside by a drop
            current = None
        if current != self.view:
            msg = (
                f"{self.name!r} was dropped or replaced while this run was starting; nothing "
                f"was written{': run it again' if current is not None else ''}"
            )
            raise RunError(msg)
        self.catalog.keep_plan(self.view, self.bound_plan)

    def prepare(self, *, full_refresh: bool = False) -> RunPlan | None:
        """Fix what the next run reads; None when no input moved (nothing to do).

        A run killed after writing its intent is redone the same way (unless a
        full refresh is asked for and the killed run was not one). Checks every
        input; raises `SourceError` for a bad one, before anything is written.
        """
        committed = self.store.latest()
        number = committed.run + 1
        for spec in self.operator.inputs:
            require_delta_table(self.catalog.table_path(spec), spec, self.name)
        intent = self.store.intent(number)
        if intent is not None and (intent.full_refresh or not full_refresh):
            return RunPlan(committed=committed, intent=intent, resumed=True)
        intent = self._new_intent(committed, number, full_refresh=full_refresh)
        return None if intent is None else RunPlan(committed, intent, resumed=False)

    def up_to_date(self) -> RunResult:
        """The result of a run that found nothing to do."""
        committed = self.store.latest()
        return RunResult(
            table=self.name, run=committed.run, status=RunStatus.UP_TO_DATE,
            message="no new commits in any input since the last run: nothing to do",
            watermark_ms=self._output_watermark(committed.watermark),
            figures={"pending_rows": committed.counters.get("pending_rows", 0)},
        )

    def read(self, plan: RunPlan) -> dict[str, ChangelogRead]:
        """Every input's rows up to the intent's versions (lazy), watermarks not assigned.
        `RunError` for an interrupted restatement, which only `run()` and `restate()` finish."""
        if plan.intent.restate is not None:
            restated = plan.intent.restate
            msg = (
                f"{self.name!r}: its run {plan.number} restates a range of "
                f"{restated.source!r}, which only a whole run does: run it with `chronolake "
                f"run {self.name}` (or the `restate` job), then run this again; nothing was "
                "written"
            )
            raise RunError(msg)
        positions = self._start_positions(plan)
        return {
            name: read_input(
                self.catalog, spec, positions[name], plan.intent.end_versions[name],
                derived=self.name,
            )
            for name, spec in self.inputs.items()
        }

    def assign(self, reads: Mapping[str, ChangelogRead]) -> dict[str, InputRead]:
        """Every input's rows of the run stamped with watermarks, from the stored state
        (one Spark job for all event-time inputs: their per-split maxima; the rows stay
        lazy)."""
        return assign_all(reads, now_ms=self.clock.now_ms())

    def operate(self, plan: RunPlan, reads: Mapping[str, InputRead]) -> Step:
        """The operator's step over this run's rows and the committed state.

        An input with `'scan.max-rows-per-tick'` makes the run go in ticks, with split
        watermark alignment (`chronolake.runtime.ticks`); else the step sees the whole
        backlog at once.
        """
        combined = combined_watermark(reads.values())
        ticked = plan_ticks(reads, self._start_positions(plan))
        context = RunContext(
            checkpoint=plan.base,
            clock=self.clock,
            load_state=lambda role: self._state(plan.base, role),
            # a full refresh builds on nothing: neither state nor the history of earlier runs
            load_history=(lambda: None) if plan.intent.full_refresh else self.history,
            tallies_counted=ticked is not None or self.view.updating,
        )
        if ticked is None:
            watermark_ms = self._watermark_ms(plan.base, combined)
            step = replace(self.operator.step(context, reads, combined, watermark_ms),
                           watermark_ms=watermark_ms,
                           processing_time=combined.use_processing_time)
        else:
            step = step_ticks(self.operator, ticked, context, watermark_ms=self._watermark_ms)
        fault_point(FaultPoint.AFTER_READ)
        return step

    def commit(self, plan: RunPlan, reads: Mapping[str, InputRead], step: Step) -> RunResult:
        """Write the step's output, late rows, state and checkpoint, under the run lock.

        Raises `RunError`, writing nothing, when another run committed since `plan`
        was prepared (prepare again and rerun).
        """
        with run_lock(self._locks, self.name):
            self._check_registration()
            return self._commit(plan, reads, step)

    def restate(self, rewrite: AcceptedRewrite) -> RunResult:
        """Restate the region of this view that `rewrite` (its source's rows in a range,
        rewritten since the version its last run consumed) reaches, as one run: recompute the
        region from the rewritten source and commit only the differences, exactly once
        (docs/design.md, "Restatement"). A run of the view killed in a restatement of the
        same range is finished by it; `RunError` for one killed in anything else.
        """
        with run_lock(self._locks, self.name):
            self._check_registration()
            restated = RestatedRange(source=rewrite.table.lower(), start_ms=rewrite.start_ms,
                                     end_ms=rewrite.end_ms)
            restated_region(self.view, self.operator, source=restated.source,
                            start_ms=rewrite.start_ms, end_ms=rewrite.end_ms)
            committed = self.store.latest()
            number = committed.run + 1
            recorded = self.store.intent(number)
            if recorded is not None and recorded.restate != restated:
                msg = (
                    f"cannot restate {self.name!r}: its run {number} was interrupted; run it "
                    f"first (`chronolake run {self.name}`), then restate again; nothing was "
                    "written"
                )
                raise RunError(msg)
            if recorded is not None:
                return self._restated(RunPlan(committed, recorded, resumed=True))
            if rewrite.end_version <= rewrite.after_version:
                return self.up_to_date().model_copy(update={"message": (
                    f"nothing to restate: {restated.source!r} has no commit after version "
                    f"{rewrite.after_version}, which its last run consumed"
                )})
            return self._restated(RunPlan(committed, self._restate_intent(number, rewrite),
                                          resumed=False))

    def _restate_intent(self, number: int, rewrite: AcceptedRewrite) -> RunIntent:
        """Run `number` as a restatement of `rewrite`: it reads only the rewritten input."""
        [name] = [name for name, spec in self.inputs.items()
                  if spec.changelog_table.name.lower() == rewrite.table.lower()]
        restated = RestatedRange(source=rewrite.table.lower(), start_ms=rewrite.start_ms,
                                 end_ms=rewrite.end_ms)
        return RunIntent(run=number, end_versions={name: rewrite.end_version}, restate=restated)

    def _restated(self, plan: RunPlan) -> RunResult:
        """Run `plan`, a restatement: the region's input rows as of the rewrite, recomputed at
        the committed watermark; the differences with the region's stored rows committed as
        changes (`-U`/`+U`, `-D`, `+I`) with the run's application transaction; the region's
        open rows replaced in state; the input moved to the rewrite's version."""
        restated, committed, number = plan.intent.restate, plan.committed, plan.number
        assert restated is not None
        region = restated_region(self.view, self.operator, source=restated.source,
                                 start_ms=restated.start_ms, end_ms=restated.end_ms)
        [(name, end)] = plan.intent.end_versions.items()
        positions = self._positions(committed)
        region_rows = region_read(self.catalog, self.inputs[name], end, region,
                                  derived=self.name, position=positions[name],
                                  now_ms=self.clock.now_ms())
        read = region_rows.read
        context = RunContext(checkpoint=committed, clock=self.clock,
                             load_state=lambda role: self._state(committed, role),
                             load_history=self.history,
                             consumed_rows=lambda other, span: self._consumed_rows(
                                 other, positions[other], span))
        # the rewrite's rows move the watermark as an ordinary run's would: never back, and
        # held back by the other inputs where they stand
        inputs = {**positions, name: region_rows.position}
        combined = combined_of([position_watermark(position) for position in inputs.values()])
        watermark_ms = self._watermark_ms(committed, combined)
        recomputed = self.operator.restate(context, read, region, watermark_ms)
        region = recomputed.region or region
        backend, key = self.catalog.backend, self.view.primary_key
        stored_rows = region.rows_of(backend.snapshot(self.output_path,
                                                      span=region.stored_files))
        changes = row_diff(stored_rows, recomputed.output, key)
        if recomputed.emitted is not None:
            changes = changes.unionByName(as_changes(recomputed.emitted))
        changes = reused(changes)
        counted = OutputFigures(changes, {}).counted()
        output_span = region.output_span or changed_span(
            changes, self.view.rowtime, (restated.start_ms, restated.end_ms))
        begin_writing(self.store, self.name, plan)
        fault_point(FaultPoint.AFTER_INTENT)
        output_ms = self._output_watermark(watermark_ms)
        stamp = (watermark_stamp(output_ms) | input_versions_stamp(self._by_table(inputs))
                 | restated_stamp(restated.source, *output_span))
        late = read.rows.limit(0)  # the region's rows are all on time, as in a refresh
        stamp |= self._partitions_stamp(plan, late, watermark_ms, changes, replace=False)
        version = backend.commit_changes(
            changes, self.output_path, key=key,
            retracting=any(counted[figure] for figure, kind in KIND_FIGURES.items()
                           if kind is not RowKind.INSERT),
            app_id=f"chronolake/{self.name}", app_version=number, commit_info=stamp,
            # released rows may update keys stored anywhere; the region's lie in its span
            span=region.stored_files if recomputed.emitted is None else None,
        )
        fault_point(FaultPoint.AFTER_OUTPUT)
        if region.late_rows_of_input:
            self._restate_late_rows(self.inputs[name], region)
        fault_point(FaultPoint.AFTER_SIDE_OUTPUT)
        if recomputed.history is not None:  # a redo reads it rewritten, and rewrites the same
            with parquet_pages_of(self.catalog.spark, HISTORY_PAGE_ROWS):
                backend.overwrite_dataframe(stored(recomputed.history), self.history_path)
        state = {role: self.store.state_name(number, plan.attempt, role)
                 for role in recomputed.state}
        for role, frame in recomputed.state.items():
            backend.append_dataframe(stored(frame), self.store.location(state[role]),
                                     app_id=f"chronolake/{self.name}/{role}", app_version=number)
        fault_point(FaultPoint.AFTER_STATE)
        fault_point(FaultPoint.BEFORE_CHECKPOINT)
        figures = run_figures({**recomputed.figures, **counted},
                              operation_planned(self.bound_plan.plan))
        checkpoint = committed.model_copy(update={
            "run": number, "inputs": inputs, "watermark": watermark_ms, "state": state,
            "horizon": watermark_ms if self.operator.event_time else committed.horizon,
            "counters": figures, "finished_at": self.clock.now_ms() / 1000,
        })
        pass_commit_point(self.store, self.name, plan, checkpoint)
        fault_point(FaultPoint.AFTER_CHECKPOINT)
        return RunResult(
            table=self.name, run=number, status=RunStatus.COMMITTED,
            message=(f"run {number} restated {restated.source} "
                     f"[{utc_text(restated.start_ms)}, {utc_text(restated.end_ms)}): "
                     f"{figures['rows_out']} changes"),
            input_versions={name: (positions[name].version + 1, end)},
            figures=figures, watermark_ms=output_ms, output_version=version,
        )

    def _consumed_rows(self, name: str, position: InputPosition, span: FileSpan | None
                       ) -> DataFrame:
        """Input `name`'s snapshot at the version its last run consumed (`position`), of the
        files that may hold rows in `span` (`RunContext.consumed_rows`)."""
        snapshot = InputPosition(version=position.version - 1, phase=ReadPhase.BOOTSTRAP)
        return read_input(self.catalog, self.inputs[name], snapshot, position.version,
                          derived=self.name, span=span).rows

    def _restate_late_rows(self, spec: TableSpec, region: Region) -> None:
        """The side table without the region's late rows: the recompute read them on time, as
        a refresh does. Rewritten whole in one commit (a redo finds none left), and only when
        it holds some (one small job to tell)."""
        backend = self.catalog.backend
        if not backend.is_delta_table(self.late_path):
            return
        late = backend.snapshot(self.late_path)
        rowtime = WatermarkAssigner.for_table(spec).rowtime_column()
        in_region = within(rowtime, late.select(rowtime).schema[0].dataType, *region.input_span)
        if late.where(in_region).isEmpty():
            return
        kept = late.where(~F.coalesce(in_region, F.lit(False)))  # NULL rowtimes stay
        backend.overwrite_dataframe(reused(kept), self.late_path)

    # -- reading ---------------------------------------------------------------------------

    def _start_positions(self, plan: RunPlan) -> dict[str, InputPosition]:
        return plan.intent.start if plan.intent.full_refresh else self._positions(plan.committed)

    def _positions(self, checkpoint: Checkpoint) -> dict[str, InputPosition]:
        return {
            name: checkpoint.inputs.get(name) or initial_position(spec)
            for name, spec in self.inputs.items()
        }

    def _new_intent(
        self, committed: Checkpoint, number: int, *, full_refresh: bool
    ) -> RunIntent | None:
        """Fix what run `number` reads (each input up to its latest version); None when no
        input moved. A source rewritten by OVERWRITE since the checkpoint turns the run
        into a full refresh when that is allowed (or nothing was consumed yet), else stops it.
        """
        specs = {name: spec.changelog_table for name, spec in self.inputs.items()}
        paths = {name: self.catalog.table_path(spec) for name, spec in specs.items()}
        ends = {name: self.catalog.backend.latest_version(path) for name, path in paths.items()}
        positions = self._positions(committed)
        if not full_refresh:
            restating = self._restated_input(number, positions, ends)
            if restating is not None:
                return restating
        if not full_refresh and self._nothing_to_do(committed, positions, ends):
            held = committed.counters.get("pending_rows", 0)
            if not (self.operator.clock_driven and held):
                return None
        for name, position in positions.items():
            if full_refresh or position.phase is ReadPhase.SNAPSHOT:
                continue
            rewritten = overwrite_versions(paths[name], position.version + 1, ends[name])
            if not rewritten:
                continue  # its columns are checked once, as it is read (`read_input`)
            check_columns(  # a dropped or retyped column is named before an OVERWRITE is
                specs[name], consumed=position.columns, consumed_version=position.version,
                current=declared_column_types(paths[name], specs[name], ends[name]),
                version=ends[name], derived=self.name,
            )
            if committed.run > 0 and self.on_source_overwrite is OverwritePolicy.FAIL:
                raise overwrite_error(
                    specs[name], paths[name], rewritten, position.version, self.name
                )
            full_refresh = True
        if not full_refresh:
            return RunIntent(run=number, end_versions=ends)
        start = {
            name: refresh_position(self.catalog, spec, ends[name]) for name, spec in specs.items()
        }
        return RunIntent(run=number, end_versions=ends, full_refresh=True, start=start)

    def _restated_input(
        self, number: int, positions: Mapping[str, InputPosition], ends: dict[str, int]
    ) -> RunIntent | None:
        """Run `number` as the next hop of a restatement when a derived input's next commit is
        a restatement's (`chronolake.runtime.restate_next`): a view that can restate restates
        that range instead of applying the changes. A later one stops this run's read before
        it (`ends` lowered), so that the next run restates it."""
        for name, spec in self.inputs.items():
            table, position = spec.changelog_table, positions[name]
            if not table.derived or ends[name] <= position.version:
                continue
            if not can_restate(self.view, self.operator, table.name.lower()):
                return None  # it reads the changes, as it did before restatements
            spans = restated_commits(self.catalog.backend, self.catalog.table_path(table),
                                     position.version + 1, ends[name])
            if not spans:
                continue
            if min(spans) > position.version + 1:
                ends[name] = min(spans) - 1
                continue
            rewrite = restated_input(self.catalog, table, consumed_version=position.version,
                                     spans=spans)
            assert rewrite is not None  # the next commit is a restatement's
            return self._restate_intent(number, rewrite)
        return None

    @staticmethod
    def _nothing_to_do(
        checkpoint: Checkpoint, positions: dict[str, InputPosition], ends: dict[str, int]
    ) -> bool:
        """No input moved: no event-time watermark can advance, so no pending row can be
        emitted either (only the clock can release rows of a clock-driven operator)."""
        moved = any(
            ends[name] > position.version or position.phase is not ReadPhase.CHANGELOG
            for name, position in positions.items()
        )
        return checkpoint.run > 0 and not moved

    def _watermark_ms(self, checkpoint: Checkpoint, combined: Watermark) -> int | None:
        """The output watermark: the combined one, never below the last run's."""
        if combined.use_processing_time:
            current = self.clock.now_ms()
        elif combined.timestamp == Watermark.MIN_WATERMARK.timestamp:
            return checkpoint.watermark
        else:
            current = combined.timestamp
        return max(current, checkpoint.watermark or current)

    def _output_watermark(self, watermark_ms: int | None) -> int | None:
        """The watermark stamped on the output: the operator's, less its output delay."""
        return None if watermark_ms is None else watermark_ms - self.operator.output_delay_ms

    # -- state and history -----------------------------------------------------------------

    def history(self) -> DataFrame | None:
        """The build side's versions an event-time temporal join keeps for late probe rows
        (None when it keeps none); each run that needs them loads them through here."""
        backend = self.catalog.backend
        if not backend.is_delta_table(self.history_path):
            return None
        return from_stored(backend.snapshot(self.history_path))

    def _state(self, checkpoint: Checkpoint, role: str) -> DataFrame | None:
        path = checkpoint.state.get(role)  # relative to the store, so a lake can be moved
        if path is None:
            return None
        return from_stored(self.catalog.backend.snapshot(self.store.location(path)))

    # -- committing ------------------------------------------------------------------------

    def _commit(self, plan: RunPlan, reads: Mapping[str, InputRead], step: Step) -> RunResult:
        """Write and pass the commit point. Another attempt at the same run (another host's,
        or one that took over this run's lease while it stalled) may be doing the same: the
        first intent written binds both, and only one passes the commit point."""
        begin_writing(self.store, self.name, plan)
        fault_point(FaultPoint.AFTER_INTENT)
        number, intent = plan.number, plan.intent
        watermark_ms = step.watermark_ms
        output_ms = self._output_watermark(watermark_ms)
        stamp = watermark_stamp(output_ms) | input_versions_stamp(self._consumed(reads))
        output_version, written_figures = self._write(
            plan, step, stamp, replace=intent.full_refresh
        )
        figures = run_figures(  # refused before the commit
            {**step.figures, **written_figures}, operation_planned(self.bound_plan.plan)
        )
        checkpoint = Checkpoint(
            run=number,
            inputs={name: read.position for name, read in reads.items()},
            watermark=watermark_ms,
            horizon=watermark_ms if self.operator.event_time else None,
            state={role: self.store.state_name(number, plan.attempt, role) for role in step.state},
            counters=figures,
            finished_at=self.clock.now_ms() / 1000,
        )
        pass_commit_point(self.store, self.name, plan, checkpoint)
        fault_point(FaultPoint.AFTER_CHECKPOINT)
        what = "rebuilt the table from scratch with" if intent.full_refresh else "committed"
        starts = self._start_positions(plan)
        return RunResult(
            table=self.name,
            run=number,
            status=RunStatus.COMMITTED,
            message=f"run {number} {what} {figures['rows_out']} rows",
            input_versions={
                name: (starts[name].version + 1, end) for name, end in intent.end_versions.items()
            },
            figures=figures,
            watermark_ms=output_ms,
            processing_time=step.processing_time,
            source_phases={name: read.phase for name, read in reads.items()},
            switch_versions={
                name: read.switched_at
                for name, read in reads.items()
                if read.switched_at is not None
            },
            output_version=output_version,
            waiting_reason=step.waiting_reason,
            ticks=step.ticks,
        )

    def consumed(self) -> dict[str, int]:
        """The last version of each input table the last committed run consumed, by table
        name (empty before the first run): where a restatement's check of a rewritten
        source starts (`chronolake.runtime.restate_plan`)."""
        return self._by_table(self.store.latest().inputs)

    def restatement_unread(self) -> bool:
        """Whether a derived input has a restatement's commit this view has not read yet
        (one read of each such input's log)."""
        consumed, backend = self.consumed(), self.catalog.backend
        derived = [spec.changelog_table for spec in self.inputs.values()
                   if spec.changelog_table.derived]  # only their logs are read
        return any(
            restated_commits(backend, path, consumed.get(table.name.lower(), -1) + 1,
                             backend.latest_version(path))
            for table in derived for path in [self.catalog.table_path(table)]
        )

    def interrupted_run(self) -> RunIntent | None:
        """The intent of a run killed after recording it, which the next run finishes first
        with the input versions it fixed (`prepare`); None when there is none."""
        return self.store.intent(self.store.latest().run + 1)

    def _consumed(self, reads: Mapping[str, InputRead]) -> dict[str, int]:
        """The last version of each input table the run consumed, by table name."""
        return self._by_table({name: read.position for name, read in reads.items()})

    def _by_table(self, positions: Mapping[str, InputPosition]) -> dict[str, int]:
        """Each input's version by the table whose commits it reads (a plain view's source
        by the source's name; a table two inputs read, at the later of theirs)."""
        consumed: dict[str, int] = {}
        for name, position in positions.items():
            table = self.inputs[name].changelog_table.name.lower()
            consumed[table] = max(position.version, consumed.get(table, -1))
        return consumed

    def _write(self, plan: RunPlan, step: Step, stamp: Mapping[str, str], *, replace: bool
               ) -> tuple[int | None, dict[str, int]]:
        """Commit the output's changes (with `stamp` in its commitInfo: the output watermark
        and the input versions consumed, `chronolake.lake.stamps`), append late rows
        and history (each idempotent per run), then write state; return the output's
        version and the figures its writes counted (the output's, and the step's tallies).

        `replace` (a full refresh) overwrites output, late rows and history instead: one
        Delta commit each, which a retry repeats with the same rows.
        """
        backend, run = self.catalog.backend, plan.number
        app = f"chronolake/{self.name}"

        def write(frame: DataFrame, path: Location, app_id: str) -> int | None:
            if replace:
                return backend.overwrite_dataframe(frame, path)
            return backend.append_dataframe(frame, path, app_id=app_id, app_version=run)

        changes = as_changes(step.output)
        if self.view.updating or self.view.time.partitions:  # read twice: counted, applied
            changes = reused(changes)
        stamp = {**stamp, **self._partitions_stamp(plan, step.late, step.watermark_ms, changes,
                                                   replace=replace)}
        counts = OutputFigures(changes, step.output_figures)
        version: int | None  # None: a retried run's commit was already in the table
        if self.view.updating:  # the kinds decide how the changes are applied: counted first
            figures = counts.counted()
            applied, key = changes, self.view.primary_key
            if not key:  # a retract stream: a multiset, each row by its hidden identity
                applied, key = self._as_rows(changes, replace=replace), (ROW_IDENTITY,)
            if replace:
                version = backend.overwrite_dataframe(
                    final_rows(applied, key), self.output_path,
                    enable_cdf=True, commit_info=stamp,
                )
            else:
                retracting = any(  # a +U replaces a stored row too, even where no -U matched
                    figures[name] for name, kind in KIND_FIGURES.items()
                    if kind is not RowKind.INSERT
                )
                version = backend.commit_changes(
                    applied, self.output_path, key=key,
                    retracting=retracting, app_id=app, app_version=run, commit_info=stamp,
                )
        else:  # insert-only: every change is a new row, counted as it is written
            rows = counts.observed.drop(*SYSTEM_COLUMNS)
            if replace:
                version = backend.overwrite_dataframe(
                    rows, self.output_path, enable_cdf=True, commit_info=stamp
                )
            else:
                version = backend.append_dataframe(
                    rows, self.output_path, app_id=app, app_version=run, enable_cdf=True,
                    commit_info=stamp,
                )
            figures = counts.written(version)
        # An updating output is read through a checkpoint, which cannot observe its tallies:
        # they are counted by a job of their own (None)
        written = {OUTPUT: None if self.view.updating else version}
        fault_point(FaultPoint.AFTER_OUTPUT)
        # No late rows, by the figures: nothing to append (a job and a commit saved) to a side
        # table that exists (its first run creates it, empty or not)
        if replace or step.figures["late_rows"] or not backend.is_delta_table(self.late_path):
            write(stored(step.late, prefix=SOURCE_PREFIX), self.late_path, f"{app}/late")
        fault_point(FaultPoint.AFTER_SIDE_OUTPUT)
        if step.history is not None:
            with parquet_pages_of(self.catalog.spark, HISTORY_PAGE_ROWS):
                write(stored(step.history), self.history_path, f"{app}/history")
        for role, frame in step.state.items():
            written[role] = backend.append_dataframe(
                stored(frame), self.store.location(self.store.state_name(run, plan.attempt, role)),
                app_id=f"{app}/{role}", app_version=run,
            )
        fault_point(FaultPoint.AFTER_STATE)
        fault_point(FaultPoint.BEFORE_CHECKPOINT)
        return version, {**figures, **step.tallied.written(written)}

    def _partitions_stamp(self, plan: RunPlan, late: DataFrame, watermark_ms: int | None,
                          changes: DataFrame, *, replace: bool) -> dict[str, str]:
        """The stamp of the time partitions this commit completes or changes (none for a
        table without partitions): `chronolake.runtime.partition_figures`."""
        partitions = self.view.time.partitions
        if partitions is None:
            return {}
        backend = self.catalog.backend

        def held(path: Location) -> DataFrame | None:
            kept = not replace and backend.is_delta_table(path)
            return backend.snapshot(path) if kept else None

        late_column = next((spec.rowtime for spec in self.operator.inputs
                            if spec.rowtime and spec.rowtime in late.columns), None)
        return partitions_stamp(partition_figures(
            self.catalog.spark, partitions, self.operator.windows,
            before_ms=self._output_watermark(plan.base.watermark),
            after_ms=self._output_watermark(watermark_ms),
            changes=changes, late=late, late_column=late_column,
            stored=held(self.output_path), stored_late=held(self.late_path),
        ))

    def _as_rows(self, changes: DataFrame, *, replace: bool) -> DataFrame:
        """A retract stream's changes as keyed changes of the stored multiset (none for a
        full refresh, which rewrites it): `chronolake.lake.multisets`."""
        backend = self.catalog.backend
        kept = not replace and backend.is_delta_table(self.output_path)
        return reused(row_changes(changes, backend.snapshot(self.output_path) if kept else None))


def pending_rows(catalog: Catalog, name: str) -> DataFrame | None:
    """The rows a derived table holds after its last committed run (None before one)."""
    store = CheckpointStore.of(catalog.root, name)
    path = store.latest().state.get("pending")
    return from_stored(catalog.backend.snapshot(store.location(path))) if path else None
