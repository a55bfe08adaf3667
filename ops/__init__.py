"""The reference platform's jobs, schedules and sensors.

- `observe_sources`: record each source table's Delta version.
- `refresh_views`: run every derived table and view once (exactly once, incremental).
- `check_freshness`: evaluate the `watermark_freshness` checks only (no run), every 5 minutes
  by `check_freshness_every_5_minutes`.

The demo's feeder, which writes into the sources as a live system would, is apart
(`ops.demo_feed`).

Schedules and the sensor are off by default; `CHRONOLAKE_AUTOMATION=on` turns them all on.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable

from dagster import (
    AssetSelection,
    BetaWarning,
    ScheduleDefinition,
    SensorDefinition,
    define_asset_job,
)
from dagster._core.definitions.unresolved_asset_job_definition import (
    UnresolvedAssetJobDefinition,
)

from chronolake.dagster.assets import DERIVED_GROUP, SOURCES_GROUP, VIEWS_GROUP
from chronolake.dagster.automation import (
    default_schedule_status,
    delta_version_sensor,
    source_paths,
)
from chronolake.dagster.freshness import freshness_check_keys
from chronolake.location import Location
from chronolake.schema import TableSpec, ViewSpec

# Sources are observable source assets, which only `include_sources` (beta) selects by group.
with warnings.catch_warnings(action="ignore", category=BetaWarning):
    _sources = AssetSelection.groups(SOURCES_GROUP, include_sources=True)
observe_sources = define_asset_job(
    "observe_sources",
    selection=_sources,
    description="Record each source table's Delta version (its data version).",
)
refresh_views = define_asset_job(
    "refresh_views",
    selection=AssetSelection.groups(VIEWS_GROUP, DERIVED_GROUP),
    description="Run every derived table and view once: new commits in, exactly once out.",
)


JOBS = [observe_sources, refresh_views]
SCHEDULES = [
    ScheduleDefinition(
        name="refresh_every_5_minutes", job=refresh_views, cron_schedule="*/5 * * * *",
        default_status=default_schedule_status(),
    ),
]


def sensors(lake_root: Location, specs: Iterable[TableSpec | ViewSpec] | None = None
             ) -> list[SensorDefinition]:
    """The sensor that runs the views when `orders` or `rates` gets a new Delta version (their
    paths from `specs`, or else from the lake's catalog)."""
    tables = source_paths(lake_root, ["orders", "rates"], specs)
    return [delta_version_sensor(refresh_views, tables)]


def freshness_checking(specs: Iterable[TableSpec | ViewSpec]
                       ) -> tuple[list[UnresolvedAssetJobDefinition], list[ScheduleDefinition]]:
    """`check_freshness`, which evaluates the event-time freshness checks of `specs` and runs
    nothing else, and its schedule every 5 minutes (none when no spec declares freshness)."""
    keys = freshness_check_keys(specs)
    if not keys:
        return [], []
    job = define_asset_job(
        "check_freshness", selection=AssetSelection.checks(*keys),
        description="Check how far each watermark trails now, and which partitions are past "
        "their deadline (`freshness.*` options); materializes nothing.",
    )
    schedule = ScheduleDefinition(
        name="check_freshness_every_5_minutes", job=job, cron_schedule="*/5 * * * *",
        default_status=default_schedule_status(),
    )
    return [job], [schedule]
