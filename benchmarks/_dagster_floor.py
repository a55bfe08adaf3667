"""The floor under a Dagster run: the reference platform's Spark resource and one trivial job.

`run_overhead.py` materializes it beside the real run, so that the report separates what
Dagster and a Spark start cost any Spark-backed asset from what chronolake's operators add.
"""

from dagster import AssetExecutionContext, Definitions, asset, in_process_executor
from dagster_pyspark import PySparkResource

from resources import RESOURCES


@asset
def one_spark_job(context: AssetExecutionContext, pyspark: PySparkResource) -> None:
    """Start the run's Spark session and count one row: the least a Spark asset does."""
    rows = pyspark.spark_session.range(1).count()
    context.log.info(f"counted {rows} row")


defs = Definitions(
    assets=[one_spark_job],
    resources={"pyspark": RESOURCES["pyspark"]},
    executor=in_process_executor,
)
