"""Window Top-N and window deduplication (issue 22, item 4), as Flink plans them: ROW_NUMBER()
per window (and key) over a window aggregate or a window TVF, emitted once when the window
closes; the same rows whether a window's rows arrive in one run or two; late rows aside;
Flink's errors.

The data is Flink's documentation example (window-topn.md, window-deduplication.md): the
`Bid` table, 10-minute tumbling windows, a watermark 1 s behind the latest bid."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltatables import update_rows, write_commits
from pyspark.sql import SparkSession

from chronolake import Catalog, materialize_view
from chronolake.errors import DefinitionError
from chronolake.lake import DeltaRsBackend
from chronolake.lake.layout import LATE_ROOT, output_path
from chronolake.runtime.derived import DerivedTable
from chronolake.sql.ddl import parse_statements
from chronolake.sql.view_kinds import is_derived
from chronolake.sql.window_rank import plan_window_rank
from chronolake.watermarks import REASON_COLUMN

T0 = datetime(2020, 4, 15, 8, 0)
SCHEMA = pa.schema([("bidtime", pa.timestamp("us")), ("price", pa.decimal128(10, 2)),
                    ("item", pa.string()), ("supplier_id", pa.string())])
BID = """CREATE TABLE bid (
  bidtime TIMESTAMP(3), price DECIMAL(10, 2), item STRING, supplier_id STRING,
  WATERMARK FOR bidtime AS bidtime - INTERVAL '1' SECOND
) WITH ('path' = 'bid'{options})"""
TVF = "TABLE(TUMBLE(TABLE bid, DESCRIPTOR(bidtime), INTERVAL '10' MINUTES))"
VIEWS = {
    # window-topn.md: Top 3 suppliers by sales per window, after a window aggregation
    "top_suppliers": f"""SELECT * FROM (
        SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY price DESC)
          AS rownum
        FROM (SELECT window_start, window_end, supplier_id, SUM(price) AS price,
                     COUNT(*) AS cnt
              FROM {TVF} GROUP BY window_start, window_end, supplier_id))
      WHERE rownum <= 3""",
    # window-topn.md: Top 3 items by price per window, straight over the window TVF
    "top_items": f"""SELECT * FROM (
        SELECT bidtime, price, item, supplier_id, window_start, window_end,
          ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY price DESC)
          AS rownum
        FROM {TVF})
      WHERE rownum < 4""",
    # the dearest bid per window and supplier (a Top-1 by value, not a deduplication)
    "dearest_per_supplier": f"""SELECT window_start, supplier_id, item, price FROM (
        SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end, supplier_id
          ORDER BY price DESC) AS rn
        FROM {TVF})
      WHERE rn = 1""",
    # window-deduplication.md: the last bid per window; and the first
    "last_bid": f"""SELECT bidtime, price, item, window_start, window_end FROM (
        SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end
          ORDER BY bidtime DESC) AS rownum
        FROM {TVF})
      WHERE rownum <= 1""",
    "first_bid": f"""SELECT bidtime, price, item, window_start, window_end FROM (
        SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end
          ORDER BY bidtime ASC) AS rownum
        FROM {TVF})
      WHERE rownum = 1""",
}


def bid(minute: float, price: str, item: str, supplier: str) -> dict[str, Any]:
    return {"bidtime": T0 + timedelta(minutes=minute), "price": Decimal(price), "item": item,
            "supplier_id": supplier}


# One commit per bid, in this order. Windows [08:00, 08:10) and [08:10, 08:20); the bid at
# 08:21 moves the watermark to 08:20:59, closing both ([08:20, 08:30) stays open).
PART_1 = [bid(5, "4.00", "A", "supplier1"), bid(7, "2.00", "G", "supplier1"),
          bid(8, "2.00", "B", "supplier3")]
PART_2 = [bid(6, "4.00", "C", "supplier2"), bid(9, "5.00", "D", "supplier4"),
          bid(11, "2.00", "B", "supplier3"), bid(13, "1.00", "E", "supplier1"),
          bid(15, "3.00", "H", "supplier2"), bid(17, "6.00", "F", "supplier5"),
          bid(21, "1.00", "Z", "supplier9")]
LATE = [bid(4, "99.00", "L", "supplier1")]  # its window fired: it must change nothing


@dataclass(frozen=True)
class Lakes:
    """`split`: every view run after PART_1 (the watermark, 08:07:59, closes no window), again
    after PART_2, and after LATE; `whole`: one run after PART_1 + PART_2."""

    split: Path
    whole: Path
    figures: dict[str, dict[str, int]]


def declared(root: Path, spark: SparkSession, *, options: str = "") -> Catalog:
    catalog = Catalog(root, spark)
    catalog.execute(BID.format(options=options))
    for name, query in VIEWS.items():
        catalog.execute(f"CREATE VIEW {name} AS {query}")
    return catalog


@pytest.fixture(scope="module")
def lakes(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Lakes:
    root = tmp_path_factory.mktemp("top_n")
    split, whole = root / "split", root / "whole"
    write_commits(split / "bid", [[r] for r in PART_1], schema=SCHEMA)
    catalog = declared(split, spark)
    first = {name: materialize_view(catalog, name) for name in VIEWS}
    assert all(result.figures["rows_out"] == 0 for result in first.values())
    write_commits(split / "bid", [[r] for r in PART_2], schema=SCHEMA)
    shutil.copytree(split, whole, ignore=lambda folder, names: [
        n for n in names if folder == str(split) and n != "bid"
    ])
    figures = {name: DerivedTable(Catalog(split, spark), name).run().figures for name in VIEWS}
    write_commits(split / "bid", [[r] for r in LATE], schema=SCHEMA)
    figures["late_run"] = materialize_view(Catalog(split, spark), "top_items").figures
    catalog = declared(whole, spark)
    for name in VIEWS:
        materialize_view(catalog, name)
    return Lakes(split, whole, figures)


def rows_of(spark: SparkSession, lake: Path, view: str) -> list[tuple[Any, ...]]:
    """The view's rows, windows as minutes after 08:00, prices as strings, sorted."""
    def plain(value: Any) -> Any:
        if isinstance(value, datetime):
            return (value - T0).total_seconds() / 60
        return str(value) if isinstance(value, Decimal) else value
    table = DeltaRsBackend(spark).snapshot(output_path(lake, view))
    return sorted(tuple(plain(v) for v in r) for r in table.collect())


