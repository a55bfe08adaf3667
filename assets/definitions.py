"""What `dagster dev -w workspace.yaml` loads: the reference platform.

The assets are drawn from `platform.sql`, parsed in memory: loading the code location reads
and writes nothing in the lake, so a deployment that may only read it still loads. The job
`declare_platform` declares the same DDL in the lake's catalog (`chronolake demo` runs it as
part of its set-up); a view's run stops, saying so, until it has.
"""

from __future__ import annotations

from pathlib import Path

from dagster import Definitions, in_process_executor

from chronolake.dagster import (
    chronolake_asset_checks,
    chronolake_assets,
    declare_job,
    script_specs,
)
from chronolake.dagster.partitions import reconcile_sensor
from ops import JOBS, SCHEDULES, freshness_checking, sensors
from ops.demo_feed import DEMO_JOBS, DEMO_SCHEDULES
from resources import LAKE_ROOT, RESOURCES

PLATFORM_DDL = Path(__file__).with_name("platform.sql").read_text()
PLATFORM_SPECS = script_specs(PLATFORM_DDL)
FRESHNESS_JOBS, FRESHNESS_SCHEDULES = freshness_checking(PLATFORM_SPECS)

defs = Definitions(
    assets=chronolake_assets(LAKE_ROOT, PLATFORM_SPECS),
    asset_checks=chronolake_asset_checks(LAKE_ROOT, PLATFORM_SPECS),
    jobs=[declare_job(PLATFORM_DDL), *JOBS, *FRESHNESS_JOBS, *DEMO_JOBS],
    schedules=[*SCHEDULES, *FRESHNESS_SCHEDULES, *DEMO_SCHEDULES],
    # the lake is the truth: partitions completed by runs outside Dagster are recorded too
    sensors=[*sensors(LAKE_ROOT, PLATFORM_SPECS), reconcile_sensor(LAKE_ROOT, PLATFORM_SPECS)],
    resources=RESOURCES,
    executor=in_process_executor,  # a run's ops share its Spark session and DataFrames
)
