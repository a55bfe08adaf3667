"""Hypothesis properties of restatement: restate(range) equals a full refresh over the
rewritten source (docs/design.md, "Restatement"), for generated rewrites, on every row.

- Windows: raw orders summed per currency in 10-minute windows (`per_ten`), those in
  30-minute windows (`per_half_hour`), and the latest 10-minute window of each currency
  (`latest_window`, a deduplication).
- Versions: orders joined with the rate valid at their time (`priced`, a temporal join over
  a log of rate events), summed per half hour, and the rates' history; the rewrite replaces
  a range of the orders (the join's probe side) or of the rates (its build side).

Every history ends with rows at 10:29, outside any range, so the rewrite never moves a
watermark back: a refresh then closes what the restatement closed.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from _orders_and_rates import between, ms, order_row, rate_row
from deltalake import write_deltalake
from deltatables import as_table, table_rows, write_commits
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession
from test_restate_hops import DDL
from test_restate_versions import DDL as VERSIONS_DDL
from test_restate_versions import RATES_SCHEMA

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


def _contents(catalog: Catalog, views: tuple[str, ...] = VIEWS) -> dict[str, list[str]]:
    """Every view's rows, each as text, sorted."""
    return {view: sorted(str(sorted(row.items())) for row in
                         table_rows(output_path(catalog.root, view)).to_pylist())
            for view in views}


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


VERSIONED_VIEWS = ("priced", "rate_history", "usd_per_half_hour")
_RATE = st.tuples(st.integers(0, LAST_MINUTE - 1), st.sampled_from(["EUR", "USD", "GBP"]),
                  st.integers(1, 9))
"""A rate event: its minute after 09:00, its currency, its rate."""


def _rates(drawn: list[tuple[int, str, int]]) -> list[dict[str, Any]]:
    return [rate_row(currency, rate, minute) for minute, currency, rate in drawn]


@settings(max_examples=1, deadline=None, phases=[Phase.explicit, Phase.generate],
          suppress_health_check=list(HealthCheck))
@example(  # the EUR rate of the range corrected, a GBP one new: orders after it rejoin
    orders=[(5, "EUR", 2), (15, "EUR", 3), (25, "GBP", 1), (33, "EUR", 4)],
    rates=[(0, "EUR", 1), (12, "EUR", 2), (30, "EUR", 3), (20, "GBP", 4)],
    rewritten="rate_log", bounds=(10, 15), replacement=[(12, "EUR", 7), (23, "GBP", 5)],
)
@given(
    orders=st.lists(_ORDER, min_size=1, max_size=10),
    rates=st.lists(_RATE, max_size=8, unique_by=lambda rate: rate[:2]),
    rewritten=st.sampled_from(["orders", "rate_log"]),
    bounds=st.tuples(st.integers(0, 70), st.integers(1, 19)),
    replacement=st.lists(_RATE, max_size=4, unique_by=lambda rate: rate[:2]),
)
def test_restating_either_side_of_a_temporal_join_equals_a_full_refresh(
    spark: SparkSession, orders: list[tuple[int, str, int]], rates: list[tuple[int, str, int]],
    rewritten: str, bounds: tuple[int, int], replacement: list[tuple[int, str, int]],
) -> None:
    start, end = bounds[0], bounds[0] + bounds[1]
    inside = list({  # one rate a currency and minute, as drawn
        (start + minute % (end - start), currency): (start + minute % (end - start), currency,
                                                     value)
        for minute, currency, value in replacement}.values())
    with tempfile.TemporaryDirectory() as folder:
        catalog = Catalog(Path(folder), spark)
        catalog.declare(VERSIONS_DDL)
        first_orders = _orders(0, [*orders, (LAST_MINUTE, "EUR", 1)])
        write_commits(Path(folder) / "orders", [first_orders])
        write_commits(Path(folder) / "rate_log", [_rates([*rates, (LAST_MINUTE, "EUR", 1)])],
                      cdf=False)
        for view in VERSIONED_VIEWS:
            DerivedTable(catalog, view).run()
        if rewritten == "orders":
            rows = as_table(_orders(100, inside), as_table(first_orders).schema)
            predicate = between(start, end)
        else:
            rows, predicate = as_table(_rates(inside), RATES_SCHEMA), between(
                start, end, "currency_time")
        write_deltalake(str(Path(folder) / rewritten), rows, mode="overwrite",
                        predicate=predicate)

        run_restatement(catalog, rewritten, start_ms=ms(start), end_ms=ms(end))

        restated = _contents(catalog, VERSIONED_VIEWS)
        for view in VERSIONED_VIEWS:
            DerivedTable(catalog, view).run(full_refresh=True)
        assert restated == _contents(catalog, VERSIONED_VIEWS)
