"""Restatement as a Dagster job: the range as config, each restated view recorded.

`chronolake restate` from the launchpad (docs/design.md, "Restatement"): after a source's
rows of a time range were rewritten, the job restates the views that read it and records
each one as materialized with its figures. A partitioned view is recorded per time
partition the restatement changed, with its changes by row kind, as its commit stamped
them, so the partitioned assets downstream of it go stale and run again.

A backfill of chosen partitions of partitioned views, tagged `chronolake/restate=<source>`,
restates the time those partitions span: each view that reads the source restates it in
its own step, and the views after it restate what it changed.
"""

# No `from __future__ import annotations` here: Dagster reads the `context` annotation at
# definition time and refuses a string.

from datetime import datetime

from dagster import (
    AssetKey,
    AssetMaterialization,
    Config,
    JobDefinition,
    OpExecutionContext,
    job,
    op,
)
from dagster_pyspark import PySparkResource
from pydantic import Field, field_validator

from chronolake.dagster.metadata import run_metadata
from chronolake.dagster.partitions import (
    committed_stamps,
    launched_span,
    partition_materializations,
)
from chronolake.dagster.resources import LakeResource
from chronolake.errors import RunError
from chronolake.lake.layout import output_path
from chronolake.runtime.derived import DerivedTable
from chronolake.runtime.restate_plan import restate_view, run_restatement
from chronolake.runtime.result import RunResult, RunStatus
from chronolake.watermarks.millis import utc_millis

RESTATE_JOB = "restate"
RESTATE_TAG = "chronolake/restate"
"""The run tag of a backfill that restates the partitions it targets: its value names the
source table whose rows in them were rewritten (`launched_restatement`)."""


class RestateConfig(Config):
    """The launchpad's `ops: {restate_range: {config: {table: orders, start: ..., end: ...}}}`."""

    table: str = Field(description="The source table whose rows were rewritten.")
    start: str = Field(description="The range's start (inclusive) in ISO 8601, UTC when no "
                       "zone is given, e.g. 2026-11-02T09:00.")
    end: str = Field(description="The range's end (exclusive), as `start`.")

    @field_validator("start", "end")
    @classmethod
    def _an_instant(cls, value: str) -> str:
        try:
            datetime.fromisoformat(value)
        except ValueError:
            msg = f"{value!r} is not an ISO 8601 instant; write it as 2026-11-02T09:00"
            raise ValueError(msg) from None
        return value

    def millis(self) -> tuple[int, int]:
        """The range in epoch milliseconds."""
        start, end = (datetime.fromisoformat(value) for value in (self.start, self.end))
        return utc_millis(start), utc_millis(end)


def restate_job(name: str = RESTATE_JOB) -> JobDefinition:
    """A job that restates a range of a source through the views that read it
    (`chronolake.runtime.restate_plan.run_restatement`)."""

    @op(name=f"{name}_range", description="Recompute what depends on the source's rewritten "
        "range in the views that read it, and commit only the differences.")
    def restate_range(
        context: OpExecutionContext, config: RestateConfig, lake: LakeResource,
        pyspark: PySparkResource,
    ) -> None:
        catalog = lake.catalog(pyspark.spark_session)
        start_ms, end_ms = config.millis()
        for result in run_restatement(catalog, config.table, start_ms=start_ms, end_ms=end_ms):
            context.log.info(f"{result.table}: {result.message}")
            if result.status is RunStatus.LEFT:
                continue
            path = output_path(catalog.root, result.table)
            if catalog.spec(result.table).time.partitions is None:
                recorded = [AssetMaterialization(asset_key=AssetKey(result.table),
                                                 metadata=run_metadata(result, path))]
            else:
                recorded = partition_materializations(
                    result.table, committed_stamps(path, result.output_version))
            for materialization in recorded:
                context.log_event(materialization)

    @job(name=name, description="Restate a time range of a source after it was rewritten: "
         "the views that read it get only the differences, as -U/+U/-D changes.")
    def restate() -> None:
        restate_range()

    return restate


def launched_restatement(context: OpExecutionContext, derived: DerivedTable) -> RunResult | None:
    """What a step of a run tagged `RESTATE_TAG` does instead of an ordinary run: a view that
    reads the tagged source restates the time its launched partitions span (a backfill of a
    range: one run from its first partition's start to its last one's end). None when the run
    is not tagged, or the view does not read the source itself: its ordinary run restates
    what the views it reads restated (`runtime/restate_next.py`)."""
    table = context.run.tags.get(RESTATE_TAG)
    if table is None:
        return None
    span = launched_span(context)
    if span is None:
        reads = {spec.changelog_table.name.lower() for spec in derived.inputs.values()}
        if table.lower() not in reads:
            return None
        msg = (
            f"cannot restate {derived.name!r}: the run is tagged {RESTATE_TAG}={table} but was "
            f"launched for no partition, so it names no range; launch a backfill of the "
            f"partitions whose rows of {table!r} were rewritten, or the {RESTATE_JOB!r} job "
            "with the range as config; nothing was written"
        )
        raise RunError(msg)
    start_ms, end_ms = span
    result = restate_view(derived.catalog, derived.name, table, start_ms=start_ms,
                          end_ms=end_ms)
    if result is not None and result.status is RunStatus.LEFT:
        context.log.info(f"{derived.name}: {result.message}")
        return None  # its ordinary run reads the rewrite as new changes
    return result
