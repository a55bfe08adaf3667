"""Derived tables as graph-backed assets whose ops are the stages of a run.

A run's page shows each step: `read_changelog` (fix what the run reads, read
each input's new commits), `assign_watermarks` (stamp them with their
watermarks), the operator's step (one op per kind of view, `temporal_join`, `window_aggregate`,
`deduplication` or `interval_join`, described by its operations' registrations), and
`commit` (output, late rows, state and checkpoint, exactly once; then the
materialization metadata and the run's checks). A run that finds nothing new
flows through every op as a no-op and still records its metadata. The ops are
shared by every derived asset (Dagster wants one definition per op name); the
graph's config mapping tells them which view they run, so the launchpad config
stays `ops: {<view>: {config: {...}}}`.

What passes between the ops holds lazy Spark DataFrames, handed over in memory
(`chronolake.dagster.handoff`): the job must use `in_process_executor`.
"""

# No `from __future__ import annotations` here: Dagster reads the `context` annotation at
# definition time and refuses a string.

import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from dagster import (
    AssetCheckResult,
    AssetCheckSpec,
    AssetKey,
    AssetMaterialization,
    AssetObservation,
    AssetsDefinition,
    BackfillPolicy,
    BetaWarning,
    GraphIn,
    GraphOut,
    In,
    MetadataValue,
    Nothing,
    OpDefinition,
    OpExecutionContext,
    Out,
    Output,
    config_mapping,
    graph,
    op,
)
from dagster_pyspark import PySparkResource
from pydantic import Field

from chronolake.dagster.checks import (
    PRIMARY_KEY_CHECK,
    RUN_CHECKS,
    primary_key_description,
    primary_key_result,
    run_check_results,
    run_check_specs,
)
from chronolake.dagster.config import RunConfig
from chronolake.dagster.handoff import HANDOFF_IO_MANAGER_KEY, run_handoff_io_manager
from chronolake.dagster.metadata import run_metadata, shown_watermark
from chronolake.dagster.partitions import (
    DELTA_VERSION,
    LATE_PARTITIONS_CHECK,
    asset_partitions,
    committed_stamps,
    late_partitions_check_spec,
    late_rows_per_partition,
    launched_span,
    partition_materializations,
    recorded_version,
)
from chronolake.dagster.resources import LakeResource
from chronolake.dagster.restating import launched_restatement
from chronolake.dagster.spark_jobs import StageCost, counted_stage
from chronolake.runtime.derived import DerivedTable, RunPlan
from chronolake.runtime.inputs import ChangelogRead, InputRead
from chronolake.runtime.operator import Step
from chronolake.runtime.result import RunResult
from chronolake.schema import ViewKind, ViewSpec
from chronolake.schema.time_options import TimePartitions
from chronolake.schema.windows import Windows
from chronolake.sql.operations import OPERATIONS
from chronolake.sql.view_kinds import view_kind
from chronolake.watermarks.partitions import complete, windows_between

READ_STAGE = "read_changelog"
ASSIGN_STAGE = "assign_watermarks"
COMMIT_STAGE = "commit"
METADATA_STAGE = "metadata"
_RESULT = "result"


class _StageConfig(RunConfig):
    """What the first op is told by the graph's config mapping: the view, and the run config."""

    view: str = Field(description="The derived table this run materializes.")


@dataclass
class StagedRun:
    """A run in flight between ops: the plan (None: up to date), the reads, the step."""

    derived: DerivedTable
    plan: RunPlan | None = None
    changelogs: dict[str, ChangelogRead] = field(default_factory=dict)
    """The inputs' rows as read, before `assign_watermarks`."""
    reads: dict[str, InputRead] = field(default_factory=dict)
    """The inputs' rows with watermarks assigned, after `assign_watermarks`."""
    step: Step | None = None
    restated: RunResult | None = None
    """The whole run, done in the read stage, when it restated a restated input's range."""
    stages: list[StageCost] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)

    @contextmanager
    def stage(self, context: OpExecutionContext, name: str) -> Iterator[StageCost]:
        """Count the Spark jobs and seconds of stage `name`, and log them."""
        spark = self.derived.catalog.spark
        with counted_stage(spark, name, label=self.derived.name) as cost:
            yield cost
        self.stages.append(cost)
        jobs = "" if cost.spark_jobs is None else f", {cost.spark_jobs} Spark jobs"
        context.log.info(f"{self.derived.name}: {name} in {cost.seconds:.2f} s{jobs}")


