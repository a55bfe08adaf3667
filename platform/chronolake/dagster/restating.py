"""Restatement as a Dagster job: the range as config, each restated view recorded.

`chronolake restate` from the launchpad (docs/design.md, "Restatement"): after a source's
rows of a time range were rewritten, the job restates the views that read it and records
each one as materialized with its figures. A partitioned view is recorded per time
partition the restatement changed, with its changes by row kind, as its commit stamped
them, so the partitioned assets downstream of it go stale and run again.
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
from chronolake.dagster.partitions import committed_stamps, partition_materializations
from chronolake.dagster.resources import LakeResource
from chronolake.lake.layout import output_path
from chronolake.runtime.restate_plan import run_restatement
from chronolake.runtime.result import RunStatus
from chronolake.watermarks.millis import utc_millis

RESTATE_JOB = "restate"


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
