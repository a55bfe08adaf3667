"""Restating a range of a versioned table: the rate events re-exported for a range replace
the history of the temporal join reading it (and its state), and the orders that joined a
version of a touched currency from the range's start on, up to that currency's next rate
after it, are joined again; the history view of the rates recomputes the versions of the
touched currencies. Only differences are committed, and the window over the join restates
them.

A real lake: orders (a CDC table) in EUR at 09:05, 09:15, 09:25, 09:35 and 09:45 and in USD
at 09:10, 09:30 and 09:55, and 10:00 in EUR; a log of rate events (an append table, versioned
by currency): EUR 1 at 09:00, 2 at 09:20, 3 at 09:40 and 4 at 10:10, USD 5 at 09:00 and 6 at
09:50. Both watermarks follow their rows, so the join's is 10:00.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from _crash import REPO, SUBPROCESS_TIMEOUT_S
from _demo import CHRONOLAKE
from _orders_and_rates import ORDERS_AND_RATES, at, between, ms, order_row, rate_row
from _restated_lake import run_once
from deltalake import DeltaTable, write_deltalake
from deltatables import as_table, table_rows, write_commits
from pyspark.sql import SparkSession

from chronolake import Catalog
from chronolake.faults import FAULT_ENV, FaultPoint
from chronolake.lake.layout import output_path
from chronolake.runtime.derived import DerivedTable
from chronolake.runtime.restate_plan import run_restatement

DDL = ORDERS_AND_RATES + """
CREATE TABLE rate_log (
  currency STRING, rate BIGINT, currency_time TIMESTAMP(3),
  WATERMARK FOR currency_time AS currency_time,
  PRIMARY KEY (currency) NOT ENFORCED
) WITH ('path' = 'rate_log', 'changelog' = 'append');
CREATE VIEW priced AS
SELECT o.order_id, o.currency, o.amount, o.order_time, r.rate, o.amount * r.rate AS usd
FROM orders AS o LEFT JOIN rate_log FOR SYSTEM_TIME AS OF o.order_time AS r
ON o.currency = r.currency;
CREATE VIEW rate_history AS
SELECT currency, rate, valid_from, valid_to FROM rate_log FOR SYSTEM_TIME ALL;
CREATE VIEW usd_per_half_hour AS
SELECT window_start, window_end, SUM(usd) AS usd, COUNT(*) AS orders
FROM TABLE(TUMBLE(TABLE priced, DESCRIPTOR(order_time), INTERVAL '30' MINUTES))
GROUP BY window_start, window_end;
"""
VIEWS = ("priced", "rate_history", "usd_per_half_hour")
ORDERS = [order_row(1, 1, 5), order_row(2, 1, 15), order_row(3, 1, 25), order_row(4, 1, 35),
          order_row(5, 1, 45), order_row(6, 1, 10, "USD"), order_row(7, 1, 30, "USD"),
          order_row(8, 1, 55, "USD"), order_row(9, 1, 60)]
RATES = [rate_row("EUR", 1, 0), rate_row("EUR", 2, 20), rate_row("EUR", 3, 40),
         rate_row("EUR", 4, 70), rate_row("USD", 5, 0), rate_row("USD", 6, 50)]
RATES_SCHEMA = as_table(RATES).schema


@pytest.fixture
def lake(tmp_path: Path, spark: SparkSession) -> Catalog:
    """Orders and rates in one commit each, every view run once."""
    return run_once(tmp_path, spark, DDL, VIEWS, {"orders": ORDERS, "rate_log": RATES},
                    feeds=["orders"])


def re_export(catalog: Catalog, start: float, end: float, rates: list[dict[str, Any]]) -> None:
    """The upstream system replaces the rate events of [start, end) (minutes) with `rates`."""
    write_deltalake(str(Path(str(catalog.root)) / "rate_log"), as_table(rates, RATES_SCHEMA),
                    mode="overwrite", predicate=between(start, end, "currency_time"))


def rates_of(catalog: Catalog) -> dict[int, Any]:
    """`priced`: each order's rate, by order id."""
    return {r["order_id"]: r["rate"]
            for r in table_rows(output_path(catalog.root, "priced")).to_pylist()}


def last_changes(catalog: Catalog, view: str) -> set[tuple[Any, ...]]:
    """What the latest commit of `view` changed: (kind, its first column, its usd)."""
    table = DeltaTable(str(output_path(catalog.root, view)))
    feed = pa.table(table.load_cdf(starting_version=table.version(),
                                   ending_version=table.version()).read_all()).to_pylist()
    first = "order_id" if view == "priced" else "window_start"
    return {(r["_change_type"], r[first], r["usd"]) for r in feed}


def history_changes(catalog: Catalog) -> set[tuple[Any, ...]]:
    """What the latest commit of `rate_history` changed: (kind, currency, rate, valid from
    and to, in minutes)."""
    table = DeltaTable(str(output_path(catalog.root, "rate_history")))
    feed = pa.table(table.load_cdf(starting_version=table.version(),
                                   ending_version=table.version()).read_all()).to_pylist()
    return {(r["_change_type"], r["currency"], r["rate"], _minute(r["valid_from"]),
             None if r["valid_to"] is None else _minute(r["valid_to"])) for r in feed}


