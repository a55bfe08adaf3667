"""Restating a range through a deduplication: the keys the range touched (those of the rewritten
rows, and those whose kept row lay in it) are recomputed from every row of the source, as a
refresh keeps them, whatever the time of the row each now keeps; only their differences are
committed; and the next hop restates the span of the changed rows' times.

A real lake: raw orders (an append table without the change data feed) at 09:05 (EUR 10),
09:15 (EUR 20), 09:25 (EUR 30), 09:35 (USD 40), 09:45 (EUR 50) and 10:05 (EUR 60); the latest
and the first order of each currency kept by their time.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from _orders_and_rates import RAW_ORDERS, at, between, ms, order_row
from _restated_lake import run_once
from deltalake import DeltaTable, write_deltalake
from deltatables import as_table, table_rows
from pyspark.sql import SparkSession

from chronolake import Catalog
from chronolake.lake.layout import output_path
from chronolake.lake.stamps import restated_commits
from chronolake.runtime.derived import DerivedTable
from chronolake.runtime.restate_plan import run_restatement

KEPT = RAW_ORDERS + """
CREATE VIEW latest_per_currency AS
SELECT order_id, currency, amount, order_time FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY currency ORDER BY order_time DESC) AS rownum
  FROM raw_orders)
WHERE rownum = 1;
CREATE VIEW first_per_currency AS
SELECT order_id, currency AS first_currency, order_time FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY currency ORDER BY order_time ASC) AS rownum
  FROM raw_orders)
WHERE rownum = 1;
"""
VIEWS = ("latest_per_currency", "first_per_currency")
ORDERS = [order_row(1, 10, 5), order_row(2, 20, 15), order_row(3, 30, 25),
          order_row(4, 40, 35, "USD"), order_row(5, 50, 45), order_row(6, 60, 65)]
SCHEMA = as_table(ORDERS).schema


@pytest.fixture
def lake(tmp_path: Path, spark: SparkSession) -> Catalog:
    """The orders in one commit, both views run once over them."""
    return run_once(tmp_path, spark, KEPT, VIEWS, {"raw_orders": ORDERS})


def re_export(catalog: Catalog, start: float, end: float, orders: list[dict[str, Any]]) -> None:
    """The upstream system replaces the orders of [start, end) (minutes) with `orders`."""
    write_deltalake(str(Path(str(catalog.root)) / "raw_orders"), as_table(orders, SCHEMA),
                    mode="overwrite", predicate=between(start, end))


def kept(catalog: Catalog, view: str) -> set[tuple[Any, ...]]:
    """A view's rows: (order id, currency, minute)."""
    return {(r["order_id"], r.get("currency", r.get("first_currency")), _minute(r["order_time"]))
            for r in table_rows(output_path(catalog.root, view)).to_pylist()}


def last_changes(catalog: Catalog, view: str) -> set[tuple[Any, ...]]:
    """What the latest commit of `view` changed, by its change data feed."""
    table = DeltaTable(str(output_path(catalog.root, view)))
    feed = pa.table(table.load_cdf(starting_version=table.version(),
                                   ending_version=table.version()).read_all()).to_pylist()
    return {(r["_change_type"], r["order_id"]) for r in feed}


def _minute(moment: Any) -> int:
    return int((moment - at(0)).total_seconds() // 60)


CASES = {
    # the first EUR order is gone: the next one, outside the range, becomes the first
    "first row gone": ((0, 10, []), {
        "latest_per_currency": set(),
        "first_per_currency": {("update_preimage", 1), ("update_postimage", 2)},
    }),
    # a later EUR order within the range becomes the latest
    "new latest row": ((60, 70, [order_row(8, 70, 62), order_row(6, 60, 61)]), {
        "latest_per_currency": {("update_preimage", 6), ("update_postimage", 8)},
        "first_per_currency": set(),
    }),
    # the only USD order is gone (its key removed), a GBP one is new (a key added)
    "key removed and key added": ((30, 40, [order_row(9, 5, 32, "GBP")]), {
        "latest_per_currency": {("delete", 4), ("insert", 9)},
        "first_per_currency": {("delete", 4), ("insert", 9)},
    }),
}


@pytest.mark.parametrize("case", [
    pytest.param(case, marks=[pytest.mark.lake_contract] if case != "new latest row" else [])
    for case in CASES])  # Delta's MERGE of -U/+U and of -D/+I on delta-spark
def test_a_deduplication_restates_the_keys_the_range_touched_and_equals_a_refresh(
    lake: Catalog, case: str
) -> None:
    (start, end, orders), expected = CASES[case]
    before = {view: DeltaTable(str(output_path(lake.root, view))).version() for view in VIEWS}
    re_export(lake, start, end, orders)

    run_restatement(lake, "raw_orders", start_ms=ms(start), end_ms=ms(end))

    restated = {view: kept(lake, view) for view in VIEWS}
    for view in VIEWS:
        table = DeltaTable(str(output_path(lake.root, view)))
        assert table.version() == before[view] + 1, view  # one commit, of the changes alone
        assert last_changes(lake, view) == expected[view], view
        DerivedTable(lake, view).run(full_refresh=True)
        assert restated[view] == kept(lake, view), view


def test_the_restated_commit_names_the_span_of_the_rows_it_changed(lake: Catalog) -> None:
    """The first EUR order moves from 09:05 to 09:15: the next hop restates [09:05, 09:15]
    of `first_per_currency`, wider than the range [09:00, 09:10) itself."""
    re_export(lake, 0, 10, [])
    run_restatement(lake, "raw_orders", start_ms=ms(0), end_ms=ms(10))
    path = output_path(lake.root, "first_per_currency")
    version = DeltaTable(str(path)).version()
    [span] = restated_commits(lake.backend, path, version, version).values()
    assert (span.source, span.start_ms, span.end_ms) == ("raw_orders", ms(5), ms(15) + 1)


def test_a_range_restated_twice_changes_nothing_the_second_time(lake: Catalog) -> None:
    re_export(lake, 60, 70, [order_row(8, 70, 62)])
    run_restatement(lake, "raw_orders", start_ms=ms(60), end_ms=ms(70))
    once = {view: kept(lake, view) for view in VIEWS}
    re_export(lake, 60, 70, [order_row(8, 70, 62)])  # the same rows exported again
    run_restatement(lake, "raw_orders", start_ms=ms(60), end_ms=ms(70))
    for view in VIEWS:
        assert kept(lake, view) == once[view], view
        assert last_changes(lake, view) == set(), view
