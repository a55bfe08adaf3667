"""Runs of a derived table: a view whose query has a temporal join, materialized incrementally.

A run reads each input's commits since the checkpoint, assigns watermarks,
emits the probe rows the combined watermark has reached, joins them, and
commits output, late rows, state and checkpoint exactly once (see
`chronolake.runtime.checkpoint` for the protocol). Probe rows the watermark
has not reached yet stay pending in state; the next run emits them. Results
already emitted are never revised.

Event time (`FOR SYSTEM_TIME AS OF o.rowtime`): a probe row is emitted once the
combined watermark of both inputs reaches its rowtime and joins the version of
its key valid then among the build events arrived so far. State keeps the
build versions newer than the watermark plus the latest one at or below it;
every build event is also appended to the run history, where a late probe row
(at or below the state's horizon) finds the version valid at its rowtime.

Processing time (`FOR SYSTEM_TIME AS OF o.proctime`): probe rows wait until the
build side's watermark follows processing time (a source without watermarks at
once, a hybrid source once its snapshot is read), then join the latest version
of their key.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from chronolake.catalog import Catalog
from chronolake.clock import Clock, WallClock
from chronolake.errors import DefinitionError
from chronolake.joins.temporal import (
    join_query,
    latest_versions,
    matched_latest,
    matched_versions,
)
from chronolake.joins.versions import STALE_VERSION, mark_stale_versions, retained_versions
from chronolake.lake.changelog import SYSTEM_COLUMNS
from chronolake.runtime.checkpoint import Checkpoint, CheckpointStore, InputPosition, RunIntent
from chronolake.runtime.faults import FaultPoint, fault_point
from chronolake.runtime.inputs import (
    SNAPSHOT_PHASE,
    InputRead,
    initial_position,
    read_input,
    refresh_position,
)
from chronolake.runtime.lock import run_lock
from chronolake.runtime.result import RunResult, RunStatus
from chronolake.runtime.source_checks import (
    OverwritePolicy,
    check_columns,
    declared_column_types,
    overwrite_error,
    overwrite_versions,
    require_delta_table,
)
from chronolake.schema import TableSpec, ViewSpec
from chronolake.sql.temporal import TemporalJoinPlan, TimeMode, plan_temporal_join
from chronolake.watermarks._late import LateReason, side_table_rows
from chronolake.watermarks.assigner import LATE_COLUMN, WATERMARK_COLUMN
from chronolake.watermarks.watermark import Watermark

STATE_ROOT = Path("_chronolake") / "state"
LATE_ROOT = Path("_chronolake") / "late"
LOCK_ROOT = Path("_chronolake") / "locks"
VIEWS_ROOT = Path("_chronolake") / "views"
_INTERNAL_COLUMNS = (WATERMARK_COLUMN, LATE_COLUMN)
_STORED = "state"  # prefix of system columns in state tables: `state_commit_version`


def output_path(root: Path, name: str) -> Path:
    """Where a view's rows are materialized: `_chronolake/views/<name>` under the lake."""
    return root / VIEWS_ROOT / name.lower()


@dataclass(frozen=True)
class _Step:
    """What one run of the operator produced, before anything is written."""

    output: DataFrame
    late: DataFrame
    state: dict[str, DataFrame]
    history: DataFrame | None
    figures: dict[str, int]
    waiting_reason: str | None = None


