"""The statements people reach for first (SHOW TABLES / VIEWS, DESCRIBE, SHOW CREATE, EXPLAIN)
and the sources' watermarks in `chronolake status`, on a small real lake (issue 44, items 2
and 5).

The lake: `orders` (append, a stored rowtime: its watermark comes from Delta's file
statistics), `rates` (versioned, a computed rowtime: its watermark comes from the last run
that read it), `enriched` (a temporal join of the two, run once) and `latest_orders` (a
keep-last deduplication, never run). Tests that need no Spark run in the fast tier; the
others share one run of `enriched` (a module-scoped lake on the session's Spark).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pytest
from click.testing import CliRunner, Result
from deltatables import write_commits
from pyspark.sql import SparkSession

from chronolake import Catalog, materialize_view
from chronolake.catalog.inspection import Shown
from chronolake.cli.app import main
from chronolake.cli.status import lake_status
from chronolake.errors import DefinitionError, UnknownNameError
from chronolake.schema import WatermarkSpec
from chronolake.watermarks.bounded import bounded_watermark

BASE = datetime(2026, 11, 2, 9, 0)
DDL = """
CREATE TABLE orders (
  id BIGINT, currency STRING, order_time TIMESTAMP(3),
  WATERMARK FOR order_time AS order_time - INTERVAL '5' SECOND
) WITH ('path' = 'orders', 'changelog' = 'append');
CREATE TABLE rates (
  currency STRING, rate BIGINT, rate_ts TIMESTAMP(3),
  rate_time AS CAST(rate_ts AS TIMESTAMP(3)),
  WATERMARK FOR rate_time AS rate_time - INTERVAL '1' SECOND,
  PRIMARY KEY (currency) NOT ENFORCED
) WITH ('path' = 'rates', 'changelog' = 'cdf');
CREATE VIEW enriched AS
SELECT o.id, o.order_time, r.rate FROM orders AS o
JOIN rates FOR SYSTEM_TIME AS OF o.order_time AS r ON o.currency = r.currency;
CREATE VIEW latest_orders AS
SELECT id, currency, order_time FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY currency ORDER BY order_time DESC) AS rownum
  FROM orders
) WHERE rownum = 1;
"""
TEMPORAL_JOIN = (
    "SELECT o.id, r.rate FROM orders AS o "
    "JOIN rates FOR SYSTEM_TIME AS OF o.order_time AS r ON o.currency = r.currency"
)
LAST_ORDER = BASE + timedelta(minutes=2)
LAST_RATE = BASE + timedelta(minutes=1, seconds=30)


def _build(root: Path) -> Catalog:
    write_commits(root / "orders", [
        [{"id": 1, "currency": "EUR", "order_time": BASE}],
        [{"id": 2, "currency": "EUR", "order_time": BASE + timedelta(minutes=1)},
         {"id": 3, "currency": "EUR", "order_time": LAST_ORDER}],
    ], cdf=False, schema=pa.schema([("id", pa.int64()), ("currency", pa.string()),
                                    ("order_time", pa.timestamp("us"))]))
    write_commits(root / "rates", [
        [{"currency": "EUR", "rate": 10, "rate_ts": BASE - timedelta(minutes=1)}],
        [{"currency": "EUR", "rate": 11, "rate_ts": LAST_RATE}],
    ], schema=pa.schema([("currency", pa.string()), ("rate", pa.int64()),
                         ("rate_ts", pa.timestamp("us"))]))
    catalog = Catalog(root)
    catalog.declare(DDL)
    return catalog


def _ms(at: datetime) -> int:
    return int(at.replace(tzinfo=UTC).timestamp() * 1000)


def _invoke(*args: str) -> Result:
    return CliRunner().invoke(main, list(args), env={"COLUMNS": "100"})


def _jsonl(output: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in output.splitlines() if line.startswith("{")]


# -- without Spark: refusals, source watermarks from file statistics -------------------------


def test_unknown_names_and_unsupported_details_are_refused_by_name(tmp_path: Path) -> None:
    catalog = _build(tmp_path / "lake")
    with pytest.raises(UnknownNameError, match=r"DESCRIBE order: .*did you mean 'orders'"):
        list(catalog.run_script("DESCRIBE order"))
    with pytest.raises(DefinitionError, match=r"'enriched' is a view, not a table"):
        list(catalog.run_script("SHOW CREATE TABLE enriched"))
    with pytest.raises(DefinitionError, match=r"ESTIMATED_COST .*EXPLAIN \[CHANGELOG_MODE\]"):
        list(catalog.run_script(f"EXPLAIN CHANGELOG_MODE, ESTIMATED_COST {TEMPORAL_JOIN}"))
    with pytest.raises(DefinitionError, match=r"SHOW FUNCTIONS is not supported.*SHOW TABLES"):
        list(catalog.run_script("SHOW FUNCTIONS"))
    with pytest.raises(DefinitionError, match=r"declare\(\) takes CREATE"):
        catalog.declare("SHOW TABLES")


def test_a_bounded_strategy_is_evaluated_on_a_maximum_and_any_other_is_not() -> None:
    def spec(expression: str) -> WatermarkSpec:
        return WatermarkSpec(rowtime="t", expression=expression)

    assert bounded_watermark(spec("t - INTERVAL '5' SECOND"), 60_000) == 55_000
    assert bounded_watermark(spec("t"), 60_000) == 60_000
    assert bounded_watermark(spec("t + INTERVAL '1' MINUTE - INTERVAL '2' MINUTE"), 0) == -60_000
    assert bounded_watermark(spec("CAST(t AS TIMESTAMP(3))"), 60_000) is None


def test_status_shows_a_stored_rowtime_source_watermark_from_file_statistics(
    tmp_path: Path,
) -> None:
    root = tmp_path / "lake"
    _build(root)
    now = datetime(2026, 11, 2, 10, 0, tzinfo=UTC)
    rows = {row.name: row for row in lake_status(root, now=now)}
    watermark = LAST_ORDER.replace(tzinfo=UTC) - timedelta(seconds=5)
    assert rows["orders"].watermark == watermark
    assert rows["orders"].watermark_from == "file statistics"
    assert rows["orders"].lag_seconds == (now - watermark).total_seconds()
    assert rows["rates"].watermark is None and rows["rates"].watermark_from is None  # no run yet

    result = _invoke("status", "--lake", str(root), "--format", "json")
    assert result.exit_code == 0, result.output
    orders = next(row for row in _jsonl(result.output) if row["name"] == "orders")
    assert orders["watermark"] == "2026-11-02T09:01:55Z"
    assert orders["watermark_from"] == "file statistics"
    assert isinstance(orders["lag_seconds"], float) and orders["lag_seconds"] > 0
    table = _invoke("status", "--lake", str(root))
    assert "source watermarks: orders from file statistics" in table.output
    assert "lag " in table.output


# -- with Spark: one run of the temporal join ----------------------------------------------


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory, spark: SparkSession) -> Path:
    root = tmp_path_factory.mktemp("statements") / "lake"
    _build(root)
    materialize_view(Catalog(root, spark), "enriched")
    return root


@pytest.fixture(scope="module")
def catalog(lake: Path, spark: SparkSession) -> Catalog:
    return Catalog(lake, spark)


def test_show_tables_lists_kinds_rowtimes_and_watermarks_after_a_run(lake: Path) -> None:
    result = _invoke("sql", "--lake", str(lake), "-e", "SHOW TABLES", "--format", "jsonl")
    assert result.exit_code == 0, result.output
    rows = {row["name"]: row for row in _jsonl(result.output)}
    assert sorted(rows) == ["enriched", "latest_orders", "orders", "rates"]
    assert rows["orders"] == {
        "name": "orders", "what": "table", "kind": "regular", "rowtime": "order_time",
        "watermark": "2026-11-02 09:01:55", "watermark_from": "file statistics",
    }
    assert rows["rates"]["kind"] == "versioned"
    assert rows["rates"]["watermark"] == "2026-11-02 09:01:29"
    assert rows["rates"]["watermark_from"] == "last run of view enriched"
    assert rows["enriched"]["what"] == "view"
    assert rows["enriched"]["watermark"] is not None
    assert rows["enriched"]["watermark_from"] == "its last run"
    assert rows["latest_orders"]["watermark"] is None  # never run


def test_show_views_lists_only_views(catalog: Catalog) -> None:
    [(statement, frame)] = catalog.run_script("SHOW VIEWS")
    assert statement == "SHOW VIEWS"
    assert sorted(row.name for row in frame.collect()) == ["enriched", "latest_orders"]


def test_describe_a_table_and_derived_views(catalog: Catalog) -> None:
    [(_, rates)] = catalog.run_script("DESCRIBE rates")
    rows = {row.name: row for row in rates.collect()}
    assert rows["currency"].key == "PRI(currency)" and rows["currency"].null is False
    assert rows["currency"].changelog == "upsert (currency)"
    assert rows["rate_time"].type == "TIMESTAMP(3) *ROWTIME*"
    assert rows["rate_time"].extras == "AS CAST(rate_ts AS TIMESTAMP(3))"
    assert rows["rate_time"].watermark == "rate_time - INTERVAL '1' SECOND"

    [(_, enriched), (_, latest)] = catalog.run_script("DESCRIBE enriched; DESC latest_orders")
    enriched_rows = enriched.collect()
    assert [row.name for row in enriched_rows] == ["id", "order_time", "rate"]
    assert enriched_rows[0].changelog == "append"
    assert {row.key for row in enriched_rows} == {None}
    latest_rows = {row.name: row for row in latest.collect()}
    assert latest_rows["id"].changelog == "upsert (currency)"
    assert latest_rows["currency"].key == "PRI(currency)"
    assert latest_rows["order_time"].type.endswith("*ROWTIME*")


def test_show_create_table_round_trips(catalog: Catalog, tmp_path: Path) -> None:
    [(_, shown)] = catalog.run_script("SHOW CREATE TABLE rates")
    assert isinstance(shown, Shown) and shown.text.startswith("CREATE TABLE rates (")
    [(_, view)] = catalog.run_script("SHOW CREATE VIEW latest_orders")
    assert isinstance(view, Shown)
    again = Catalog(tmp_path / "again")
    registered = [result for _, result in again.run_script(shown.text)]
    assert registered == [catalog.spec("rates")]
    orders = catalog.run_script("SHOW CREATE TABLE orders")
    [(_, orders_ddl)] = orders
    assert isinstance(orders_ddl, Shown)
    again.declare(orders_ddl.text + view.text)
    assert again.spec("latest_orders") == catalog.spec("latest_orders")


def test_explain_a_temporal_join_shows_chronolakes_plan_and_sparks(lake: Path) -> None:
    result = _invoke("sql", "--lake", str(lake), "-e", f"EXPLAIN CHANGELOG_MODE {TEMPORAL_JOIN}")
    assert result.exit_code == 0, result.output
    text = result.output
    assert "query: temporal join (joins each probe row" in text
    assert "output: append, changelogMode=[I], key none" in text
    assert "state: probe rows waiting for the watermark" in text
    assert ("orders: table, regular, rowtime order_time, watermark 2026-11-02 09:01:55.000 "
            "(file statistics)") in text
    assert "rates: table, versioned, rowtime rate_time, watermark 2026-11-02 09:01:29.000 " \
        "(last run of view enriched)" in text
    assert "changes: upsert (currency), changelogMode=[I,UB,UA,D]" in text
    assert "== Spark physical plan ==" in text
    assert text.index("== chronolake plan ==") < text.index("== Spark physical plan ==")


def test_explain_a_query_of_a_view_shows_the_view_as_its_input(catalog: Catalog) -> None:
    [(_, shown)] = catalog.run_script("EXPLAIN SELECT * FROM enriched")
    assert isinstance(shown, Shown)
    lines = shown.text.splitlines()
    assert lines[1].startswith("query: plain view")
    assert any(line.startswith("    enriched: temporal join") for line in lines)
    assert any(line.startswith("        orders: table") for line in lines)
    assert "changelogMode" not in shown.text
    jsonl = _invoke("sql", "--lake", str(catalog.root), "-e", "EXPLAIN SELECT * FROM enriched",
                    "--format", "jsonl")
    assert json.loads(jsonl.output.splitlines()[-1])["text"].startswith("== chronolake plan")


def test_status_shows_a_computed_rowtime_source_watermark_from_the_last_run(lake: Path) -> None:
    rows = {row.name: row for row in lake_status(lake)}
    assert rows["rates"].watermark == LAST_RATE.replace(tzinfo=UTC) - timedelta(seconds=1)
    assert rows["rates"].watermark_from == "last run of view enriched"
    result = _invoke("status", "--lake", str(lake), "--format", "json")
    rates = next(row for row in _jsonl(result.output) if row["name"] == "rates")
    assert rates["watermark_from"] == "last run of view enriched"
    assert rates["lag_seconds"] > 0
