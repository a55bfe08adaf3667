"""What `dagster dev -w workspace.yaml` loads: the reference platform.

The assets are drawn from `platform.sql`, parsed in memory: loading the code location reads
and writes nothing in the lake, so a deployment that may only read it still loads. The job
`declare_platform` declares the same DDL in the lake's catalog (`chronolake demo` runs it as
part of its set-up); a view's run stops, saying so, until it has. The daily report
(`assets.daily_report`) is a plain asset downstream of `orders_per_currency`, run by automation
for each day that is complete. The job `restate` restates a range of a source after it was
rewritten (`chronolake.dagster.restating`).
"""

from __future__ import annotations

from dagster import Definitions, in_process_executor

from assets import PLATFORM_DDL, PLATFORM_SPECS
from assets.daily_report import daily_report
from chronolake.dagster import (
    chronolake_asset_checks,
    chronolake_assets,
    declare_job,
    restate_job,
)
from chronolake.schema import ViewSpec
from ops import JOBS, SCHEDULES, freshness_checking, sensors
from ops.demo_feed import DEMO_JOBS, DEMO_SCHEDULES
from resources import LAKE_ROOT, RESOURCES

[ORDERS_PER_CURRENCY] = [spec for spec in PLATFORM_SPECS
                         if isinstance(spec, ViewSpec) and spec.name == "orders_per_currency"]
FRESHNESS_JOBS, FRESHNESS_SCHEDULES = freshness_checking(PLATFORM_SPECS)

defs = Definitions(
    assets=[*chronolake_assets(LAKE_ROOT, PLATFORM_SPECS), daily_report(ORDERS_PER_CURRENCY)],
    asset_checks=chronolake_asset_checks(LAKE_ROOT, PLATFORM_SPECS),
    jobs=[declare_job(PLATFORM_DDL), restate_job(), *JOBS, *FRESHNESS_JOBS, *DEMO_JOBS],
    schedules=[*SCHEDULES, *FRESHNESS_SCHEDULES, *DEMO_SCHEDULES],
    # the lake is the truth: partitions completed by runs outside Dagster are recorded too
    sensors=sensors(LAKE_ROOT, PLATFORM_SPECS),
    resources=RESOURCES,
    executor=in_process_executor,  # a run's ops share its Spark session and DataFrames
)
