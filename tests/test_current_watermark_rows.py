"""`CURRENT_WATERMARK` per row (issue 44, item 4): the watermark in force when the row
arrived, as in Flink, where the function's value moves on between rows.

A bounded query applies the table's watermark strategy over its commits in order: a row
sees the watermark after the commits before its own (NULL for the first commit's rows), so
Flink's late-row idiom keeps the rows before the first watermark and drops a later commit's
late rows; with `'scan.watermark.emit.strategy' = 'on-event'` the value moves on row by row,
as in Flink's own test (CalcITCase.testCurrentWatermark). A run cut into ticks
(`'scan.max-rows-per-tick'`) gives a window view's rows the watermark at their tick's start.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltatables import update_rows, write_commits
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
  WATERMARK FOR ts AS ts - INTERVAL '{delay}' SECOND
) WITH ('path' = 'orders'{options})"""
IDIOM = "CURRENT_WATERMARK(ts) IS NULL OR ts > CURRENT_WATERMARK(ts)"


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def row(k: int, seconds: float) -> dict[str, Any]:
    return {"k": k, "ts": at(seconds), "price": 1}


def lake_with(root: Path, spark: SparkSession, commits: list[list[dict[str, Any]]], *ddl: str,
              delay: int = 2, options: str = "") -> Catalog:
    write_commits(root / "orders", commits, schema=SCHEMA)
    catalog = Catalog(root, spark)
    for statement in (ORDERS.format(delay=delay, options=options), *ddl):
        catalog.execute(statement)
    return catalog


# Watermark = max ts - 2 s, after each commit: 6 s, then 10 s, then 10 s.
THREE_COMMITS = [
    [row(1, 5), row(2, 8)],    # before any watermark: NULL
    [row(3, 12), row(4, 3)],   # in force 6 s: 3 s is late
    [row(5, 11), row(6, 9)],   # in force 10 s: 9 s is late
]


@pytest.mark.spark
def test_a_query_gives_each_row_the_watermark_after_the_commits_before_its_own(
    spark: SparkSession, tmp_path: Path
) -> None:
    catalog = lake_with(tmp_path, spark, THREE_COMMITS)
    rows = catalog.sql("SELECT k, CURRENT_WATERMARK(ts) AS wm FROM orders").collect()
    assert sorted((r["k"], r["wm"]) for r in rows) == [
        (1, None), (2, None), (3, at(6)), (4, at(6)), (5, at(10)), (6, at(10)),
    ]
    on_time = catalog.sql(f"SELECT * FROM orders AS o WHERE {IDIOM.replace('ts', 'o.ts')}")
    assert on_time.columns == ["k", "ts", "price"]  # the per-row value is never shown
    assert sorted(r["k"] for r in on_time.collect()) == [1, 2, 3, 5]


@pytest.mark.spark
def test_a_plain_view_with_the_idiom_read_by_a_query_drops_the_same_late_rows(
    spark: SparkSession, tmp_path: Path
) -> None:
    view = f"CREATE VIEW on_time AS SELECT k, ts FROM orders WHERE {IDIOM}"
    catalog = lake_with(tmp_path, spark, THREE_COMMITS, view)
    counted = catalog.sql("SELECT COUNT(*) AS n, MIN(ts) AS first FROM on_time").collect()
    assert [(r["n"], r["first"]) for r in counted] == [(4, at(5))]


@pytest.mark.spark
def test_on_event_emission_moves_the_value_on_row_by_row_as_flink_does(
    spark: SparkSession, tmp_path: Path
) -> None:
    # Flink's CalcITCase.testCurrentWatermark: WATERMARK FOR ts AS ts over three rows gives
    # NULL, then the first row's ts, then the second's; its filter keeps rows 1 and 2.
    one_commit = [[row(1, 100), row(2, 200), row(3, 200)]]
    catalog = lake_with(tmp_path, spark, one_commit, delay=0,
                        options=", 'scan.watermark.emit.strategy' = 'on-event'")
    rows = catalog.sql("SELECT k, CURRENT_WATERMARK(ts) AS wm FROM orders").collect()
    assert sorted((r["k"], r["wm"]) for r in rows) == [(1, None), (2, at(100)), (3, at(200))]
    kept = catalog.sql(f"SELECT k FROM orders WHERE {IDIOM}").collect()
    assert sorted(r["k"] for r in kept) == [1, 2]


KEYED = ", 'changelog' = 'cdf'"


