"""Driver-side rows (ticks, offsets, file tags) joined to Spark rows: looked up or broadcast."""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession
from pyspark.sql.types import LongType, StringType, StructField, StructType

from chronolake.spark import session as spark_session
from chronolake.spark.session import join_local

pytestmark = pytest.mark.spark

BIG = 2**40  # beyond INT: a lookup keyed by INT literals would cast the probe down
SCHEMA = StructType([
    StructField("split", StringType()),
    StructField("commit", LongType()),
    StructField("tick", LongType()),
    StructField("label", StringType()),
])
ROWS = [("a", 0, 10, "first"), ("a", BIG, 11, None), ("b", 0, 12, "it's")]


def _joined(spark: SparkSession, on: list[str], rows: list[tuple]) -> list[tuple]:
    base = spark.createDataFrame(
        [("a", 0, 1), ("a", BIG, 2), ("b", 0, 3), ("b", 7, 4), (None, 0, 5), ("a", None, 6)],
        "split string, commit bigint, id int",
    )
    schema = SCHEMA if on != ["split"] else StructType([SCHEMA["split"], SCHEMA["label"]])
    joined = join_local(base, schema, rows, on)
    return sorted(tuple(row[name] for name in ("id", *schema.names)) for row in joined.collect())


@pytest.mark.parametrize("max_rows", [0, 64], ids=["broadcast-join", "literal-map"])
def test_local_rows_join_like_an_inner_join(
    spark: SparkSession, monkeypatch: pytest.MonkeyPatch, max_rows: int
) -> None:
    """Matched rows gain the values; unknown and null keys drop out, as in an inner join."""
    monkeypatch.setattr(spark_session, "LITERAL_LOOKUP_MAX_ROWS", max_rows)
    assert _joined(spark, ["split", "commit"], ROWS) == [
        (1, "a", 0, 10, "first"),
        (2, "a", BIG, 11, None),
        (3, "b", 0, 12, "it's"),
    ]
    assert _joined(spark, ["split"], [("a", "x"), ("b", "y")]) == [
        (1, "a", "x"), (2, "a", "x"), (3, "b", "y"), (4, "b", "y"), (6, "a", "x"),
    ]


def test_a_key_listed_twice_gives_a_row_per_entry(spark: SparkSession) -> None:
    """Duplicate keys cannot be a map: the rows are joined, one output row per entry."""
    rows = [("a", "x"), ("a", "y")]
    assert _joined(spark, ["split"], rows) == [
        (1, "a", "x"), (1, "a", "y"), (2, "a", "x"), (2, "a", "y"), (6, "a", "x"), (6, "a", "y"),
    ]


def test_no_rows_match_nothing(spark: SparkSession) -> None:
    assert _joined(spark, ["split", "commit"], []) == []


def test_a_few_rows_are_looked_up_without_a_join(spark: SparkSession) -> None:
    """The point of the literal map: no broadcast, so no Spark job each time the plan runs."""
    base = spark.range(3).selectExpr("'a' AS split", "id AS commit")
    joined = join_local(base, SCHEMA, ROWS, ["split", "commit"])
    plan = joined._jdf.queryExecution().optimizedPlan().toString()
    assert "Join" not in plan
    assert [row.tick for row in joined.collect()] == [10]
