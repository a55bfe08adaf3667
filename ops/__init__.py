"""The reference platform's jobs, schedules and sensors.

- `observe_sources`: record each source table's Delta version.
- `refresh_views`: run every derived table and view once (exactly once, incremental), but
  those with time partitions: Dagster runs assets of different partitions in different jobs.
- `refresh_daily_views` (one job per partitions declared in `platform.sql`, named by their
  schedule): the same for the time partitioned views; a run brings them up to date, whatever
  partitions it was launched for.
- The daily report (`assets.daily_report`) has no job: the automation condition requests each
  day once it is complete (the sensor `completeness_automation`).
- `check_freshness`: evaluate the `watermark_freshness` checks only (no run), every 5 minutes
  by `check_freshness_every_5_minutes`.

The demo's feeder, which writes into the sources as a live system would, is apart
(`ops.demo_feed`).

Schedules and sensors are off by default; `CHRONOLAKE_AUTOMATION=on` turns them all on.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable

from dagster import (
    AssetSelection,
    AutomationConditionSensorDefinition,
    BetaWarning,
    ScheduleDefinition,
    SensorDefinition,
    define_asset_job,
)
from dagster._core.definitions.unresolved_asset_job_definition import (
    UnresolvedAssetJobDefinition,
)

from assets import PLATFORM_SPECS
from chronolake.dagster.assets import DERIVED_GROUP, SOURCES_GROUP, VIEWS_GROUP
from chronolake.dagster.automation import (
    default_schedule_status,
    default_sensor_status,
    delta_version_sensor,
    source_paths,
)
from chronolake.dagster.declaring import served_specs
from chronolake.dagster.freshness import freshness_check_keys
from chronolake.dagster.partitions import reconcile_sensor
from chronolake.location import Location
from chronolake.schema import TableSpec, ViewSpec
from chronolake.schema.time_options import TimePartitions

# Sources are observable source assets, which only `include_sources` (beta) selects by group.
with warnings.catch_warnings(action="ignore", category=BetaWarning):
    _sources = AssetSelection.groups(SOURCES_GROUP, include_sources=True)
observe_sources = define_asset_job(
    "observe_sources",
    selection=_sources,
    description="Record each source table's Delta version (its data version).",
)


def _named(names: Iterable[str]) -> AssetSelection:
    """The assets named, those of them the code location has (a lake whose catalog lacks one
    still loads the jobs)."""
    return AssetSelection.from_string(" or ".join(f'key:"{name}"' for name in names) or "none")


def _partitioned_views() -> dict[TimePartitions, list[str]]:
    """The platform's time partitioned views (`platform.sql`), by their partitions."""
    views: dict[TimePartitions, list[str]] = {}
    for spec in PLATFORM_SPECS:
        if isinstance(spec, ViewSpec) and spec.time.partitions is not None:
            views.setdefault(spec.time.partitions, []).append(spec.name)
    return views


def _refresh_partitioned_views() -> dict[str, list[str]]:
    """A job name per partitions of the platform's views (`refresh_daily_views`, ...), with
    the views it runs."""
    jobs: dict[str, list[str]] = {}
    for number, (partitions, names) in enumerate(_partitioned_views().items()):
        name = f"refresh_{partitions.schedule}_views"
        if not name.isidentifier() or name in jobs:
            name = f"refresh_partitioned_views_{number}"  # a cron schedule, or a second start
        jobs[name] = names
    return jobs


_PARTITIONED = _refresh_partitioned_views()
refresh_views = define_asset_job(
    "refresh_views",
    selection=AssetSelection.groups(VIEWS_GROUP, DERIVED_GROUP)
    - _named(name for names in _PARTITIONED.values() for name in names),
    description="Run every derived table and view without time partitions once: new commits "
    "in, exactly once out.",
)
_REFRESH_PARTITIONED = [
    (define_asset_job(
        job, selection=_named(names),
        description=f"Run {', '.join(names)} once, bringing it up to date: a partition is "
        "recorded as materialized once the watermark has passed its end.",
    ), names)
    for job, names in _PARTITIONED.items()
]
REFRESH_JOBS = [refresh_views, *(job for job, _ in _REFRESH_PARTITIONED)]
"""Together, they run every derived table and view (Dagster runs assets of different
partitions in different jobs)."""

JOBS = [observe_sources, *REFRESH_JOBS]
SCHEDULES = [
    ScheduleDefinition(
        name="refresh_every_5_minutes" if job is refresh_views
        else f"{job.name}_every_5_minutes",
        job=job, cron_schedule="*/5 * * * *", default_status=default_schedule_status(),
    )
    for job in REFRESH_JOBS
]


def sensors(lake_root: Location, specs: Iterable[TableSpec | ViewSpec] | None = None
             ) -> list[SensorDefinition]:
    """The sensor that runs the views when `orders` or `rates` gets a new Delta version (their
    paths from `specs`, or else from the lake's catalog), and the one that evaluates the
    automation conditions (the daily report's `on_complete_partitions()`)."""
    served = served_specs(lake_root, specs)
    names = {spec.name for spec in served}
    jobs = [refresh_views, *(job for job, views in _REFRESH_PARTITIONED
                             if names.intersection(views))]
    tables = source_paths(lake_root, ["orders", "rates"], served)
    return [
        delta_version_sensor(jobs, tables),
        reconcile_sensor(lake_root, served),
        AutomationConditionSensorDefinition(
            "completeness_automation", target=AssetSelection.all(),
            default_status=default_sensor_status(),
            description="Request what automation conditions ask for: each day of the daily "
            "report once the day of orders_per_currency is complete.",
        ),
    ]


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