def _minute(moment: Any) -> int:
    return int((moment - at(0)).total_seconds() // 60)


def contents(catalog: Catalog) -> dict[str, list[str]]:
    """Every view's rows, each as text, sorted."""
    return {view: sorted(str(sorted(row.items())) for row in
                         table_rows(output_path(catalog.root, view)).to_pylist())
            for view in VIEWS}


def refreshed(catalog: Catalog) -> dict[str, list[str]]:
    """Every view rebuilt from scratch over the sources as they are now, in order."""
    for view in VIEWS:
        DerivedTable(catalog, view).run(full_refresh=True)
    return contents(catalog)


@pytest.mark.lake_contract  # Delta's MERGE restates on delta-spark
def test_a_corrected_rate_rejoins_the_orders_of_its_interval_and_equals_a_refresh(
    lake: Catalog,
) -> None:
    """EUR's 09:20 rate corrected to 9 and a USD rate added at 09:25: the EUR orders at
    09:25 and 09:35 (until the 09:40 rate) and the USD order at 09:30 (until 09:50) change;
    the 09:15 order and those after the next rates do not."""
    assert rates_of(lake) == {1: 1, 2: 1, 3: 2, 4: 2, 5: 3, 6: 5, 7: 5, 8: 6, 9: 3}
    re_export(lake, 10, 30, [rate_row("EUR", 9, 20), rate_row("USD", 7, 25)])

    [priced, history, per_half_hour] = run_restatement(lake, "rate_log", start_ms=ms(10),
                                                        end_ms=ms(30))

    assert rates_of(lake) == {1: 1, 2: 1, 3: 9, 4: 9, 5: 3, 6: 5, 7: 7, 8: 6, 9: 3}
    assert last_changes(lake, "priced") == {
        ("update_preimage", 3, 2), ("update_postimage", 3, 9),
        ("update_preimage", 4, 2), ("update_postimage", 4, 9),
        ("update_preimage", 7, 5), ("update_postimage", 7, 7),
    }
    assert priced.figures["rows_out"] == 6
    # the next hop restates the span of the changed orders: both half hours
    assert {kind for kind, _, _ in last_changes(lake, "usd_per_half_hour")} == {
        "update_preimage", "update_postimage"}
    assert per_half_hour.figures["update_afters_out"] == 2
    # EUR's 09:20 version corrected; USD's 09:00 version now ends at 09:25, a new one begins
    assert history_changes(lake) == {
        ("update_preimage", "EUR", 2, 20, 40), ("update_postimage", "EUR", 9, 20, 40),
        ("update_preimage", "USD", 5, 0, 50), ("update_postimage", "USD", 5, 0, 25),
        ("insert", "USD", 7, 25, 50),
    }
    assert history.figures["rows_out"] == 5
    restated = contents(lake)
    assert restated == refreshed(lake)


def test_a_rate_removed_from_the_range_gives_its_orders_the_version_before_it(
    lake: Catalog,
) -> None:
    """EUR's 09:20 rate gone: the orders until 09:40 join the 09:00 rate again."""
    re_export(lake, 10, 30, [])
    run_restatement(lake, "rate_log", start_ms=ms(10), end_ms=ms(30))
    assert rates_of(lake) == {1: 1, 2: 1, 3: 1, 4: 1, 5: 3, 6: 5, 7: 5, 8: 6, 9: 3}
    restated = contents(lake)
    assert restated == refreshed(lake)


def test_a_rate_removed_with_no_version_after_it_rejoins_every_later_order(
    lake: Catalog,
) -> None:
    """USD's 09:50 rate gone: USD's orders from 09:50 on join the 09:00 rate, up to the
    watermark; an order after the watermark, pending, joins it when released."""
    re_export(lake, 45, 55, [])
    run_restatement(lake, "rate_log", start_ms=ms(45), end_ms=ms(55))
    assert rates_of(lake)[8] == 5
    write_commits(Path(str(lake.root)) / "orders", [[order_row(10, 1, 65, "USD")]])
    write_commits(Path(str(lake.root)) / "rate_log", [[rate_row("EUR", 5, 80)]], cdf=False)
    for view in VIEWS:
        DerivedTable(lake, view).run()
    assert rates_of(lake)[10] == 5
    restated = contents(lake)
    assert restated == refreshed(lake)


def test_a_build_restatement_killed_after_the_history_is_rewritten_is_finished_by_its_redo(
    lake: Catalog,
) -> None:
    """Killed after its output commit, the rewritten history and its state: the redo reads the
    history already rewritten, finds the same region by the state's versions, commits nothing
    twice and ends as a restatement run once."""
    re_export(lake, 10, 30, [rate_row("USD", 7, 25)])  # EUR's 09:20 rate gone, a USD one new
    killed = subprocess.run(
        [str(CHRONOLAKE), "restate", "rate_log", "--lake", str(lake.root),
         "--from", "2026-11-02T09:10", "--to", "2026-11-02T09:30"],
        env={**os.environ, FAULT_ENV: FaultPoint.AFTER_STATE.value}, cwd=REPO,
        capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT_S, check=False,
    )
    assert killed.returncode == -9, killed.stderr
    version = DeltaTable(str(output_path(lake.root, "priced"))).version()

    run_restatement(lake, "rate_log", start_ms=ms(10), end_ms=ms(30))

    assert DeltaTable(str(output_path(lake.root, "priced"))).version() == version
    assert rates_of(lake) == {1: 1, 2: 1, 3: 1, 4: 1, 5: 3, 6: 5, 7: 7, 8: 6, 9: 3}
    restated = contents(lake)
    assert restated == refreshed(lake)
