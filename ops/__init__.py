"""The reference platform's jobs, schedules and sensors.

- `observe_sources`: record each source table's Delta version.
- `refresh_views`: run every derived table and view once (exactly once, incremental).
- `demo_feed`: append new orders and change a rate in the demo lake, so runs have work.

Schedules and the sensor are off by default; `CHRONOLAKE_AUTOMATION=on` turns them all on.
"""

from __future__ import annotations

import time
import warnings

from dagster import (
    AssetSelection,
    BetaWarning,
    ScheduleDefinition,
    SensorDefinition,
    define_asset_job,
    job,
    op,
)

from chronolake.dagster.assets import DERIVED_GROUP, SOURCES_GROUP, VIEWS_GROUP
from chronolake.dagster.automation import (
    default_schedule_status,
    delta_version_sensor,
    source_paths,
)
from chronolake.dagster.resources import LakeResource
from chronolake.demo.lake import feed_demo_lake

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


@op(description="Append 100 new orders and change one rate in the demo lake.")
def append_demo_commits(lake: LakeResource) -> dict[str, int]:
    return feed_demo_lake(lake.location, seed=int(time.time()))


@job(description="Feed the demo lake: new orders and a rate change, as a live system would.")
def demo_feed() -> None:
    append_demo_commits()


JOBS = [observe_sources, refresh_views, demo_feed]
SCHEDULES = [
    ScheduleDefinition(
        name="refresh_every_5_minutes", job=refresh_views, cron_schedule="*/5 * * * *",
        default_status=default_schedule_status(),
    ),
    ScheduleDefinition(
        name="feed_demo_every_minute", job=demo_feed, cron_schedule="* * * * *",
        default_status=default_schedule_status(),
    ),
]


def sensors(lake: LakeResource) -> list[SensorDefinition]:
    """The sensor that runs the views when `orders` or `rates` gets a new Delta version."""
    tables = source_paths(lake.location, ["orders", "rates"])
    return [delta_version_sensor(refresh_views, tables)]