def columns_of(spark: SparkSession, lake: Path, view: str) -> list[str]:
    return DeltaRsBackend(spark).snapshot(output_path(lake, view)).columns


@pytest.mark.slow
@pytest.mark.spark
def test_top_3_suppliers_per_window_over_a_window_aggregate(
    spark: SparkSession, lakes: Lakes
) -> None:
    # [08:00, 08:10): supplier1 4+2, supplier4 5, supplier2 4, supplier3 2 (fourth: dropped)
    # [08:10, 08:20): supplier5 6, supplier2 3, supplier3 2, supplier1 1 (fourth: dropped)
    assert columns_of(spark, lakes.split, "top_suppliers") == [
        "window_start", "window_end", "supplier_id", "price", "cnt", "rownum"]
    assert rows_of(spark, lakes.split, "top_suppliers") == [
        (0, 10, "supplier1", "6.00", 2, 1), (0, 10, "supplier2", "4.00", 1, 3),
        (0, 10, "supplier4", "5.00", 1, 2),
        (10, 20, "supplier2", "3.00", 1, 2), (10, 20, "supplier3", "2.00", 1, 3),
        (10, 20, "supplier5", "6.00", 1, 1),
    ]


@pytest.mark.slow
@pytest.mark.spark
def test_top_3_items_per_window_over_the_tvf_rank_ties_in_arrival_order(
    spark: SparkSession, lakes: Lakes
) -> None:
    # A (08:05) and C (08:06) both bid 4.00: A arrived first (run 1, C in run 2), so A is 2nd
    assert rows_of(spark, lakes.split, "top_items") == [
        (5, "4.00", "A", "supplier1", 0, 10, 2), (6, "4.00", "C", "supplier2", 0, 10, 3),
        (9, "5.00", "D", "supplier4", 0, 10, 1),
        (11, "2.00", "B", "supplier3", 10, 20, 3), (15, "3.00", "H", "supplier2", 10, 20, 2),
        (17, "6.00", "F", "supplier5", 10, 20, 1),
    ]
    figures = lakes.figures["top_items"]
    # run 2 fires both windows with 5 + 4 rows (3 of them from run 1's state), keeps 3 + 3
    assert (figures["rows_in"], figures["windows_fired"], figures["rows_out"]) == (7, 2, 6)
    assert (figures["pending_rows"], figures["late_rows"]) == (1, 0)


