"""Automation: run the derived tables when a source's Delta version moves, or on a schedule.

Everything is off by default; `CHRONOLAKE_AUTOMATION=on` turns every schedule and
sensor on at once (one toggle), as does switching each on in the Dagster UI.
"""

# No `from __future__ import annotations` here: Dagster reads the `context` annotation at
# definition time and refuses a string.

import json
import os
from collections.abc import Iterable, Sequence

from dagster import (
    DefaultScheduleStatus,
    DefaultSensorStatus,
    RunRequest,
    SensorDefinition,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    sensor,
)
from dagster._core.definitions.unresolved_asset_job_definition import (
    UnresolvedAssetJobDefinition,
)

from chronolake.dagster.declaring import served_specs
from chronolake.lake.layout import table_location
from chronolake.lake.tables import is_table, table_version
from chronolake.location import Location
from chronolake.schema import TableSpec, ViewSpec

AUTOMATION_ENV = "CHRONOLAKE_AUTOMATION"


def automation_on() -> bool:
    """The one toggle: `CHRONOLAKE_AUTOMATION=on` (or 1/true) starts schedules and sensors."""
    return os.environ.get(AUTOMATION_ENV, "").lower() in {"on", "1", "true", "yes"}


def default_schedule_status() -> DefaultScheduleStatus:
    return DefaultScheduleStatus.RUNNING if automation_on() else DefaultScheduleStatus.STOPPED


def default_sensor_status() -> DefaultSensorStatus:
    return DefaultSensorStatus.RUNNING if automation_on() else DefaultSensorStatus.STOPPED


def delta_version_sensor(
    jobs: Sequence[UnresolvedAssetJobDefinition], tables: dict[str, Location], *,
    name: str = "new_delta_versions",
    minimum_interval_seconds: int = 30,
) -> SensorDefinition:
    """A sensor that launches each of `jobs` when any of `tables` (name -> Delta path) has a
    new version (several jobs: assets of different partitions cannot share one).

    The cursor holds the versions already handed to a run, so each new commit
    launches one run per job (runs that find nothing new say so and change nothing).
    """

    @sensor(
        name=name, jobs=list(jobs), minimum_interval_seconds=minimum_interval_seconds,
        default_status=default_sensor_status(),
        description="Launch a run when a source table's Delta version moves.",
    )
    def _sensor(context: SensorEvaluationContext) -> SensorResult | SkipReason:
        seen: dict[str, int] = json.loads(context.cursor) if context.cursor else {}
        # One small log read per source table: metadata only.
        current = {table: table_version(path) for table, path in tables.items() if is_table(path)}
        moved = sorted(t for t, v in current.items() if v > seen.get(t, -1))
        if not moved:
            return SkipReason("no source table has a new Delta version")
        versions = ",".join(f"{t}@{current[t]}" for t in sorted(current))
        tags = {"chronolake/moved": ",".join(moved)}
        return SensorResult(
            run_requests=[RunRequest(run_key=f"{job.name}:{versions}", job_name=job.name,
                                     tags=tags) for job in jobs],
            cursor=json.dumps(current),
        )

    return _sensor


def source_paths(root: Location, names: Sequence[str],
                 specs: Iterable[TableSpec | ViewSpec] | None = None) -> dict[str, Location]:
    """Delta paths of the named source tables: of `specs`, or else of the lake's catalog."""
    tables = {spec.name: spec for spec in served_specs(root, specs)
              if isinstance(spec, TableSpec)}
    return {name: table_location(root, tables[name].options.path)
            for name in names if name in tables}
