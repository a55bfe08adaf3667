"""Pick the lake backend for a Spark session."""

from __future__ import annotations

from typing import Literal

from pyspark.sql import SparkSession

from chronolake.lake.backend import LakeBackend
from chronolake.lake.delta_rs import DeltaRsBackend
from chronolake.lake.delta_spark import DeltaSparkBackend, delta_spark_available

BackendChoice = Literal["auto", "delta-rs", "delta-spark"]


def backend_for(spark: SparkSession, kind: BackendChoice = "auto") -> LakeBackend:
    """The backend `kind` names; `auto` takes delta-spark when the session has Delta's
    JVM classes (a cluster, Databricks, `--packages`), else the embedded delta-rs.

    Example:
        >>> backend_for(spark).latest_version("/lake/rates")
    """
    if kind == "delta-spark" or (kind == "auto" and delta_spark_available(spark)):
        return DeltaSparkBackend(spark)
    return DeltaRsBackend(spark)