@pytest.mark.slow
@pytest.mark.spark
def test_top_1_per_window_and_key(spark: SparkSession, lakes: Lakes) -> None:
    assert rows_of(spark, lakes.split, "dearest_per_supplier") == [
        (0, "supplier1", "A", "4.00"), (0, "supplier2", "C", "4.00"),
        (0, "supplier3", "B", "2.00"), (0, "supplier4", "D", "5.00"),
        (10, "supplier1", "E", "1.00"), (10, "supplier2", "H", "3.00"),
        (10, "supplier3", "B", "2.00"), (10, "supplier5", "F", "6.00"),
    ]


@pytest.mark.slow
@pytest.mark.spark
def test_window_deduplication_keeps_the_first_or_the_last_bid(
    spark: SparkSession, lakes: Lakes
) -> None:
    assert rows_of(spark, lakes.split, "last_bid") == [
        (9, "5.00", "D", 0, 10), (17, "6.00", "F", 10, 20),
    ]
    assert rows_of(spark, lakes.split, "first_bid") == [
        (5, "4.00", "A", 0, 10), (11, "2.00", "B", 10, 20),
    ]


@pytest.mark.slow
@pytest.mark.spark
def test_a_window_spanning_two_runs_gives_the_rows_of_one_run(
    spark: SparkSession, lakes: Lakes
) -> None:
    for name in VIEWS:
        assert rows_of(spark, lakes.split, name) == rows_of(spark, lakes.whole, name), name


@pytest.mark.slow
@pytest.mark.spark
def test_a_bid_for_a_closed_window_goes_to_the_side_table_and_changes_no_rank(
    spark: SparkSession, lakes: Lakes
) -> None:
    figures = lakes.figures["late_run"]
    assert (figures["rows_in"], figures["late_rows"], figures["rows_out"]) == (1, 1, 0)
    late = DeltaRsBackend(spark).snapshot(lakes.split / LATE_ROOT / "top_items").collect()
    assert [(r["item"], r[REASON_COLUMN]) for r in late] == [("L", "window_closed")]


TIES = [bid(2, "1.00", "X1", "s"), bid(2, "1.00", "X2", "s"),    # equal earliest times
        bid(8, "1.00", "Y1", "s"), bid(8, "1.00", "Y2", "s"),    # equal latest times
        bid(12, "1.00", "closer", "s")]


@pytest.mark.slow
@pytest.mark.spark
def test_deduplication_ties_keep_the_first_arrival_for_asc_the_last_for_desc(
    spark: SparkSession, tmp_path: Path
) -> None:
    # Flink's DeduplicateFunctionHelper: keep-first replaces only on an earlier time, keep-last
    # on a later or equal one. Y1 and Y2 arrive in two runs: the same rows as in one.
    write_commits(tmp_path / "bid", [[r] for r in TIES[:3]], schema=SCHEMA)
    catalog = declared(tmp_path, spark)
    for name in ("first_bid", "last_bid"):
        assert materialize_view(catalog, name).figures["rows_out"] == 0
    write_commits(tmp_path / "bid", [[r] for r in TIES[3:]], schema=SCHEMA)
    for name in ("first_bid", "last_bid"):
        materialize_view(catalog, name)
    assert rows_of(spark, tmp_path, "first_bid") == [(2, "1.00", "X1", 0, 10)]
    assert rows_of(spark, tmp_path, "last_bid") == [(8, "1.00", "Y2", 0, 10)]


