"""Backend selection, and the delta-spark backend where Delta's JVM classes exist."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from deltatables import update_rows, write_commits
from pyspark.sql import SparkSession

from chronolake.errors import DefinitionError, SourceError
from chronolake.lake import (
    ARRIVAL_ORDER,
    DeltaRsBackend,
    DeltaSparkBackend,
    backend_for,
    delta_spark_available,
)

pytestmark = [pytest.mark.spark, pytest.mark.lake_contract]


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
        r"CHRONOLAKE_BACKEND=delta-spark.*--packages io\.delta:delta-spark_4\.2_2\.13:4\.4\.0.*"
        r"or use the 'delta-rs' backend",
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
        pytest.skip("Delta's JVM classes are not in this session: run with "
                    "CHRONOLAKE_BACKEND=delta-spark (./dev test runs it so)")
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


def test_the_backend_switch_is_read_from_the_environment(
    spark: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CHRONOLAKE_BACKEND", "delta-rs")
    assert backend_for(spark).kind == "delta-rs"
    monkeypatch.setenv("CHRONOLAKE_BACKEND", "delta_spark")
    with pytest.raises(DefinitionError, match=r"CHRONOLAKE_BACKEND is 'delta_spark'; expected "
                       r"one of auto, delta-rs, delta-spark"):
        backend_for(spark)
