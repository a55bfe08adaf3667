"""The catalog on a real demo lake: DDL in, Flink SQL queries out, persisted across processes."""

from __future__ import annotations

import json
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from chronolake import Catalog
from chronolake.demo.lake import build_demo_lake
from chronolake.errors import DefinitionError, SourceError
from chronolake.runtime.derived import DerivedTable
from chronolake.schema import TableKind, TableSpec, ViewKind, ViewSpec
from chronolake.sql.view_kinds import view_kind

ROOT = Path(__file__).resolve().parent.parent
PLATFORM_DDL = (ROOT / "assets" / "platform.sql").read_text()


@pytest.fixture(scope="module")
def demo_lake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    lake = tmp_path_factory.mktemp("lake")
    build_demo_lake(lake)
    return lake


@pytest.fixture(scope="module")
def catalog(demo_lake: Path, spark: SparkSession) -> Catalog:
    catalog = Catalog(demo_lake, spark)
    list(catalog.run_script(PLATFORM_DDL))
    return catalog


def test_platform_ddl_registers_tables_and_views(catalog: Catalog) -> None:
    assert catalog.names() == [
        "latest_rates", "orders", "orders_enriched", "orders_enriched_latest",
        "orders_per_currency", "rates", "rates_hybrid", "revenue_per_currency",
    ]
    rates = catalog.spec("rates")
    assert isinstance(rates, TableSpec) and rates.kind is TableKind.VERSIONED
    assert catalog.spec("orders").kind is TableKind.VERSIONED  # a CDC table keyed by order_id
    latest = catalog.spec("latest_rates")
    assert isinstance(latest, ViewSpec)
    assert latest.primary_key == ("currency",) and latest.kind is TableKind.VERSIONED


def test_each_views_kind_is_recorded_when_it_is_registered(
    catalog: Catalog, demo_lake: Path, spark: SparkSession
) -> None:
    kinds = {name: catalog.spec(name).view_kind for name in catalog.names()
             if isinstance(catalog.spec(name), ViewSpec)}
    assert kinds == {
        "latest_rates": ViewKind.DEDUPLICATION, "orders_enriched": ViewKind.TEMPORAL_JOIN,
        "orders_enriched_latest": ViewKind.TEMPORAL_JOIN,
        "orders_per_currency": ViewKind.WINDOW_AGGREGATE,
        "revenue_per_currency": ViewKind.WINDOW_AGGREGATE,
    }
    entry = demo_lake / "_chronolake" / "catalog" / "orders_enriched.json"
    assert json.loads(entry.read_text())["view"]["view_kind"] == "temporal_join"
    older = json.loads(entry.read_text())  # an entry written before kinds were recorded
    del older["view"]["view_kind"]
    copy = Catalog(demo_lake / "older", spark)
    (copy.root.path / "_chronolake" / "catalog").mkdir(parents=True)
    (copy.root.path / "_chronolake" / "catalog" / entry.name).write_text(json.dumps(older))
    assert view_kind(copy.spec("orders_enriched")) is ViewKind.TEMPORAL_JOIN


def test_changelog_table_reads_as_its_state_at_the_latest_version(catalog: Catalog) -> None:
    rows = catalog.sql("SELECT currency, rate FROM rates ORDER BY currency").collect()
    assert [(r.currency, r.rate) for r in rows] == [
        ("CHF", Decimal("1.1300000000")),
        ("EUR", Decimal("1.0900000000")),
        ("JPY", Decimal("0.0069000000")),
        ("USD", Decimal("1.0000000000")),
    ]  # GBP was deleted, EUR updated twice, JPY once


def test_computed_and_metadata_columns_are_applied(catalog: Catalog) -> None:
    rates = catalog.table("rates")
    assert rates.columns == ["currency", "rate", "currency_time", "changelog_time"]
    assert dict(rates.dtypes)["changelog_time"] == "timestamp"
    assert rates.where("changelog_time IS NULL").count() == 0
    orders = catalog.table("orders")
    assert dict(orders.dtypes)["proc_time"] == "timestamp"
    assert dict(orders.dtypes)["order_time"] == "timestamp_ntz"
    assert orders.count() == 1999  # 2000 orders, one cancelled


