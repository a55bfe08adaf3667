"""The reference platform with its temporal join partitioned by the hour, as Dagster assets."""

from __future__ import annotations

import re
from pathlib import Path

from dagster import Definitions, in_process_executor

from chronolake.dagster import LakeResource, chronolake_assets, local_pyspark_resource

ROOT = Path(__file__).resolve().parent.parent
HOURLY = "'partition.time.schedule' = 'hourly', 'partition.time.start' = '2026-11-02'"


def hourly_platform() -> str:
    """The reference platform's sources, its temporal join, partitioned by the hour, and the
    window aggregate over the join (unpartitioned)."""
    ddl = (ROOT / "assets" / "platform.sql").read_text()
    head = ddl[: ddl.index("CREATE TABLE rates_hybrid")]
    join = ddl[ddl.index("CREATE VIEW orders_enriched"):ddl.index("-- Each order with the latest")]
    return (head + with_options(join, "orders_enriched", HOURLY)
            + ddl[ddl.index("-- The second hop"):])


def with_options(statement: str, view: str, options: str) -> str:
    """`CREATE VIEW view ... AS` with exactly `options` as its WITH options."""
    return re.sub(rf"CREATE VIEW {view}\b.*?\bAS\n", f"CREATE VIEW {view} WITH ({options}) AS\n",
                  statement, count=1, flags=re.S)


def lake_definitions(lake: Path) -> Definitions:
    """The lake's assets, run in one process (their steps hand Spark frames over)."""
    return Definitions(
        assets=chronolake_assets(lake), executor=in_process_executor,
        resources={"lake": LakeResource(root=str(lake)), "pyspark": local_pyspark_resource()},
    )
