"""Shared fixtures: one local Spark session for the whole test run."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from chronolake.spark_session import local_spark_session


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    # CHRONOLAKE_BACKEND=delta-spark: the session loads Delta's pinned jars and extension.
    session = local_spark_session("chronolake-tests")
    yield session
    session.stop()
