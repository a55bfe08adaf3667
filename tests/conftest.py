"""Shared fixtures (one local Spark session for the whole test run, an S3 emulator) and the
two tiers.

The fast tier is what `pytest` runs by default: declaring, planning, SQL, specs and the
storage layer, in a few minutes. Everything that starts Spark (the `spark` fixture, which
marks its tests here) or another process's JVM (marked `slow` by hand) is the slow tier,
which `--slow` adds; `./dev test` runs both, as CI does.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from _crash import register_summary
from _s3 import TEST_LAKE_ENV, moto_s3
from pyspark.sql import SparkSession

from chronolake.spark.session import local_spark_session

SLOW_TIER_FIXTURES = frozenset({"spark"})
"""Fixtures whose tests start Spark, and so belong to the slow tier."""


def pytest_configure(config: pytest.Config) -> None:
    register_summary(config)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--slow", action="store_true",
                     help="also run the slow tier: every test that starts Spark or a JVM")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the tests that use a slow-tier fixture; leave the slow tier out unless asked."""
    for item in items:
        if SLOW_TIER_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.spark)
            item.add_marker(pytest.mark.slow)
    if config.getoption("--slow"):
        return
    slow = [item for item in items if item.get_closest_marker("slow")]
    if slow:
        config.hook.pytest_deselected(items=slow)
        items[:] = [item for item in items if not item.get_closest_marker("slow")]


def pytest_report_header(config: pytest.Config) -> str:
    if config.getoption("--slow"):
        return "tiers: fast and slow"
    return "tiers: fast only (--slow, or ./dev test, adds every test that starts Spark or a JVM)"


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
