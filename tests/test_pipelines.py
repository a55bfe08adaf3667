"""Pipelines of derived tables: row kinds, change feeds and watermarks flow from table to table.

A temporal join over an updating probe emits each joined row with its probe row's kind;
its output is a Delta changelog table (change data feed on, state keyed by the probe's
key) whose commits record the output watermark; the next view reads it incrementally,
and a query reads it by name.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable
from deltatables import delete_rows, update_rows, write_commits

from chronolake import Catalog
from chronolake.errors import DefinitionError, SourceError
from chronolake.lake.layout import output_path
from chronolake.lake.stamps import WATERMARK_KEY, WATERMARK_MILLIS_KEY
from chronolake.runtime.derived import DerivedTable

pytestmark = pytest.mark.spark

BASE = datetime(2026, 11, 2, 9, 0)

DDL = """
CREATE TABLE orders (
  order_id BIGINT, currency STRING, amount BIGINT, order_time TIMESTAMP(3),
  WATERMARK FOR order_time AS order_time,
  PRIMARY KEY (order_id) NOT ENFORCED
) WITH ('path' = 'orders', 'changelog' = 'cdf');
CREATE TABLE rates (
  currency STRING, rate BIGINT, currency_time TIMESTAMP(3),
  WATERMARK FOR currency_time AS currency_time,
  PRIMARY KEY (currency) NOT ENFORCED
) WITH ('path' = 'rates', 'changelog' = 'cdf');
CREATE VIEW enriched AS
SELECT o.order_id, o.currency, o.amount, o.order_time, r.rate, o.amount * r.rate AS usd
FROM orders AS o LEFT JOIN rates FOR SYSTEM_TIME AS OF o.order_time AS r
ON o.currency = r.currency;
"""


def _at(minutes: float) -> datetime:
    return BASE + timedelta(minutes=minutes)


def _order(order_id: int, amount: int, minutes: float, currency: str = "EUR") -> dict:
    return {"order_id": order_id, "currency": currency, "amount": amount,
            "order_time": _at(minutes)}


def _rate(currency: str, rate: int, minutes: float) -> dict:
    return {"currency": currency, "rate": rate, "currency_time": _at(minutes)}


@pytest.fixture
def lake(tmp_path: Path, spark) -> Catalog:  # noqa: ANN001
    catalog = Catalog(tmp_path, spark)
    catalog.declare(DDL)
    write_commits(tmp_path / "rates", [[_rate("EUR", 2, 0), _rate("USD", 1, 0)]])
    write_commits(tmp_path / "orders", [[_order(1, 10, 5), _order(2, 20, 6)]])
    return catalog


def _state(catalog: Catalog, name: str) -> set[tuple]:
    rows = catalog.sql(f"SELECT order_id, amount, usd FROM {name}").collect()
    return {(r["order_id"], r["amount"], r["usd"]) for r in rows}


def _feed(path: Path, version: int) -> list[tuple]:
    """The output's change data feed at `version`, as Delta readers see it (delta-rs)."""
    feed = DeltaTable(str(path)).load_cdf(starting_version=version, ending_version=version)
    rows = pa.table(feed.read_all()).to_pylist()
    return sorted((r["_change_type"], r["order_id"], r["amount"]) for r in rows)


def _commit_info(path: Path, version: int) -> dict:
    log = path / "_delta_log" / f"{version:020d}.json"
    entries = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    return next(entry["commitInfo"] for entry in entries if "commitInfo" in entry)


def test_probe_updates_and_deletes_flow_into_the_output_changelog(lake: Catalog) -> None:
    root = lake.root
    write_commits(root / "rates", [[_rate("EUR", 3, 30)]])
    write_commits(root / "orders", [[_order(3, 30, 40)]])  # watermark min(40, 30) = 30
    first = DerivedTable(lake, "enriched").run()
    assert first.figures["inserts_out"] == 2
    assert _state(lake, "enriched") == {(1, 10, 20), (2, 20, 40)}

    update_rows(root / "orders", "order_id = 1", {"amount": "11"})
    delete_rows(root / "orders", "order_id = 2")
    write_commits(root / "rates", [[_rate("EUR", 4, 60)]])
    write_commits(root / "orders", [[_order(4, 40, 50)]])  # watermark 50: order 3 joins too
    second = DerivedTable(lake, "enriched").run()
    figures = second.figures
    assert (figures["update_befores_out"], figures["update_afters_out"]) == (1, 1)
    assert (figures["deletes_out"], figures["inserts_out"]) == (1, 2)
    # the update joins the rate valid at its order time; the delete retracts order 2
    assert _state(lake, "enriched") == {(1, 11, 22), (3, 30, 90), (4, 40, 120)}

    out = output_path(root, "enriched")
    assert DeltaTable(str(out)).metadata().configuration["delta.enableChangeDataFeed"] == "true"
    assert _feed(out, second.output_version) == [
        ("delete", 2, 20), ("insert", 3, 30), ("insert", 4, 40),
        ("update_postimage", 1, 11), ("update_preimage", 1, 10),
    ]