def test_deduplication_view_is_queryable_once_it_ran(catalog: Catalog) -> None:
    with pytest.raises(SourceError, match="never run.*chronolake run latest_rates"):
        catalog.sql("SELECT * FROM latest_rates")
    result = DerivedTable(catalog, "latest_rates").run()
    rows = catalog.sql("SELECT currency, rate FROM latest_rates ORDER BY currency").collect()
    assert [(r.currency, r.rate) for r in rows] == [
        ("CHF", Decimal("1.1300000000")),
        ("EUR", Decimal("1.0900000000")),
        ("JPY", Decimal("0.0069000000")),
        ("USD", Decimal("1.0000000000")),
    ]  # the latest rate of each currency; GBP's latest event deleted it
    assert result.figures["inserts_out"] == 4


def test_unknown_table_in_a_query_names_it(catalog: Catalog) -> None:
    with pytest.raises(DefinitionError, match="unknown table 'nope'.*CREATE TABLE"):
        catalog.sql("SELECT * FROM nope")


def test_bad_script_changes_nothing(catalog: Catalog) -> None:
    script = "CREATE TABLE t1 (a INT) WITH ('path' = 't1');\nCREATE TABLE t2 (a INT b) WITH ();"
    with pytest.raises(DefinitionError, match="line 2, column 24: expected '\\)', found 'b'"):
        list(catalog.run_script(script))
    assert "t1" not in catalog.names()


def _chronolake(*args: str) -> subprocess.CompletedProcess[str]:
    executable = Path(sys.executable).with_name("chronolake")
    return subprocess.run([str(executable), *args], capture_output=True, text=True, timeout=300)


def test_cli_sees_what_another_process_registered(catalog: Catalog, tmp_path: Path) -> None:
    script = tmp_path / "query.sql"
    script.write_text(
        "SELECT currency, rate, currency_time FROM rates WHERE currency IN ('EUR', 'USD') "
        "ORDER BY currency;"
    )
    result = _chronolake("sql", "--lake", str(catalog.root), "-f", str(script), "--format", "jsonl")
    assert result.returncode == 0, result.stderr
    assert [json.loads(line) for line in result.stdout.splitlines()] == [
        {"currency": "EUR", "rate": "1.0900000000", "currency_time": "2026-11-02 09:40:00"},
        {"currency": "USD", "rate": "1.0000000000", "currency_time": "2026-11-02 09:00:00"},
    ]


def test_cli_failure_exits_1_with_the_error_on_stderr(demo_lake: Path, tmp_path: Path) -> None:
    script = tmp_path / "bad.sql"
    script.write_text("CREATE TABLE broken (x INT, WATERMARK FOR y AS y) WITH ('path' = 'b');")
    result = _chronolake("sql", "--lake", str(demo_lake), "-f", str(script))
    assert result.returncode == 1
    assert "WATERMARK FOR y" in result.stderr and "does not exist" in result.stderr
    assert result.stdout == ""


def test_a_query_keeps_the_users_own_temporary_view_of_the_same_name(
    catalog: Catalog, spark: SparkSession
) -> None:
    """A notebook's own `rates` view survives a query of the lake's `rates`, and the query
    reads the lake's table and leaves no view of its own behind."""
    spark.createDataFrame([("mine",)], "note STRING").createOrReplaceTempView("rates")
    before = {t.name for t in spark.catalog.listTables() if t.isTemporary}
    lake_rates = catalog.sql("SELECT COUNT(*) AS n FROM rates").first()
    assert lake_rates is not None and lake_rates.n == 4  # the latest rate of four currencies
    assert [tuple(row) for row in spark.table("rates").collect()] == [("mine",)]
    assert {t.name for t in spark.catalog.listTables() if t.isTemporary} == before
    spark.catalog.dropTempView("rates")


def test_a_query_reads_a_table_twice_and_through_a_cte_with_braces_in_a_literal(
    catalog: Catalog,
) -> None:
    eur = catalog.sql("SELECT COUNT(*) AS n FROM rates WHERE currency = 'EUR'").first()
    assert eur is not None and eur.n >= 1
    joined = catalog.sql(
        "WITH eur AS (SELECT currency FROM rates WHERE currency = 'EUR') "
        "SELECT a.currency, '{rates}' AS braces, COUNT(*) AS n FROM rates AS a "
        "JOIN rates AS b ON a.currency = b.currency "
        "WHERE a.currency IN (SELECT currency FROM eur) GROUP BY a.currency"
    ).collect()
    assert [tuple(row) for row in joined] == [("EUR", "{rates}", eur.n * eur.n)]
