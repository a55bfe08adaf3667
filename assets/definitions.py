"""What `dagster dev -w workspace.yaml` loads: the reference platform.

The DDL in `platform.sql` is registered in the lake's catalog when the code
location loads (no Spark needed), and each table and view becomes an asset.
"""

from __future__ import annotations

from pathlib import Path

from dagster import Definitions, in_process_executor

from chronolake import Catalog
from chronolake.dagster import chronolake_asset_checks, chronolake_assets
from ops import JOBS, SCHEDULES, sensors
from resources import LAKE_ROOT, RESOURCES

PLATFORM_DDL = Path(__file__).with_name("platform.sql")


def build_definitions() -> Definitions:
    """Register the platform DDL in the lake's catalog and expose every table as an asset."""
    Catalog(LAKE_ROOT).declare(PLATFORM_DDL.read_text())
    return Definitions(
        assets=chronolake_assets(LAKE_ROOT),
        asset_checks=chronolake_asset_checks(LAKE_ROOT),
        jobs=JOBS,
        schedules=SCHEDULES,
        sensors=sensors(RESOURCES["lake"]),
        resources=RESOURCES,
        executor=in_process_executor,  # a run's ops share its Spark session and DataFrames
    )


defs = build_definitions()
