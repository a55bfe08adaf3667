"""The reference platform's jobs, schedules and sensors.

- `observe_sources`: record each source table's Delta version.
- `refresh_views`: run every derived table and view once (exactly once, incremental).

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

from chronolake.dagster.assets import DERIVED_GROUP, SOURCES_GROUP, VIEWS_GROUP
from chronolake.dagster.automation import (
    default_schedule_status,
    delta_version_sensor,
    source_paths,
)
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
