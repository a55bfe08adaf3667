"""A restatement of an hour reads and rewrites the files of that hour, not the table's.

A table written in time order keeps each day in its own files; a read or an upsert given a
span of a stored timestamp column (`FileSpan`) lists only the files whose logged min and
max overlap it, on either backend, and returns what the whole table would in the span.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from chronolake.lake import DeltaRsBackend, DeltaSparkBackend, LakeBackend, delta_spark_available
from chronolake.lake.changelog import COMMIT_VERSION, POSITION, ROW_KIND
from chronolake.lake.file_span import FileSpan

pytestmark = [pytest.mark.spark, pytest.mark.lake_contract]

DAYS = 3
ROWS_PER_DAY = 40
DAY_MS = 86_400_000
FIRST_DAY_MS = int(datetime(2026, 11, 2, tzinfo=UTC).timestamp() * 1000)


@pytest.fixture(params=["delta-rs", "delta-spark"])
def backend(request: pytest.FixtureRequest, spark: SparkSession) -> LakeBackend:
    if request.param == "delta-spark":
        if not delta_spark_available(spark):
            pytest.skip("Delta's JVM classes are not in this session: run with "
                        "CHRONOLAKE_BACKEND=delta-spark (./dev test runs it so)")
        return DeltaSparkBackend(spark)
    return DeltaRsBackend(spark)


def _day(spark: SparkSession, day: int, timestamp_type: str) -> DataFrame:
    """One day of rows, an event every half hour, in two files."""
    ids = spark.range(day * ROWS_PER_DAY, (day + 1) * ROWS_PER_DAY, numPartitions=2)
    millis = F.lit(FIRST_DAY_MS + day * DAY_MS) + (F.col("id") % ROWS_PER_DAY) * 1_800_000
    return ids.select(F.col("id"), F.timestamp_millis(millis).cast(timestamp_type).alias("ts"),
                      F.lit(1).cast("bigint").alias("value"))


def _table(spark: SparkSession, backend: LakeBackend, path: Path, timestamp_type: str) -> None:
    for day in range(DAYS):
        backend.append_dataframe(_day(spark, day, timestamp_type), path, app_id="days",
                                 app_version=day, enable_cdf=True)


def _second_day(column: str = "ts") -> FileSpan:
    return FileSpan(column, FIRST_DAY_MS + DAY_MS, FIRST_DAY_MS + 2 * DAY_MS)


def _in_span(frame: DataFrame, span: FileSpan) -> DataFrame:
    condition = span.predicate(frame.schema)
    assert condition is not None
    return frame.where(condition)


def _file_names(frame: DataFrame) -> set[str]:
    return {uri.rsplit("/", 1)[-1] for uri in frame.inputFiles()}


@pytest.mark.parametrize("timestamp_type", ["timestamp", "timestamp_ntz"])
def test_a_span_reads_only_the_files_that_may_hold_it(
    spark: SparkSession, backend: LakeBackend, tmp_path: Path, timestamp_type: str
) -> None:
    path = tmp_path / "orders"
    _table(spark, backend, path, timestamp_type)
    span = _second_day()
    whole, pruned = backend.snapshot(path), backend.snapshot(path, span=span)
    assert len(_file_names(pruned)) == 2 < len(_file_names(whole))
    assert sorted(_in_span(pruned, span).collect()) == sorted(_in_span(whole, span).collect())
    assert _in_span(whole, span).count() == ROWS_PER_DAY  # 40 rows: the span's day

    # arrival positions are the whole table's: a restated row keeps its place in time
    version = backend.latest_version(path)
    whole_arrivals = backend.arrival_snapshot(path, version)
    pruned_arrivals = backend.arrival_snapshot(path, version, span=span)
    assert len(_file_names(pruned_arrivals)) == 2
    assert (sorted(_in_span(pruned_arrivals, span).select("id", POSITION).collect())
            == sorted(_in_span(whole_arrivals, span).select("id", POSITION).collect()))


def test_a_span_that_holds_no_stored_column_skips_nothing(
    spark: SparkSession, backend: LakeBackend, tmp_path: Path
) -> None:
    path = tmp_path / "orders"
    _table(spark, backend, path, "timestamp")
    whole = backend.snapshot(path)
    for span in (_second_day("no_such_column"), _second_day("value")):  # missing; not a time
        assert sorted(backend.snapshot(path, span=span).collect()) == sorted(whole.collect())


def test_an_upsert_in_a_span_leaves_the_other_days_files_untouched(
    spark: SparkSession, backend: LakeBackend, tmp_path: Path
) -> None:
    path = tmp_path / "windows"
    _table(spark, backend, path, "timestamp")
    second_day = backend.snapshot(path, span=_second_day())
    outside = _file_names(backend.snapshot(path)) - _file_names(second_day)
    assert len(outside) == 4  # the other days' files
    second_day = second_day.select("id", "ts").orderBy("id")
    [first, second] = second_day.limit(2).collect()
    changes = spark.createDataFrame(
        [(first["id"], first["ts"], 1, "-U", 0), (first["id"], first["ts"], 5, "+U", 1),
         (second["id"], second["ts"], 1, "-D", 2)],
        f"id BIGINT, ts TIMESTAMP, value BIGINT, {ROW_KIND} STRING, {POSITION} BIGINT",
    ).withColumn(COMMIT_VERSION, F.lit(9).cast("bigint"))
    version = backend.commit_changes(changes, path, key=["id"], retracting=True,
                                     app_id="restate", app_version=1, span=_second_day())
    assert version is not None
    after = backend.snapshot(path)
    assert after.count() == DAYS * ROWS_PER_DAY - 1  # the deleted row only
    assert after.where(F.col("id") == first["id"]).first()["value"] == 5  # type: ignore[index]
    assert outside <= _file_names(after)
    log = Path(path) / "_delta_log" / f"{version:020d}.json"
    removed = [json.loads(line)["remove"]["path"] for line in log.read_text().splitlines()
               if "remove" in json.loads(line)]
    assert removed and not {name.rsplit("/", 1)[-1] for name in removed} & outside


@pytest.mark.parametrize("timestamp_type", ["timestamp", "timestamp_ntz"])
def test_delta_skips_the_files_the_embedded_backend_wrote_by_their_logged_bounds(
    spark: SparkSession, tmp_path: Path, timestamp_type: str
) -> None:
    """The bounds the embedded backend logs from its files' footers are those Delta's own
    writer would: Delta's reader prunes by them, and finds the same rows."""
    if not delta_spark_available(spark):
        pytest.skip("Delta's JVM classes are not in this session: run with "
                    "CHRONOLAKE_BACKEND=delta-spark (./dev test runs it so)")
    path = tmp_path / "orders"
    _table(spark, DeltaRsBackend(spark), path, timestamp_type)
    delta = DeltaSparkBackend(spark)
    span = _second_day()
    pruned = delta.snapshot(path, span=span)
    assert len(_file_names(pruned)) == 2
    assert pruned.count() == ROWS_PER_DAY
    assert delta.snapshot(path).where(F.col("id") < ROWS_PER_DAY).count() == ROWS_PER_DAY