@op(
    name=READ_STAGE,
    ins={"sources": In(Nothing, description="The upstream tables (ordering only).")},
    out=Out(io_manager_key=HANDOFF_IO_MANAGER_KEY),
    description="Fix what the run reads (each input up to its latest Delta version), then read "
    "each input's new commits (lazy: the source checks read Delta logs, not rows).",
)
def read_changelog(
    context: OpExecutionContext, config: _StageConfig, pyspark: PySparkResource,
    lake: LakeResource,
) -> StagedRun:
    catalog = lake.catalog(pyspark.spark_session, serving=config.view)
    derived = DerivedTable(catalog, config.view, on_source_overwrite=config.on_source_overwrite)
    run = StagedRun(derived)
    with run.stage(context, READ_STAGE):
        # a backfill tagged to restate its partitions: one run, not stages
        run.restated = launched_restatement(context, derived)
        if run.restated is None:
            run.plan = derived.prepare(full_refresh=config.full_refresh)
        if run.plan is not None and run.plan.intent.restate is not None:
            # the next hop of a restatement: one run, not stages (`runtime/restate_next.py`)
            run.restated, run.plan = derived.run(full_refresh=config.full_refresh), None
        elif run.plan is not None:
            run.changelogs = derived.read(run.plan)
    if run.restated is not None:
        context.log.info(f"{derived.name}: {run.restated.message}")
    elif run.plan is None:
        context.log.info(f"{derived.name}: no input moved since the last run: nothing to read")
    else:
        versions = ", ".join(
            f"{name} up to v{end}" for name, end in run.plan.intent.end_versions.items()
        )
        context.log.info(f"{derived.name}: run {run.plan.number} reads {versions}")
    return run


@op(
    name=ASSIGN_STAGE,
    ins={"run": In(description="The run so far (in memory).")},
    out=Out(io_manager_key=HANDOFF_IO_MANAGER_KEY),
    description="Stamp each input's rows with their watermark and lateness, from the stored "
    "watermark state (the rows stay lazy; each event-time input's per-split watermark maxima "
    "are computed here, one Spark job each).",
)
def assign_watermarks(context: OpExecutionContext, run: StagedRun) -> StagedRun:
    if run.plan is None:
        context.log.info(f"{run.derived.name}: no watermarks to assign")
        return run
    with run.stage(context, ASSIGN_STAGE):
        run.reads = run.derived.assign(run.changelogs)
    watermarks = ", ".join(
        f"{name} at {shown_watermark(read.watermark)}" for name, read in run.reads.items()
    )
    context.log.info(f"{run.derived.name}: watermarks after this run's rows: {watermarks}")
    return run


def _operator_op(name: str, description: str) -> OpDefinition:
    @op(
        name=name,
        ins={"run": In(description="The run so far (in memory).")},
        out=Out(io_manager_key=HANDOFF_IO_MANAGER_KEY),
        description=description,
    )
    def _operate(context: OpExecutionContext, run: StagedRun) -> StagedRun:
        if run.plan is None:
            context.log.info(f"{run.derived.name}: nothing to compute in stages")
            return run
        with run.stage(context, name):
            run.step = run.derived.operate(run.plan, run.reads)
        figures = ", ".join(f"{key}={value}" for key, value in run.step.figures.items())
        context.log.info(f"{run.derived.name}: {figures}")
        return run

    return _operate


