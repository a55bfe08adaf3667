"""Exactly-once appends: Spark writes the files, delta-rs commits them with a transaction id."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable
from deltatables import require_features, table_rows
from pyspark.sql import SparkSession

from chronolake.errors import SourceError
from chronolake.lake import (
    ARRIVAL_ORDER,
    DeltaRsBackend,
    LakeBackend,
    table_row_count,
    table_version,
)

pytestmark = pytest.mark.spark

SCHEMA = "id BIGINT, day DATE, label STRING, at TIMESTAMP_NTZ"
DAY = dt.date(2024, 3, 1)
AT = dt.datetime(2024, 3, 1, 12, 30, 15, 123000)


@pytest.fixture(scope="module")
def backend(spark: SparkSession) -> LakeBackend:
    return DeltaRsBackend(spark)


def test_append_creates_the_table_and_a_retry_commits_nothing(
    spark: SparkSession, backend: LakeBackend, tmp_path: Path
) -> None:
    path = tmp_path / "out"
    df = spark.createDataFrame([(1, DAY, "a", AT), (2, None, "b", None)], SCHEMA)
    assert backend.append_dataframe(df, path, app_id="enrich", app_version=1, enable_cdf=True) == 1
    assert backend.append_dataframe(df, path, app_id="enrich", app_version=1) is None
    assert backend.append_dataframe(df, path, app_id="enrich", app_version=0) is None
    assert backend.latest_version(path) == 1
    assert backend.append_dataframe(df.limit(1), path, app_id="enrich", app_version=2) == 2
    assert DeltaTable(str(path)).transaction_version("enrich") == 2
    assert DeltaTable(str(path)).metadata().configuration["delta.enableChangeDataFeed"] == "true"
    rows = backend.changes(path, 0).orderBy(*ARRIVAL_ORDER).collect()
    assert [(r.id, r.day, r.label, r.at, r._row_kind, r._commit_version) for r in rows] == [
        (1, DAY, "a", AT, "+I", 1),
        (2, None, "b", None, "+I", 1),
        (1, DAY, "a", AT, "+I", 2),
    ]


def test_a_table_feature_chronolake_cannot_write_is_refused_by_name_with_nothing_written(
    spark: SparkSession, backend: LakeBackend, tmp_path: Path
) -> None:
    path = tmp_path / "tracked"
    df = spark.createDataFrame([(1, DAY, "a", AT)], SCHEMA)
    backend.append_dataframe(df, path, app_id="enrich", app_version=1)
    require_features(path, {"minReaderVersion": 3, "minWriterVersion": 7,
                            "readerFeatures": ["timestampNtz"],
                            "writerFeatures": ["rowTracking", "domainMetadata", "timestampNtz"]},
                     {"delta.enableRowTracking": "true"})
    before = sorted(p.name for p in path.rglob("*"))
    with pytest.raises(SourceError, match=r"feature\(s\) 'domainMetadata', 'rowTracking'.*"
                       "cannot write; nothing was read or written"):
        backend.append_dataframe(df, path, app_id="enrich", app_version=2)
    assert sorted(p.name for p in path.rglob("*")) == before


def test_partitioned_append_is_readable_by_delta_rs_too(
    spark: SparkSession, backend: LakeBackend, tmp_path: Path
) -> None:
    path = tmp_path / "parts"
    df = spark.createDataFrame([(1, DAY, "a b/%", AT), (2, None, "c", AT)], SCHEMA)
    backend.append_dataframe(df, path, app_id="p", app_version=1, partition_by=["day", "label"])
    assert DeltaTable(str(path)).metadata().partition_columns == ["day", "label"]
    read_by_spark = sorted(map(tuple, backend.snapshot(path).collect()), key=lambda r: r[0])
    assert read_by_spark == [(1, DAY, "a b/%", AT), (2, None, "c", AT)]
    read_by_delta_rs = pa.table(table_rows(str(path))).sort_by("id")
    assert read_by_delta_rs.column("label").to_pylist() == ["a b/%", "c"]
    assert read_by_delta_rs.column("day").to_pylist() == [DAY, None]


def test_append_of_an_empty_frame_records_the_transaction(
    spark: SparkSession, backend: LakeBackend, tmp_path: Path
) -> None:
    path = tmp_path / "empty"
    empty = spark.createDataFrame([], SCHEMA)
    assert backend.append_dataframe(empty, path, app_id="e", app_version=5) == 1
    assert DeltaTable(str(path)).transaction_version("e") == 5
    assert backend.snapshot(path).count() == 0


def test_append_with_other_columns_is_refused(
    spark: SparkSession, backend: LakeBackend, tmp_path: Path
) -> None:
    path = tmp_path / "out"
    backend.append_dataframe(
        spark.createDataFrame([(1, DAY, "a", AT)], SCHEMA), path, app_id="a", app_version=1
    )
    other = spark.createDataFrame([(1,)], "key BIGINT")
    with pytest.raises(SourceError, match=r"cannot append columns \['key'\] to a table with "
                                          r"columns \['id', 'day', 'label', 'at'\]"):
        backend.append_dataframe(other, path, app_id="a", app_version=2)
    assert not list(path.glob(".chronolake-staging-*"))


def test_overwrite_replaces_rows_and_schema(
    spark: SparkSession, backend: LakeBackend, tmp_path: Path
) -> None:
    path = tmp_path / "enriched"
    first = spark.createDataFrame([(1, DAY, "a", AT), (2, DAY, "b", AT)], SCHEMA)
    assert backend.overwrite_dataframe(first, path) == 1
    assert (table_version(path), table_row_count(path)) == (1, 2)
    second = spark.createDataFrame([("x", 1.5)], "name STRING, score DOUBLE")
    assert backend.overwrite_dataframe(second, path) == 2
    assert (table_version(path), table_row_count(path)) == (2, 1)
    replaced = backend.snapshot(path)
    assert replaced.columns == ["name", "score"]
    assert [tuple(r) for r in replaced.collect()] == [("x", 1.5)]


def test_table_facts_of_a_missing_table(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="nowhere: not a Delta table"):
        table_version(tmp_path / "nowhere")