@pytest.mark.spark
def test_a_window_top_n_over_the_tvf_of_an_updating_table_is_refused(
    spark: SparkSession, tmp_path: Path
) -> None:
    write_commits(tmp_path / "bid", [[r] for r in PART_1], schema=SCHEMA)
    catalog = declared(tmp_path, spark, options=", 'changelog' = 'cdf'")
    update_rows(tmp_path / "bid", "item = 'A'", {"price": "price + 1"})
    with pytest.raises(DefinitionError, match=(
        r"view 'top_items': a window Top-N over a window table function ranks insert-only "
        r"rows .* but 'bid' has updates and deletes; rank a window aggregate of it instead"
    )):
        DerivedTable(catalog, "top_items")
    # a window aggregate takes the updates (3 inserts, then -U/+U), and its rows are ranked
    assert materialize_view(catalog, "top_suppliers").figures["rows_in"] == 5


# --- planning: what the output carries, Flink's errors (no Spark) -------------------------

CATALOG = {spec.name: spec for spec in parse_statements(BID.format(options=""), catalog={})}


def view(query: str) -> Any:
    [spec] = parse_statements(f"CREATE VIEW v AS {query}", catalog=CATALOG)
    return spec


def test_a_ranked_view_is_derived_insert_only_keyed_by_its_partition_and_rank() -> None:
    top = view(VIEWS["top_suppliers"])
    assert is_derived(top)
    assert (top.primary_key, top.rowtime, top.updating) == (
        ("window_start", "window_end", "rownum"), None, False)
    dedup = view(VIEWS["last_bid"])
    assert (dedup.primary_key, dedup.rowtime, dedup.deduplication) == (
        ("window_start", "window_end"), "bidtime", None)
    with_time = view(VIEWS["top_suppliers"].replace(
        "SUM(price) AS price", "SUM(price) AS price, window_time"))
    assert with_time.rowtime == "window_time"
    no_rank = view(VIEWS["top_items"].replace("SELECT * FROM (", "SELECT item FROM ("))
    assert no_rank.primary_key == ()


def test_the_planner_tells_a_deduplication_from_a_top_n() -> None:
    last = plan_window_rank(VIEWS["last_bid"], CATALOG)
    assert (last.keep, last.rank_start, last.rank_end) == ("last", 1, 1)
    first = plan_window_rank(VIEWS["first_bid"], CATALOG)
    assert first.keep == "first"
    # selecting the rank number, or ordering by a value, makes it a Top-1 (RankUtil)
    assert plan_window_rank(VIEWS["last_bid"].replace(
        "SELECT bidtime,", "SELECT rownum, bidtime,"), CATALOG).keep is None
    assert plan_window_rank(VIEWS["dearest_per_supplier"], CATALOG).keep is None
    between = plan_window_rank(VIEWS["top_items"].replace(
        "WHERE rownum < 4", "WHERE 2 <= rownum AND rownum < 4 AND price > 1"), CATALOG)
    assert (between.rank_start, between.rank_end, between.where) == (2, 3, "price > 1")


def _ranked(where: str, over: str = "PARTITION BY window_start, window_end ORDER BY price DESC",
            function: str = "ROW_NUMBER()") -> str:
    return (f"SELECT * FROM (SELECT *, {function} OVER ({over}) AS rownum FROM {TVF}) "
            f"WHERE {where}")


