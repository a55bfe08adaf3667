"""`CURRENT_WATERMARK(rowtime)` (issue 22, item 6; per row since issue 44, item 4): the
watermark in force when a row arrived, NULL before the first; Flink's idiom for separating
late rows, in a plain view that feeds a window view and in a window view's WHERE, and in
ad-hoc queries; the argument must be a rowtime attribute (`test_current_watermark_rows`
holds the per-commit and per-tick cases)."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltatables import write_commits
from pyspark.sql import SparkSession

from chronolake import Catalog
from chronolake.errors import DefinitionError
from chronolake.lake import DeltaRsBackend
from chronolake.lake.layout import LATE_ROOT, output_path
from chronolake.runtime.derived import DerivedTable

T0 = datetime(2024, 1, 1)
SCHEMA = pa.schema([("k", pa.int64()), ("ts", pa.timestamp("us")), ("price", pa.int64())])
ORDERS = """CREATE TABLE orders (
  k BIGINT, ts TIMESTAMP(3), price BIGINT,
  WATERMARK FOR ts AS ts - INTERVAL '2' SECOND
) WITH ('path' = 'orders')"""
ON_TIME = """CREATE VIEW on_time AS SELECT * FROM orders
WHERE CURRENT_WATERMARK(ts) IS NULL OR ts > CURRENT_WATERMARK(ts)"""
PER_WINDOW = """CREATE VIEW per_window AS
SELECT window_start, window_end, COUNT(*) AS n, SUM(price) AS total
FROM TABLE(TUMBLE(TABLE {source}, DESCRIPTOR(ts), INTERVAL '10' SECONDS))
{where}
GROUP BY window_start, window_end"""
WINDOW_WHERE = "WHERE CURRENT_WATERMARK(ts) IS NULL OR ts > CURRENT_WATERMARK(ts)"


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def row(k: int, seconds: float, price: int = 1) -> dict[str, Any]:
    return {"k": k, "ts": at(seconds), "price": price}


# Run 1: 12 s arrives last, so the run ends at watermark 10 s; nothing is filtered (NULL).
RUN_1 = [[row(1, 1)], [row(2, 4)], [row(3, 12)]]
# Run 2 starts at watermark 10 s: 9 s is behind it (dropped by the idiom), 11 s and 25 s not.
RUN_2 = [[row(4, 9, 100)], [row(5, 11)], [row(6, 25)]]


def lake_with(root: Path, spark: SparkSession, *ddl: str) -> Catalog:
    write_commits(root / "orders", RUN_1, schema=SCHEMA)
    catalog = Catalog(root, spark)
    for statement in (ORDERS, *ddl):
        catalog.execute(statement)
    return catalog


def windows(spark: SparkSession, lake: Path) -> list[tuple[float, int, int]]:
    rows = DeltaRsBackend(spark).snapshot(output_path(lake, "per_window")).collect()
    return sorted(((r["window_start"] - T0).total_seconds(), r["n"], r["total"]) for r in rows)


def late_keys(spark: SparkSession, lake: Path) -> list[int]:
    path = lake / LATE_ROOT / "per_window"
    if not path.exists():
        return []
    return sorted(r["k"] for r in DeltaRsBackend(spark).snapshot(path).collect())


@pytest.mark.spark
@pytest.mark.parametrize("shape", ["plain view", "window WHERE"])
def test_the_late_row_idiom_filters_by_the_watermark_in_force_on_arrival(
    spark: SparkSession, tmp_path: Path, shape: str
) -> None:
    ddl = (
        [ON_TIME, PER_WINDOW.format(source="on_time", where="")]
        if shape == "plain view"
        else [PER_WINDOW.format(source="orders", where=WINDOW_WHERE)]
    )
    catalog = lake_with(tmp_path, spark, *ddl)
    first = DerivedTable(catalog, "per_window").run()
    assert first.watermark_ms is not None
    assert windows(spark, tmp_path) == [(0.0, 2, 2)]  # [0, 10) closed at 10 s
    write_commits(tmp_path / "orders", RUN_2, schema=SCHEMA)
    second = DerivedTable(Catalog(tmp_path, spark), "per_window").run()
    # 9 s (price 100) never reaches the window: filtered, not late; [10, 20) holds 11 s, 12 s.
    assert windows(spark, tmp_path) == [(0.0, 2, 2), (10.0, 2, 2)]
    assert late_keys(spark, tmp_path) == []
    assert second.figures["late_rows"] == 0


@pytest.mark.spark
def test_without_the_idiom_the_same_row_is_late_for_its_window(
    spark: SparkSession, tmp_path: Path
) -> None:
    catalog = lake_with(tmp_path, spark, PER_WINDOW.format(source="orders", where=""))
    DerivedTable(catalog, "per_window").run()
    write_commits(tmp_path / "orders", RUN_2, schema=SCHEMA)
    DerivedTable(Catalog(tmp_path, spark), "per_window").run()
    assert late_keys(spark, tmp_path) == [4]


@pytest.mark.spark
def test_a_query_sees_the_watermark_in_force_per_commit_and_null_before_any(
    spark: SparkSession, tmp_path: Path
) -> None:
    catalog = lake_with(tmp_path, spark)
    rows = catalog.sql("SELECT k, CURRENT_WATERMARK(ts) AS wm FROM orders").collect()
    # each commit sees the one before's max − 2 s; the first, none yet
    assert sorted((r["k"], r["wm"]) for r in rows) == [(1, None), (2, at(-1)), (3, at(2))]
    empty = tmp_path / "empty"
    write_commits(empty / "orders", [[{"k": 1, "ts": None, "price": 1}]], schema=SCHEMA)
    fresh = Catalog(empty, spark)
    fresh.execute(ORDERS)
    [only] = fresh.sql("SELECT CURRENT_WATERMARK(o.ts) AS wm FROM orders AS o").collect()
    assert only["wm"] is None


@pytest.mark.spark
def test_current_watermark_of_a_column_that_is_not_the_rowtime_is_refused(
    spark: SparkSession, tmp_path: Path
) -> None:
    catalog = lake_with(tmp_path, spark)
    with pytest.raises(DefinitionError, match="must be a rowtime attribute.*orders.ts"):
        catalog.sql("SELECT CURRENT_WATERMARK(price) FROM orders")


@pytest.mark.spark
def test_current_watermark_where_no_operator_can_bind_it_is_refused_at_create_view(
    spark: SparkSession, tmp_path: Path
) -> None:
    catalog = lake_with(tmp_path, spark)
    dedup = """CREATE VIEW latest AS SELECT k, ts, price FROM (
      SELECT *, ROW_NUMBER() OVER (PARTITION BY k ORDER BY ts DESC) AS rn FROM orders
      WHERE ts > CURRENT_WATERMARK(ts)) WHERE rn = 1"""
    with pytest.raises(DefinitionError, match="plain view first"):
        catalog.execute(dedup)
    windowed = PER_WINDOW.format(source="orders", where="").replace(
        "COUNT(*) AS n", "COUNT(*) AS n, MAX(CURRENT_WATERMARK(ts)) AS wm"
    )
    with pytest.raises(DefinitionError, match="outside its WHERE clause"):
        catalog.execute(windowed)
