"""Pick the lake backend for a Spark session."""

from __future__ import annotations

from pyspark.sql import SparkSession

from chronolake.lake.backend import LakeBackend
from chronolake.lake.delta_rs import DeltaRsBackend
from chronolake.lake.delta_spark import DeltaSparkBackend, delta_spark_available
from chronolake.spark.stack import BackendChoice, chosen_backend


def backend_for(spark: SparkSession, kind: BackendChoice | None = None) -> LakeBackend:
    """The backend `kind` names (None: `CHRONOLAKE_BACKEND`, else `auto`); `auto` takes
    delta-spark when the session has Delta's extension (a cluster, Databricks, a session
    chronolake started with `CHRONOLAKE_BACKEND=delta-spark`), else the embedded delta-rs.

    Example:
        >>> backend_for(spark).latest_version("/lake/rates")
    """
    kind = chosen_backend(kind)
    if kind == "delta-spark" or (kind == "auto" and delta_spark_available(spark)):
        return DeltaSparkBackend(spark)
    return DeltaRsBackend(spark)