@pytest.mark.spark
def test_a_keyed_tables_row_sees_the_watermark_when_its_keys_last_change_arrived(
    spark: SparkSession, tmp_path: Path
) -> None:
    keyed = ORDERS.replace("SECOND", "SECOND, PRIMARY KEY (k) NOT ENFORCED")
    write_commits(tmp_path / "orders", THREE_COMMITS[:2], schema=SCHEMA)
    update_rows(tmp_path / "orders", "k = 1", {"price": "7"})  # k1's last change: at 10 s
    catalog = Catalog(tmp_path, spark)
    catalog.execute(keyed.format(delay=2, options=KEYED))
    rows = catalog.sql("SELECT k, price, CURRENT_WATERMARK(ts) AS wm FROM orders").collect()
    assert sorted((r["k"], r["price"], r["wm"]) for r in rows) == [
        (1, 7, at(10)), (2, 1, None), (3, 1, at(6)), (4, 1, at(6)),
    ]
    keyless = Catalog(tmp_path / "keyless", spark)
    write_commits(tmp_path / "keyless" / "orders", THREE_COMMITS, schema=SCHEMA)
    keyless.execute(ORDERS.format(delay=2, options=KEYED))
    with pytest.raises(DefinitionError, match=r"CURRENT_WATERMARK.*PRIMARY KEY"):
        keyless.sql("SELECT k, CURRENT_WATERMARK(ts) AS wm FROM orders")


PER_WINDOW = f"""CREATE VIEW per_window AS
SELECT window_start, COUNT(*) AS n
FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '10' SECONDS))
WHERE {IDIOM}
GROUP BY window_start, window_end"""
# One row a commit; with 'scan.max-rows-per-tick' = '2' the first run goes in three ticks.
BACKLOG = [[row(1, 1)], [row(2, 12)], [row(3, 5)], [row(4, 9)], [row(5, 25)], [row(6, 14)]]


def windows(spark: SparkSession, lake: Path) -> list[tuple[float, int]]:
    rows = DeltaRsBackend(spark).snapshot(output_path(lake, "per_window")).collect()
    return sorted(((r["window_start"] - T0).total_seconds(), r["n"]) for r in rows)


@pytest.mark.spark
@pytest.mark.parametrize(
    ("options", "expected"),
    [
        # ticks {1 s, 12 s} {5 s, 9 s} {25 s, 14 s}: the first tick sees NULL (a first run, no
        # watermark yet), the second 10 s (5 s and 9 s dropped), the third 10 s (14 s kept)
        (", 'scan.max-rows-per-tick' = '2'", [(0.0, 1), (10.0, 2)]),
        # one tick, the value moving per commit: 14 s arrives after 25 s, at 23 s: dropped
        ("", [(0.0, 1), (10.0, 1)]),
    ],
    ids=["ticked", "per commit"],
)
def test_a_window_views_where_sees_the_watermark_at_its_ticks_start(
    spark: SparkSession, tmp_path: Path, options: str, expected: list[tuple[float, int]]
) -> None:
    catalog = lake_with(tmp_path, spark, BACKLOG, PER_WINDOW, options=options)
    result = DerivedTable(catalog, "per_window").run()
    assert windows(spark, tmp_path) == expected  # [20, 30) holds 25 s, still open
    late = DeltaRsBackend(spark).snapshot(tmp_path / LATE_ROOT / "per_window")
    assert (late.count(), result.figures["late_rows"]) == (0, 0)  # filtered, never late


WITH_WINDOW_TIME = """CREATE VIEW per_window AS
SELECT window_start, window_time, COUNT(*) AS n
FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '10' SECONDS))
GROUP BY window_start, window_end, window_time"""


@pytest.mark.spark
def test_a_derived_tables_rows_see_the_watermark_the_commit_before_theirs_recorded(
    spark: SparkSession, tmp_path: Path
) -> None:
    catalog = lake_with(tmp_path, spark, [[row(1, 1)], [row(2, 12)]], WITH_WINDOW_TIME)
    DerivedTable(catalog, "per_window").run()  # records 10 s, fires [0, 10)
    write_commits(tmp_path / "orders", [[row(3, 25)]], schema=SCHEMA)
    DerivedTable(Catalog(tmp_path, spark), "per_window").run()  # records 23 s, fires [10, 20)
    rows = Catalog(tmp_path, spark).sql(
        "SELECT window_start, CURRENT_WATERMARK(window_time) AS wm FROM per_window"
    ).collect()
    assert sorted((r["window_start"], r["wm"]) for r in rows) == [(at(0), None), (at(10), at(10))]
