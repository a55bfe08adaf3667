"""The plan of a restatement: the derived tables downstream of the rewritten source in
dependency order, and the versions each direct consumer reads, checked against the range.

A real lake: raw orders (an append table without the change data feed) read by a window
view and by a temporal join with rates, whose output a second window view reads. The
orders are at 09:05, 09:15, 09:25 and 09:35; the range restated is [09:10, 09:30).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from _orders_and_rates import ORDERS_AND_RATES, RAW_ORDERS, at, ms, order_row, rate_row
from deltalake import DeltaTable, write_deltalake
from deltatables import as_table, write_commits
from pyspark.sql import SparkSession

from chronolake import Catalog
from chronolake.errors import RestateRangeError, RunError
from chronolake.lake.layout import output_path
from chronolake.runtime.attempt import begin_writing
from chronolake.runtime.derived import DerivedTable
from chronolake.runtime.restate_plan import plan_restatement, run_restatement
from chronolake.runtime.result import RunStatus


def _joined(view: str, source: str) -> str:
    """A view of `source`'s orders with the rate valid at their time."""
    return f"""
CREATE VIEW {view} AS
SELECT o.order_id, o.amount * r.rate AS usd, o.order_time
FROM {source} AS o LEFT JOIN rates FOR SYSTEM_TIME AS OF o.order_time AS r
ON o.currency = r.currency;"""


DDL = ORDERS_AND_RATES + RAW_ORDERS + """
CREATE VIEW per_window AS
SELECT window_start, window_end, SUM(amount) AS amount, COUNT(*) AS orders
FROM TABLE(TUMBLE(TABLE raw_orders, DESCRIPTOR(order_time), INTERVAL '10' MINUTES))
GROUP BY window_start, window_end;""" + _joined("raw_enriched", "raw_orders") + """
CREATE VIEW hourly_usd AS
SELECT window_start, window_end, SUM(usd) AS usd
FROM TABLE(TUMBLE(TABLE raw_enriched, DESCRIPTOR(order_time), INTERVAL '1' HOUR))
GROUP BY window_start, window_end;""" + _joined("enriched", "orders")
ORDERS = [order_row(1, 10, 5), order_row(2, 20, 15), order_row(3, 30, 25), order_row(4, 40, 35)]
IN_RANGE = "order_time >= '2026-11-02 09:10:00' AND order_time < '2026-11-02 09:30:00'"
DOWNSTREAM = ("raw_enriched", "hourly_usd", "per_window")  # hourly_usd after what it reads


RANGE = {"start_ms": ms(10), "end_ms": ms(30)}


@pytest.fixture
def lake(tmp_path: Path, spark: SparkSession) -> Catalog:
    """Raw orders at version 0 and rates; no view has run."""
    catalog = Catalog(tmp_path, spark)
    catalog.declare(DDL)
    write_commits(tmp_path / "rates", [[rate_row("EUR", 2, 0)]])
    write_commits(tmp_path / "raw_orders", [ORDERS], cdf=False)
    return catalog


def test_the_plan_lists_the_hops_in_order_and_each_direct_consumers_versions(
    lake: Catalog,
) -> None:
    raw_orders = Path(str(lake.root)) / "raw_orders"
    DerivedTable(lake, "per_window").run()                           # consumes version 0
    write_commits(raw_orders, [[order_row(5, 50, 20)]], cdf=False)   # version 1, in range
    DerivedTable(lake, "raw_enriched").run()                         # consumes version 1
    DerivedTable(lake, "hourly_usd").run()
    # the range re-exported: order 2's amount corrected, order 3 gone (version 2)
    write_deltalake(str(raw_orders), as_table([order_row(2, 21, 15), order_row(5, 50, 20)]),
                    mode="overwrite", predicate=IN_RANGE)

    plan = plan_restatement(lake, "RAW_ORDERS", **RANGE)

    assert (plan.table, plan.start_ms, plan.end_ms) == ("raw_orders", ms(10), ms(30))
    assert plan.end_version == 2  # read once: every consumer reads up to it
    assert plan.views == DOWNSTREAM  # enriched reads orders, not raw_orders
    assert set(plan.consumers) == {"per_window", "raw_enriched"}  # hourly_usd reads a view
    per_window, raw_enriched = plan.consumers["per_window"], plan.consumers["raw_enriched"]
    assert (per_window.after_version, per_window.end_version) == (0, 2)
    assert (raw_enriched.after_version, raw_enriched.end_version) == (1, 2)
    # per_window has not read order 5 (appended, then kept) yet: added for it, not for
    # raw_enriched; both see order 2 before (removed) and after (added), and order 3 removed
    assert (per_window.removed_rows, per_window.added_rows) == (2, 2)
    assert (raw_enriched.removed_rows, raw_enriched.added_rows) == (2, 1)


