"""Backend selection, and the delta-spark backend where Delta's JVM classes exist."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from deltatables import update_rows, write_commits
from pyspark.sql import SparkSession

from chronolake.errors import SourceError
from chronolake.lake import (
    ARRIVAL_ORDER,
    DeltaRsBackend,
    DeltaSparkBackend,
    backend_for,
    delta_spark_available,
)

pytestmark = pytest.mark.spark


def test_auto_picks_delta_rs_without_delta_jvm_classes(spark: SparkSession) -> None:
    if delta_spark_available(spark):
        pytest.skip("this session has delta-spark's JVM classes, so auto picks delta-spark")
    assert isinstance(backend_for(spark), DeltaRsBackend)
    assert backend_for(spark, "delta-rs").kind == "delta-rs"


def test_delta_spark_without_its_classes_says_how_to_get_them(spark: SparkSession) -> None:
    if delta_spark_available(spark):
        pytest.skip("this session has delta-spark's JVM classes")
    with pytest.raises(
        SourceError,
        match=r"needs io\.delta\.sql\.DeltaSparkSessionExtension on the Spark classpath.*"
        r"--packages io\.delta:delta-spark_2\.13.*or use the 'delta-rs' backend",
    ):
        backend_for(spark, "delta-spark")


def test_a_table_created_anew_at_the_same_path_has_another_id(
    spark: SparkSession, tmp_path: Path
) -> None:
    """What tells a recreated table's version 0 from the old one's (the key check's answer)."""
    backend, path = backend_for(spark), tmp_path / "rates"
    write_commits(path, [[{"currency": "EUR", "rate": 1.0}]])
    first = backend.table_id(path)
    assert backend.table_id(path) == first
    shutil.rmtree(path)
    write_commits(path, [[{"currency": "EUR", "rate": 1.0}]])
    assert backend.latest_version(path) == 0 and backend.table_id(path) != first


def test_delta_spark_backend_reads_like_delta_rs(spark: SparkSession, tmp_path: Path) -> None:
    if not delta_spark_available(spark):
        pytest.skip(
            "delta-spark's JVM classes (io.delta.sql.DeltaSparkSessionExtension) are not on "
            "the Spark classpath; they come from Maven, which this machine cannot reach"
        )
    path = tmp_path / "rates"
    write_commits(path, [[{"currency": "EUR", "rate": 1.0}]])
    update_rows(path, "currency = 'EUR'", {"rate": "2.0"})
    jvm, embedded = DeltaSparkBackend(spark), DeltaRsBackend(spark)
    assert jvm.latest_version(path) == embedded.latest_version(path) == 1
    assert jvm.table_id(path) == embedded.table_id(path)
    assert jvm.commits(path, 0) == embedded.commits(path, 0)
    assert (
        jvm.changes(path, 0).orderBy(*ARRIVAL_ORDER).collect()
        == embedded.changes(path, 0).orderBy(*ARRIVAL_ORDER).collect()
    )
    assert sorted(jvm.snapshot(path, 0).collect()) == sorted(embedded.snapshot(path, 0).collect())
    out = tmp_path / "out"
    df = spark.createDataFrame([(1, "a")], "id BIGINT, label STRING")
    assert jvm.append_dataframe(df, out, app_id="run", app_version=1) is not None
    assert jvm.append_dataframe(df, out, app_id="run", app_version=1) is None
    assert jvm.snapshot(out).count() == 1
