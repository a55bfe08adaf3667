"""A hypothesis property of restatement through three hops: restate(range) equals a full
refresh over the rewritten source (docs/design.md, "Restatement"), for generated rewrites.

The pipeline: raw orders summed per currency in 10-minute windows (`per_ten`), those in
30-minute windows (`per_half_hour`), and the latest 10-minute window of each currency
(`latest_window`, a deduplication). Every history ends with an order at 10:29, outside any
range, so the rewrite never moves the watermark back: a refresh then closes the windows the
restatement closed, and the two agree on every row.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from _orders_and_rates import between, ms, order_row
from deltalake import write_deltalake
from deltatables import as_table, table_rows, write_commits
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession
from test_restate_hops import DDL

from chronolake import Catalog
from chronolake.lake.layout import output_path
from chronolake.runtime.derived import DerivedTable
from chronolake.runtime.restate_plan import run_restatement

LATEST_WINDOW = """
CREATE VIEW latest_window AS
SELECT currency, amount, orders, rowtime FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY currency ORDER BY rowtime DESC) AS rownum
  FROM per_ten)
WHERE rownum = 1;
"""
VIEWS = ("per_ten", "per_half_hour", "latest_window")
LAST_MINUTE = 89
"""The minute after 09:00 of the last order of every history, outside every range."""

_ORDER = st.tuples(st.integers(0, LAST_MINUTE - 1), st.sampled_from(["EUR", "USD", "GBP"]),
                   st.integers(1, 9))
"""An order: its minute after 09:00, its currency, its amount."""


def _orders(first_id: int, drawn: list[tuple[int, str, int]]) -> list[dict[str, Any]]:
    return [order_row(first_id + i, amount, minute, currency)
            for i, (minute, currency, amount) in enumerate(drawn)]


def _contents(catalog: Catalog) -> dict[str, list[str]]:
    """Every view's rows, each as text, sorted."""
    return {view: sorted(str(sorted(row.items())) for row in
                         table_rows(output_path(catalog.root, view)).to_pylist())
            for view in VIEWS}


@settings(max_examples=1, deadline=None, phases=[Phase.explicit, Phase.generate],
          suppress_health_check=list(HealthCheck))
@example(  # a currency's only orders rewritten away, another's latest window moved
    history=[(5, "USD", 3), (15, "EUR", 4), (25, "EUR", 2), (44, "GBP", 7)],
    bounds=(10, 30), replacement=[(12, "GBP", 1)],
)
@given(
    history=st.lists(_ORDER, min_size=1, max_size=14),
    bounds=st.tuples(st.integers(0, 70), st.integers(1, 19)),
    replacement=st.lists(_ORDER, max_size=6),
)
def test_restating_a_range_through_three_hops_equals_a_full_refresh(
    spark: SparkSession, history: list[tuple[int, str, int]], bounds: tuple[int, int],
    replacement: list[tuple[int, str, int]],
) -> None:
    start, end = bounds[0], bounds[0] + bounds[1]
    inside = [(start + minute % (end - start), currency, amount)
              for minute, currency, amount in replacement]
    with tempfile.TemporaryDirectory() as folder:
        catalog = Catalog(Path(folder), spark)
        catalog.declare(DDL + LATEST_WINDOW)
        raw_orders = Path(folder) / "raw_orders"
        orders = _orders(0, [*history, (LAST_MINUTE, "EUR", 1)])
        write_commits(raw_orders, [orders], cdf=False)
        for view in VIEWS:
            DerivedTable(catalog, view).run()
        write_deltalake(str(raw_orders), as_table(_orders(100, inside), as_table(orders).schema),
                        mode="overwrite", predicate=between(start, end))

        run_restatement(catalog, "raw_orders", start_ms=ms(start), end_ms=ms(end))

        restated = _contents(catalog)
        for view in VIEWS:
            DerivedTable(catalog, view).run(full_refresh=True)
        assert restated == _contents(catalog)