def test_views_that_have_not_run_are_hops_without_versions(lake: Catalog) -> None:
    # nothing consumed: every view's first run reads the rewritten source as it is
    write_deltalake(str(Path(str(lake.root)) / "raw_orders"), as_table(ORDERS[1:2]),
                    mode="overwrite", predicate=IN_RANGE)
    plan = plan_restatement(lake, "raw_orders", **RANGE)
    assert (plan.views, plan.consumers) == (DOWNSTREAM, {})


def test_a_rewrite_outside_the_range_is_refused_for_the_consumer_that_would_read_it(
    lake: Catalog,
) -> None:
    raw_orders = Path(str(lake.root)) / "raw_orders"
    DerivedTable(lake, "per_window").run()
    write_commits(raw_orders, [[order_row(6, 60, 45)]], cdf=False)  # 09:45, outside
    DerivedTable(lake, "raw_enriched").run()  # read it: for this one only the range changed
    write_deltalake(str(raw_orders), as_table(ORDERS[1:2]), mode="overwrite",
                    predicate=IN_RANGE)
    with pytest.raises(RestateRangeError, match=(
        r"table 'raw_orders': versions 1\.\.2 removed 0 and added 1 row\(s\) outside the range "
        r".* 1 of them with event time 2026-11-02T09:45:00\.000Z"
    )):
        plan_restatement(lake, "raw_orders", **RANGE)


CLICKS = """
CREATE TABLE clicks (
  order_id BIGINT, currency STRING, click_time TIMESTAMP(3), proc_time AS PROCTIME(),
  WATERMARK FOR click_time AS click_time
) WITH ('path' = 'clicks', 'changelog' = 'append');
"""


def _click(lake: Catalog) -> None:
    """One click, at 09:15."""
    write_commits(Path(str(lake.root)) / "clicks",
                  [[{"order_id": 1, "currency": "EUR", "click_time": at(15)}]], cdf=False)


PROCESSING_TIME_VIEWS = {
    # a temporal join as of processing time
    "clicks_now": """
    SELECT c.order_id, r.rate FROM clicks AS c
    LEFT JOIN rates FOR SYSTEM_TIME AS OF c.proc_time AS r ON c.currency = r.currency""",
    # the source has an event-time watermark, but the kept row is the first one processed
    "first_clicks": """
    SELECT order_id, currency, click_time FROM (
      SELECT *, ROW_NUMBER() OVER (PARTITION BY order_id ORDER BY proc_time ASC) AS rownum
      FROM clicks
    ) WHERE rownum = 1""",
}


@pytest.mark.parametrize("view", PROCESSING_TIME_VIEWS)
def test_a_view_whose_rows_depend_on_processing_time_is_left_as_it_is_by_name(
    lake: Catalog, view: str
) -> None:
    """No recompute of the range reproduces its rows: the restatement leaves it, says so,
    and restates the rest; its next run reads the rewrite as new changes."""
    lake.declare(f"{CLICKS}CREATE VIEW {view} AS {PROCESSING_TIME_VIEWS[view]};")
    _click(lake)
    assert plan_restatement(lake, "clicks", **RANGE).left == ()  # not run: nothing held
    DerivedTable(lake, view).run()
    output = DeltaTable(str(output_path(lake.root, view))).version()
    assert plan_restatement(lake, "clicks", **RANGE).left == (view,)
    [left] = run_restatement(lake, "clicks", **RANGE)
    assert (left.table, left.status) == (view, RunStatus.LEFT)
    assert left.message.startswith("left as it is: its rows depend on processing time")
    assert DeltaTable(str(output_path(lake.root, view))).version() == output


def test_a_view_whose_last_run_was_interrupted_is_refused_until_it_runs(lake: Catalog) -> None:
    raw_orders = Path(str(lake.root)) / "raw_orders"
    DerivedTable(lake, "per_window").run()                           # run 1 consumes version 0
    write_commits(raw_orders, [[order_row(5, 50, 20)]], cdf=False)   # version 1
    killed = DerivedTable(lake, "per_window")
    plan = killed.prepare()
    assert plan is not None
    begin_writing(killed.store, killed.name, plan)  # what run 2 left, killed after its intent
    write_deltalake(str(raw_orders), as_table(ORDERS[1:2]), mode="overwrite",
                    predicate=IN_RANGE)                               # version 2
    with pytest.raises(RunError, match=(
        r"cannot restate 'raw_orders': run 'per_window' first: its run 2 was interrupted .* "
        r"run 'per_window' \(`chronolake run per_window`\), then restate again"
    )):
        plan_restatement(lake, "raw_orders", **RANGE)
    DerivedTable(lake, "per_window").run()  # finishes run 2: up to version 1, as it fixed
    assert plan_restatement(lake, "raw_orders", **RANGE).consumers["per_window"].after_version == 1