class DerivedTable:
    """Incremental, exactly-once runs of a view with a temporal join.

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
        self.plan: TemporalJoinPlan = plan_temporal_join(view.query, catalog.specs())
        self.probe = self.plan.probe
        self.build = _build_table(catalog, self.plan.build)
        root = catalog.root
        self.output_path = output_path(root, self.name)
        self.late_path = root / LATE_ROOT / self.name
        self.history_path = root / STATE_ROOT / self.name / "history"
        self.store = CheckpointStore(root / STATE_ROOT / self.name)
        self._lock_dir = root / LOCK_ROOT

    # -- the run ---------------------------------------------------------------------------

    def run(self, *, full_refresh: bool = False) -> RunResult:
        """One run: new commits in, output and state out, committed exactly once.

        `full_refresh=True` rebuilds the table from scratch instead (see
        `chronolake.runtime.refresh`). Raises `RunError` when another run of the
        table holds the lock, `SourceError` for a bad input; either way nothing
        has been written.
        """
        with run_lock(self._lock_dir, self.name):
            return self._run(full_refresh=full_refresh)

    def _run(self, *, full_refresh: bool) -> RunResult:
        committed = self.store.latest()
        number = committed.run + 1
        for spec in (self.probe, self.build):
            require_delta_table(self.catalog.table_path(spec), spec, self.name)
        intent = self.store.intent(number)  # set: run `number` was killed; redo it the same way
        resumed = intent is not None and (intent.full_refresh or not full_refresh)
        if not resumed:
            intent = self._new_intent(committed, number, full_refresh=full_refresh)
            if intent is None:
                return RunResult(
                    table=self.name, run=committed.run, status=RunStatus.UP_TO_DATE,
                    message="no new commits in any input since the last run: nothing to do",
                    watermark_ms=committed.watermark,
                    figures={"pending_rows": committed.counters.get("pending_rows", 0)},
                )
        assert intent is not None
        checkpoint = Checkpoint(run=committed.run) if intent.full_refresh else committed
        positions = intent.start if intent.full_refresh else self._positions(checkpoint)
        probe, build = (
            read_input(self.catalog, spec, positions[spec.name], intent.end_versions[spec.name],
                       derived=self.name)
            for spec in (self.probe, self.build)
        )
        if not resumed:  # every input checked and its read defined: now the run may write
            self.store.write_intent(intent)
        fault_point(FaultPoint.AFTER_INTENT)
        combined = min(probe.watermark, build.watermark)
        if self.plan.mode is TimeMode.EVENT_TIME:
            step = self._event_time_step(checkpoint, probe, build, combined)
        else:
            step = self._processing_time_step(checkpoint, probe, build)
        step.figures["invalid_rows"] = step.late.count()
        fault_point(FaultPoint.AFTER_READ)
        output_version = self._commit(number, step, replace=intent.full_refresh)
        watermark_ms = self._watermark_ms(checkpoint, combined)
        counters = {**step.figures}
        self.store.commit(
            Checkpoint(
                run=number,
                inputs={probe.spec.name: probe.position, build.spec.name: build.position},
                watermark=watermark_ms,
                horizon=watermark_ms if self.plan.mode is TimeMode.EVENT_TIME else None,
                state={role: self.store.state_name(number, role) for role in step.state},
                counters=counters,
                finished_at=self.clock.now_ms() / 1000,
            )
        )
        fault_point(FaultPoint.AFTER_CHECKPOINT)
        shutil.rmtree(self.store.state_dir(number - 2), ignore_errors=True)
        what = "rebuilt the table from scratch with" if intent.full_refresh else "committed"
        return RunResult(
            table=self.name,
            run=number,
            status=RunStatus.COMMITTED,
            message=f"run {number} {what} {step.figures['rows_out']} rows",
            input_versions={
                name: (positions[name].version + 1, end)
                for name, end in intent.end_versions.items()
            },
            figures=step.figures,
            watermark_ms=watermark_ms,
            processing_time=combined.use_processing_time,
            source_phases={probe.spec.name: probe.phase, build.spec.name: build.phase},
            switch_versions={
                read.spec.name: read.switched_at
                for read in (probe, build)
                if read.switched_at is not None
            },
            output_version=output_version,
            waiting_reason=step.waiting_reason,
        )

    def _positions(self, checkpoint: Checkpoint) -> dict[str, InputPosition]:
        return {
            spec.name: checkpoint.inputs.get(spec.name) or initial_position(spec)
            for spec in (self.probe, self.build)
        }

    def _new_intent(
        self, committed: Checkpoint, number: int, *, full_refresh: bool
    ) -> RunIntent | None:
        """Fix what run `number` reads (each input up to its latest version); None when no
        input moved. A source rewritten by OVERWRITE since the checkpoint turns the run
        into a full refresh when that is allowed (or nothing was consumed yet), else stops it.
        """
        specs = {spec.name: spec for spec in (self.probe, self.build)}
        paths = {name: self.catalog.table_path(spec) for name, spec in specs.items()}
        ends = {name: self.catalog.backend.latest_version(path) for name, path in paths.items()}
        positions = self._positions(committed)
        if not full_refresh and self._nothing_to_do(committed, positions, ends):
            return None
        for name, position in positions.items():
            if full_refresh or position.phase == SNAPSHOT_PHASE:
                continue
            check_columns(  # a dropped or retyped column is named before an OVERWRITE is
                specs[name], consumed=position.columns, consumed_version=position.version,
                current=declared_column_types(paths[name], specs[name], ends[name]),
                version=ends[name], derived=self.name,
            )
            rewritten = overwrite_versions(paths[name], position.version + 1, ends[name])
            if not rewritten:
                continue
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

    @staticmethod
    def _nothing_to_do(
        checkpoint: Checkpoint, positions: dict[str, InputPosition], ends: dict[str, int]
    ) -> bool:
        """No input moved: no watermark can advance, so no pending row can be emitted either."""
        moved = any(
            ends[name] > position.version or position.phase != "changelog"
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

    # -- operators -------------------------------------------------------------------------

    def _event_time_step(
        self, checkpoint: Checkpoint, probe: InputRead, build: InputRead, combined: Watermark
    ) -> _Step:
        watermark_ms = self._watermark_ms(checkpoint, combined)
        threshold = watermark_ms if watermark_ms is not None else Watermark.MIN_WATERMARK.timestamp
        rows = self._with_pending(checkpoint, probe.rows).localCheckpoint()
        rowtime_ms = F.unix_micros(F.col(self.plan.probe_time).cast("timestamp")) / 1000
        ready = rows.where(rowtime_ms <= threshold).localCheckpoint()
        pending = rows.where(rowtime_ms > threshold)
        nulls = rows.where(F.col(self.plan.probe_time).isNull())

        build_rows = self._version_events(checkpoint, build.rows)
        new_events = build_rows.where(F.col("__tj_new")).drop("__tj_new")
        events = build_rows.drop("__tj_new").localCheckpoint()

        horizon = checkpoint.horizon
        if horizon is None:
            matched = matched_versions(self.plan, ready, events)
        else:
            fresh, late = ready.where(rowtime_ms > horizon), ready.where(rowtime_ms <= horizon)
            matched = matched_versions(self.plan, fresh, events)
            if late.limit(1).count():
                history = self._history(new_events)
                matched = matched.unionByName(matched_versions(self.plan, late, history))
        matched = matched.localCheckpoint()  # used by the output and by the figures
        output = join_query(self.plan, ready.drop(*_INTERNAL_COLUMNS), matched).localCheckpoint()
        retained = retained_versions(events, self.plan.build_keys, self.build_time, threshold)
        figures = _figures(
            rows_in=probe.rows, build_in=build.rows, ready=ready, output=output,
            matched=matched, pending=pending,
        )
        figures["state_rows"] = figures["pending_rows"] + retained.count()
        return _Step(
            output=output,
            late=side_table_rows(nulls, LateReason.NULL_ROWTIME),
            state={"pending": pending, "versions": retained},
            history=new_events,
            figures=figures,
        )

    def _processing_time_step(
        self, checkpoint: Checkpoint, probe: InputRead, build: InputRead
    ) -> _Step:
        rows = self._with_pending(checkpoint, probe.rows).localCheckpoint()
        previous = self._state(checkpoint, "latest")
        events = _clean(build.rows)
        if previous is not None:
            events = previous.unionByName(events, allowMissingColumns=True)
        latest = latest_versions(events, self.plan.build_keys).localCheckpoint()
        if build.watermark.use_processing_time:
            ready, pending, reason = rows, rows.limit(0), None
        else:
            ready, pending = rows.limit(0), rows
            reason = (
                f"probe rows are held: the build side {self.build.name!r} has not switched to "
                "processing time (its watermark follows event time); declare it with "
                "'scan.startup.mode' = 'snapshot-then-changelog' or without WATERMARK FOR"
            )
        matched = matched_latest(self.plan, ready, latest).localCheckpoint()
        output = join_query(self.plan, ready.drop(*_INTERNAL_COLUMNS), matched).localCheckpoint()
        figures = _figures(
            rows_in=probe.rows, build_in=build.rows, ready=ready, output=output,
            matched=matched, pending=pending,
        )
        figures["state_rows"] = figures["pending_rows"] + latest.count()
        return _Step(
            output=output,
            late=side_table_rows(rows.limit(0), LateReason.NULL_ROWTIME),
            state={"pending": pending, "latest": latest},
            history=None,
            figures=figures,
            waiting_reason=reason,
        )

    # -- state and history -----------------------------------------------------------------

    @property
    def build_time(self) -> str:
        assert self.plan.build_time is not None
        return self.plan.build_time

    def _with_pending(self, checkpoint: Checkpoint, new_rows: DataFrame) -> DataFrame:
        pending = self._state(checkpoint, "pending")
        if pending is None:
            return new_rows
        return pending.unionByName(new_rows)

    def _version_events(self, checkpoint: Checkpoint, new_rows: DataFrame) -> DataFrame:
        """State versions plus this run's build events (`__tj_new` marks the latter); for a
        deduplication view, versions older than their key's current one are dropped."""
        fresh = _clean(new_rows).withColumn("__tj_new", F.lit(True))
        previous = self._state(checkpoint, "versions")
        events = fresh if previous is None else previous.withColumn(
            "__tj_new", F.lit(False)
        ).unionByName(fresh)
        if isinstance(self.plan.build, ViewSpec):
            marked = mark_stale_versions(events, self.plan.build_keys, self.build_time)
            events = marked.where(~F.col(STALE_VERSION)).drop(STALE_VERSION)
        return events

    def _history(self, new_events: DataFrame) -> DataFrame:
        backend = self.catalog.backend
        if not backend.is_delta_table(self.history_path):
            return new_events
        return _from_stored(backend.snapshot(self.history_path)).unionByName(new_events)

    def _state(self, checkpoint: Checkpoint, role: str) -> DataFrame | None:
        path = checkpoint.state.get(role)  # relative to the store, so a lake can be moved
        if path is None:
            return None
        return _from_stored(self.catalog.backend.snapshot(self.store.directory / path))

    def _state_path(self, run: int, role: str) -> Path:
        return self.store.state_dir(run) / role

    # -- committing ------------------------------------------------------------------------

    def _commit(self, run: int, step: _Step, *, replace: bool) -> int | None:
        """Append output, late rows and history (each idempotent per run), then write state.

        `replace` (a full refresh) overwrites output, late rows and history instead: one
        Delta commit each, which a retry repeats with the same rows.
        """
        backend = self.catalog.backend
        app = f"chronolake/{self.name}"

        def write(frame: DataFrame, path: Path, app_id: str) -> int | None:
            if replace:
                return backend.overwrite_dataframe(frame, path)
            return backend.append_dataframe(frame, path, app_id=app_id, app_version=run)

        version = write(step.output, self.output_path, app)
        fault_point(FaultPoint.AFTER_OUTPUT)
        write(_stored(step.late, prefix="source"), self.late_path, f"{app}/late")
        fault_point(FaultPoint.AFTER_SIDE_OUTPUT)
        if step.history is not None:
            write(_stored(step.history), self.history_path, f"{app}/history")
        shutil.rmtree(self.store.state_dir(run), ignore_errors=True)  # a killed attempt's
        for role, frame in step.state.items():
            backend.append_dataframe(
                _stored(frame), self._state_path(run, role), app_id=f"{app}/{role}",
                app_version=run,
            )
        fault_point(FaultPoint.AFTER_STATE)
        fault_point(FaultPoint.BEFORE_CHECKPOINT)
        return version


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