@pytest.mark.parametrize(
    ("query", "message"),
    [
        (_ranked("rownum <= 3", over="PARTITION BY window_start, supplier_id ORDER BY price"),
         r"PARTITION BY window_start, supplier_id: a window Top-N partitions by both "
         r"window_start and window_end \(missing window_end\), so that each window is ranked "
         r"once, when it closes; without them Flink plans a regular, updating Top-N, which "
         r"chronolake does not run: write PARTITION BY window_start, window_end, supplier_id"),
        (VIEWS["top_suppliers"].replace("PARTITION BY window_start, window_end",
                                        "PARTITION BY supplier_id"),
         r"PARTITION BY supplier_id: a window Top-N partitions by both window_start and "
         r"window_end \(missing window_start, window_end\)"),
        (_ranked("rownum <= 3", function="RANK()"),
         r"RANK\(\) function is not supported on Window TopN currently, only ROW_NUMBER\(\) "
         r"is supported; write ROW_NUMBER\(\) OVER"),
        (_ranked("rownum <= 3", function="DENSE_RANK()"),
         r"DENSE_RANK\(\) function is not supported on Window TopN currently"),
        (_ranked("rownum > 1"),
         r"WHERE rownum > 1: Rank end is not specified\. Currently rank only support TopN, "
         r"which means the rank end must be specified: add AND rownum <= N"),
        (_ranked("rownum <= 0"),
         r"WHERE rownum <= 0: Rank end should not less than zero, but now is 0"),
        (_ranked("rownum <= 3 OR price > 1"),
         r"WHERE rownum <= 3 OR price > 1: rownum <= 3 OR price > 1 is not a window Top-N "
         r"bound; compare rownum alone with a constant, e\.g\. rownum <= 3"),
        (_ranked("rownum <> 2"), r"rownum <> 2 is not a window Top-N bound"),
        (_ranked("price > 1"),
         r"WHERE price > 1: a window Top-N keeps the rows whose rownum is at most N; write "
         r"WHERE rownum <= N"),
        (_ranked("rownum <= price"),
         r"rownum <= price: Rank strategy with a bound that is not a constant is not "
         r"supported on window rank currently"),
        (f"SELECT * FROM (SELECT window_start, window_end, SUM(price) AS total, ROW_NUMBER() "
         f"OVER (PARTITION BY window_start, window_end ORDER BY SUM(price)) AS rownum FROM {TVF} "
         f"GROUP BY window_start, window_end) WHERE rownum <= 1",
         r"GROUP BY in the ranking query of a window Top-N is not supported; write SELECT \* "
         r"FROM \(SELECT \*, ROW_NUMBER\(\) OVER"),
    ],
    ids=["partition-without-window-end", "aggregate-partition-without-window",
         "rank", "dense-rank", "no-rank-end", "rank-end-zero", "or", "not-equal", "no-bound",
         "variable-bound", "group-by-in-ranking"],
)
def test_planner_errors(query: str, message: str) -> None:
    with pytest.raises(DefinitionError, match=message):
        view(query)  # CREATE VIEW refuses it
    with pytest.raises(DefinitionError, match=message):
        plan_window_rank(query, CATALOG)  # and so does the run's planner


def test_an_unknown_column_in_the_ranking_is_named() -> None:
    query = _ranked("rownum <= 3", over="PARTITION BY window_start, window_end ORDER BY nope")
    with pytest.raises(DefinitionError, match=r"view 'v' reads unknown column 'nope'"):
        view(query)
    with pytest.raises(DefinitionError, match=r"Column 'nope' not found in any table; the "
                       r"window view reads bidtime, price, item, supplier_id, window_start"):
        plan_window_rank(query, CATALOG)


def test_a_window_tvf_alone_is_refused_with_the_shapes_that_run() -> None:
    from chronolake.sql.window import plan_window_aggregate
    with pytest.raises(DefinitionError, match=(
        r"or rank the window's rows with a window Top-N .*; a window table function's rows "
        r"alone are not run"
    )):
        plan_window_aggregate(f"SELECT * FROM {TVF}", CATALOG)