def test_a_retraction_runs_later_than_the_row_it_retracts(lake: Catalog) -> None:
    root = lake.root
    write_commits(root / "rates", [[_rate("USD", 1, 100)]])
    write_commits(root / "orders", [[_order(9, 1, 100, "USD")]])
    DerivedTable(lake, "enriched").run()
    for minutes in (110, 120):  # runs in between that do not touch order 1
        write_commits(root / "rates", [[_rate("USD", 1, minutes)]])
        write_commits(root / "orders", [[_order(int(minutes), 1, minutes, "USD")]])
        DerivedTable(lake, "enriched").run()
    delete_rows(root / "orders", "order_id = 1")
    result = DerivedTable(lake, "enriched").run()
    assert result.figures["deletes_out"] == 1
    assert 1 not in {row[0] for row in _state(lake, "enriched")}
    assert _feed(output_path(root, "enriched"), result.output_version) == [("delete", 1, 10)]


def test_each_commit_records_the_output_watermark(lake: Catalog) -> None:
    write_commits(lake.root / "rates", [[_rate("EUR", 3, 30)]])
    write_commits(lake.root / "orders", [[_order(3, 30, 40)]])
    result = DerivedTable(lake, "enriched").run()
    info = _commit_info(output_path(lake.root, "enriched"), result.output_version)
    # the join's output watermark is the minimum of its inputs' (orders 40 min, rates 30 min)
    expected = int(_at(30).replace(tzinfo=None).timestamp() * 1000)
    assert result.watermark_ms == int(info[WATERMARK_MILLIS_KEY])
    assert info[WATERMARK_KEY] == "2026-11-02T09:30:00.000Z"
    assert abs(result.watermark_ms - expected) < 24 * 3600 * 1000


def test_a_derived_table_is_queried_by_name(lake: Catalog) -> None:
    with pytest.raises(SourceError, match=r"never run.*chronolake run enriched"):
        lake.sql("SELECT * FROM enriched")
    write_commits(lake.root / "rates", [[_rate("EUR", 3, 30)]])
    write_commits(lake.root / "orders", [[_order(3, 30, 40)]])
    DerivedTable(lake, "enriched").run()
    assert lake.table("enriched").count() == 2
    lake.execute("CREATE VIEW big AS SELECT order_id, usd FROM enriched WHERE usd > 20")
    assert {r["order_id"] for r in lake.sql("SELECT * FROM big").collect()} == {2}


def test_a_view_that_drops_the_key_its_updates_need_is_refused(lake: Catalog) -> None:
    with pytest.raises(DefinitionError, match=r"drops 'order_id'.*add o\.order_id"):
        lake.execute(
            "CREATE VIEW keyless AS SELECT o.amount, r.rate FROM orders AS o "
            "JOIN rates FOR SYSTEM_TIME AS OF o.order_time AS r ON o.currency = r.currency"
        )
    assert "keyless" not in lake.names()
    spec = lake.spec("enriched")
    assert (spec.primary_key, spec.rowtime, spec.updating) == (("order_id",), "order_time", True)


def test_a_window_aggregates_a_temporal_joins_output(lake: Catalog) -> None:
    lake.execute(
        "CREATE VIEW hourly AS SELECT window_start, window_end, window_time, currency, "
        "COUNT(*) AS orders, SUM(usd) AS usd "
        "FROM TABLE(TUMBLE(TABLE enriched, DESCRIPTOR(order_time), INTERVAL '1' HOUR)) "
        "GROUP BY window_start, window_end, window_time, currency"
    )
    root = lake.root
    write_commits(root / "rates", [[_rate("EUR", 3, 70)]])
    write_commits(root / "orders", [[_order(3, 30, 65)]])  # watermark 65: hour 9 closes
    DerivedTable(lake, "enriched").run()
    hourly = DerivedTable(lake, "hourly").run()
    # the window's watermark is the join's recorded one, not re-derived from the rows
    assert hourly.watermark_ms == DerivedTable(lake, "enriched").store.latest().watermark
    rows = lake.sql("SELECT window_start, currency, orders, usd FROM hourly").collect()
    assert [(r["window_start"], r["currency"], r["orders"], r["usd"]) for r in rows] == [
        (_at(0), "EUR", 2, 60)
    ]
    spec = lake.spec("hourly")
    assert spec.rowtime == "window_time"
    assert spec.primary_key == ("window_start", "window_end", "window_time", "currency")
