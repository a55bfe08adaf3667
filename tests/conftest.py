"""Shared fixtures: one local Spark session for the whole test run, and an S3 emulator."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from _s3 import TEST_LAKE_ENV, moto_s3
from pyspark.sql import SparkSession

from chronolake.spark_session import local_spark_session


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    # CHRONOLAKE_BACKEND=delta-spark: the session loads Delta's pinned jars and extension;
    # CHRONOLAKE_TEST_LAKE on a bucket: S3A too.
    session = local_spark_session("chronolake-tests", lake=os.environ.get(TEST_LAKE_ENV))
    yield session
    session.stop()


@pytest.fixture(scope="module")
def s3() -> Iterator[str]:
    """An S3 emulator on loopback (moto's server, bucket `_s3.BUCKET`) for the module, and the
    environment that points obstore, delta-rs and Spark's S3A at it (what a user sets for a
    real bucket); yields its endpoint."""
    with moto_s3() as endpoint:
        yield endpoint