def _stored(frame: DataFrame, *, prefix: str = _STORED) -> DataFrame:
    """Rows as stored in chronolake's own tables: system columns renamed (`state_position`,
    `source_position`), since Delta reads add their own."""
    return frame.select(
        *[F.col(f"`{c}`").alias(f"{prefix}{c}" if c in SYSTEM_COLUMNS else c)
          for c in frame.columns]
    )


def _from_stored(frame: DataFrame) -> DataFrame:
    return frame.select(
        *[F.col(f"`{c}`").alias(c.removeprefix(_STORED)) for c in frame.columns]
    )


def _clean(rows: DataFrame) -> DataFrame:
    """Build rows without the watermark annotations (state keeps changelog columns only)."""
    return rows.drop(*_INTERNAL_COLUMNS)


def _figures(
    *, rows_in: DataFrame, build_in: DataFrame, ready: DataFrame, output: DataFrame,
    matched: DataFrame, pending: DataFrame,
) -> dict[str, int]:
    """The run's counts, each one small aggregate job over already computed frames."""
    probe = rows_in.agg(
        F.count(F.lit(1)).alias("rows"), F.count_if(F.col(LATE_COLUMN)).alias("late")
    ).first()
    build = build_in.agg(
        F.count(F.lit(1)).alias("rows"), F.count_if(F.col(LATE_COLUMN)).alias("late")
    ).first()
    emitted = ready.count()
    matched_rows = matched.count()
    return {
        "rows_in": int(probe["rows"]) + int(build["rows"]),
        "probe_rows_in": int(probe["rows"]),
        "build_rows_in": int(build["rows"]),
        "late_probe_rows": int(probe["late"]),
        "late_build_rows": int(build["late"]),
        "late_rows": int(probe["late"]) + int(build["late"]),
        "emitted_probe_rows": emitted,
        "unmatched_rows": emitted - matched_rows,
        "rows_out": output.count(),
        "pending_rows": pending.count(),
    }



def pending_rows(catalog: Catalog, name: str) -> DataFrame | None:
    """The probe rows a derived table holds after its last committed run (None before one)."""
    store = CheckpointStore(catalog.root / STATE_ROOT / name.lower())
    path = store.latest().state.get("pending")
    return _from_stored(catalog.backend.snapshot(store.directory / path)) if path else None
