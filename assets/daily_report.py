"""A plain Dagster asset downstream of a chronolake view: a report per day, once the day is
complete.

`orders_per_currency_daily_report` has the daily partitions `orders_per_currency` declares
(`platform.sql`), drawn from its spec so they stay equal. A partition of the view is recorded
as materialized once the watermark has passed the day's end, and again when a later run
changes it; `on_complete_partitions()` then requests the report's partition for that day,
older days included. Each run writes the day's orders and total amount per currency as one
small Parquet file under `reports/` in the lake.
"""

# No `from __future__ import annotations` here: Dagster reads the `context` annotation at
# definition time and refuses a string.

from dagster import (
    AssetExecutionContext,
    AssetKey,
    AssetsDefinition,
    MaterializeResult,
    MetadataValue,
    asset,
)
from dagster_pyspark import PySparkResource
from pyspark.sql import functions as F

from chronolake.dagster import LakeResource, on_complete_partitions
from chronolake.dagster.partitions import asset_partitions
from chronolake.errors import DefinitionError
from chronolake.location import Location
from chronolake.schema import ViewSpec

REPORTS_FOLDER = "reports"
"""Where the reports go, under the lake root."""
REPORTS_GROUP = "reports"


def report_location(lake_root: Location, view: str, day: str) -> Location:
    """The folder holding one day's report of `view` (one Parquet file)."""
    return lake_root / f"{REPORTS_FOLDER}/{view}/{day}"


def daily_report(spec: ViewSpec) -> AssetsDefinition:
    """The daily report of a window aggregate with `orders` and `total_amount` per `currency`
    (`orders_per_currency`), partitioned as `spec` declares."""
    partitions = spec.time.partitions
    if partitions is None or partitions.column is None:
        msg = (f"view {spec.name!r} declares no time partitions; a daily report of it needs "
               "'partition.time.schedule' = 'daily' and 'partition.time.start' in its WITH")
        raise DefinitionError(msg)
    column = partitions.column

    @asset(
        name=f"{spec.name}_daily_report",
        group_name=REPORTS_GROUP,
        deps=[AssetKey(spec.name)],
        partitions_def=asset_partitions(spec),
        automation_condition=on_complete_partitions(),
        kinds={"spark", "parquet"},
        description=f"Orders and total amount per currency per day, from `{spec.name}`: "
        "one Parquet file per day, written once the day is complete.",
    )
    def _report(
        context: AssetExecutionContext, pyspark: PySparkResource, lake: LakeResource
    ) -> MaterializeResult:
        day = context.partition_time_window
        rows = lake.catalog(pyspark.spark_session, serving=spec.name).table(spec.name)
        in_day = (F.col(column) >= F.lit(day.start)) & (F.col(column) < F.lit(day.end))
        per_currency = (
            rows.where(in_day)
            .groupBy("currency")
            .agg(F.sum("orders").alias("orders"), F.sum("total_amount").alias("total_amount"))
            .orderBy("currency")
        )
        target = report_location(lake.location, spec.name, context.partition_key)
        per_currency.coalesce(1).write.mode("overwrite").parquet(str(target))
        written = pyspark.spark_session.read.parquet(str(target)).count()  # a file's footer
        return MaterializeResult(metadata={
            "path": MetadataValue.path(target.uri),
            "dagster/row_count": written,
        })

    return _report