def _operator_description(kind: ViewKind) -> str:
    """What the op of `kind` does, from its operations' registrations."""
    operations = [operation for operation in OPERATIONS if operation.kind is kind]
    figures = sorted({figure for operation in operations for figure in operation.figures})
    return (
        f"The step of {' or '.join(_a(operation.name) for operation in operations)}: "
        + "; ".join(operation.summary for operation in operations)
        + f". Counts {', '.join(figures)} besides every run's figures."
    )


def _a(name: str) -> str:
    return f"{'an' if name[0] in 'aeiou' else 'a'} {name}"


OPERATOR_OPS = {
    kind: _operator_op(kind.value, _operator_description(kind))
    for kind in dict.fromkeys(op.kind for op in OPERATIONS if op.planner is not None)
}
"""The op of each kind an operator runs (`chronolake.sql.operations`; a test checks that
none is missing)."""

_CHECK_OUTS = {name: Out(Nothing) for name in RUN_CHECKS}
_OPTIONAL = Out(Nothing, is_required=False)  # a partitioned table records its partitions


@op(
    name=COMMIT_STAGE,
    ins={"run": In(description="The run so far (in memory).")},
    out={_RESULT: _OPTIONAL, **_CHECK_OUTS, LATE_PARTITIONS_CHECK: _OPTIONAL,
         PRIMARY_KEY_CHECK: _OPTIONAL},
    description="Write output, late rows, state and checkpoint exactly once (under the run "
    "lock; refused when another run committed meanwhile), then record the run's metadata "
    "and evaluate its checks.",
)
def commit(
    context: OpExecutionContext, run: StagedRun, lake: LakeResource
) -> Iterator[Output | AssetObservation | AssetMaterialization | AssetCheckResult]:
    derived = run.derived
    with run.stage(context, COMMIT_STAGE):
        if run.restated is not None:
            result = run.restated
        elif run.plan is None or run.step is None:
            result = derived.up_to_date()
        else:
            result = derived.commit(run.plan, run.reads, run.step)
    context.log.info(f"{derived.name}: {result.message}")
    for decision in result.ticks.decisions if result.ticks else ():
        context.log.info(f"{derived.name}: {decision}")
    with run.stage(context, METADATA_STAGE):
        checks = run_check_results(context.instance, derived.catalog, lake, result)
        metadata = run_metadata(result, derived.output_path)
    metadata |= _cost_metadata(run, result)
    if derived.view.time.partitions is None:
        yield Output(None, _RESULT, metadata=metadata)
    else:  # its partitions, as the commit stamped them; never the ones a launch targeted
        stamps = committed_stamps(derived.output_path, result.output_version)
        yield from partition_materializations(derived.name, stamps)
        yield late_rows_per_partition(derived.name, stamps, lake.late_row_rate_threshold)
        if derived.view.primary_key:
            yield primary_key_result(context.instance, context.log, derived.catalog,
                                     derived.view, derived.output_path)
        incomplete = _targeted_incomplete(context, derived.view.time.partitions,
                                          derived.operator.windows, result.watermark_ms)
        if incomplete:
            # Dagster would record the output as a materialization of the partitions the run
            # was launched for: the run's figures are an observation, and the assets reading
            # the table in this run wait (their steps are skipped).
            context.log.info(f"{derived.name}: the watermark has not closed "
                             f"{', '.join(incomplete)}: assets reading it in this run wait")
            yield AssetObservation(asset_key=AssetKey(derived.name), metadata=metadata)
        else:
            # A materialization of the run's partitions, all complete, or of none (a run
            # launched for no partition). Last, so that the latest materialization names the
            # Delta version whose partitions were recorded (`recorded_version`).
            recorded = (result.output_version if result.output_version is not None
                        else recorded_version(context.instance, derived.name))
            yield Output(None, _RESULT, metadata=metadata | (
                {DELTA_VERSION: recorded} if recorded >= 0 else {}))
    yield from checks


def _targeted_incomplete(
    context: OpExecutionContext, partitions: TimePartitions, windows: Windows | None,
    watermark_ms: int | None,
) -> list[str]:
    """The partitions this run was launched for that the watermark has not closed (a run of
    no partition targets none)."""
    span = launched_span(context)
    if span is None:
        return []
    targeted = windows_between(partitions, *span)
    closed = {window.key for window in complete(targeted, windows, watermark_ms)}
    return [window.key for window in targeted if window.key not in closed]


def _cost_metadata(run: StagedRun, result: RunResult) -> dict[str, Any]:
    """Seconds and Spark jobs of the whole run and of each stage."""
    seconds = time.monotonic() - run.started
    metadata: dict[str, Any] = {
        "run_seconds": round(seconds, 3),
        "rows_per_second": round(result.figures.get("rows_in", 0) / seconds, 1),
        "chronolake/stages": MetadataValue.json(
            {
                stage.name: {"spark_jobs": stage.spark_jobs, "seconds": round(stage.seconds, 3)}
                for stage in run.stages
            }
        ),
    }
    jobs = [stage.spark_jobs for stage in run.stages]
    if None not in jobs:
        metadata["spark_jobs"] = sum(job or 0 for job in jobs)
    return metadata


def commit_check_specs(spec: ViewSpec) -> list[AssetCheckSpec]:
    """The checks a time partitioned view's commit evaluates besides `run_check_specs`.

    Such a commit yields the asset's output only when an asset later in its run reads it,
    and a check of its own would wait for that output (and be skipped): the commit evaluates
    `primary_key_unique` instead.
    """
    if spec.time.partitions is None:
        return []
    key_check = [AssetCheckSpec(PRIMARY_KEY_CHECK, asset=spec.name,
                                description=primary_key_description(spec))]
    return [late_partitions_check_spec(spec.name), *(key_check if spec.primary_key else [])]


def derived_asset(
    spec: ViewSpec,
    *,
    upstream: list[str],
    group_name: str,
    description: str,
    metadata: dict[str, Any],
) -> AssetsDefinition:
    """The graph-backed asset of an incrementally run view: read → assign watermarks →
    operator → commit."""
    operate = OPERATOR_OPS[view_kind(spec)]
    check_specs = [*run_check_specs(spec.name), *commit_check_specs(spec)]
    check_outputs = {check.name: f"{spec.name}_{check.name}" for check in check_specs}

    @config_mapping
    def _configure(config: RunConfig) -> dict[str, Any]:
        run = {  # Dagster's config spells enums by member name
            "full_refresh": config.full_refresh,
            "on_source_overwrite": config.on_source_overwrite.name,
        }
        return {READ_STAGE: {"config": {"view": spec.name, **run}}}

    @graph(
        name=spec.name,
        ins={name: GraphIn() for name in upstream},
        out={_RESULT: GraphOut(), **{name: GraphOut() for name in check_outputs.values()}},
        config=_configure,
    )
    def _run(**sources: Any) -> dict[str, Any]:
        read = read_changelog(sources=list(sources.values()))
        done = commit(operate(assign_watermarks(read)))
        return {_RESULT: done.result} | {
            graph_output: getattr(done, name) for name, graph_output in check_outputs.items()
        }

    with warnings.catch_warnings():  # resource_defs is beta; it keeps the handoff self-contained
        warnings.simplefilter("ignore", BetaWarning)
        return AssetsDefinition.from_graph(
            _run,
            keys_by_input_name={name: AssetKey(name) for name in upstream},
            keys_by_output_name={_RESULT: AssetKey(spec.name)},
            group_name=group_name,
            descriptions_by_output_name={_RESULT: description},
            metadata_by_output_name={_RESULT: metadata},
            tags_by_output_name={_RESULT: {"dagster/kind/spark": "", "dagster/kind/delta": ""}},
            check_specs=check_specs,
            resource_defs={HANDOFF_IO_MANAGER_KEY: run_handoff_io_manager},
            partitions_def=asset_partitions(spec),
            backfill_policy=BackfillPolicy.single_run() if spec.time.partitions else None,
        )
