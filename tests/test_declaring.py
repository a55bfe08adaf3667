"""Mistakes in DDL are caught when declared: a view's unknown tables and columns, and a
table whose declared types would change the values its Delta table holds. No Spark."""

from __future__ import annotations

import subprocess
import sys
from datetime import datetime
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from chronolake import Catalog
from chronolake.catalog.stored_types import mismatch
from chronolake.errors import DefinitionError
from chronolake.lake.layout import CATALOG_ROOT
from chronolake.sql import parse_table

PLATFORM_SQL = (Path(__file__).parents[1] / "assets" / "platform.sql").read_text()
CHRONOLAKE = Path(sys.executable).parent / "chronolake"

ORDERS = """
CREATE TABLE orders (
  order_id BIGINT,
  currency STRING,
  amount DECIMAL(10, 2),
  order_time TIMESTAMP(3),
  proc_time AS PROCTIME(),
  WATERMARK FOR order_time AS order_time - INTERVAL '5' SECOND,
  PRIMARY KEY (order_id) NOT ENFORCED
) WITH ('connector' = 'delta', 'path' = 'orders', 'changelog' = 'cdf')
"""


def declared(tmp_path: Path) -> Catalog:
    """A lake with the reference platform declared (no data: declaring needs none)."""
    catalog = Catalog(tmp_path)
    catalog.declare(PLATFORM_SQL)
    return catalog


def registered(tmp_path: Path) -> list[str]:
    return sorted(path.name for path in (tmp_path / CATALOG_ROOT).glob("*.json"))


# -- CREATE VIEW: unknown names --------------------------------------------------------------


BAD_VIEWS = [
    pytest.param(
        "SELECT o.order_id, o.amonut FROM orders AS o",
        "unknown column 'o.amonut'; did you mean 'amount'?", id="qualified-column"),
    pytest.param(
        "SELECT order_id, amonut FROM orders WHERE currency = 'EUR'",
        "unknown column 'amonut'; did you mean 'amount'?", id="unqualified-column"),
    pytest.param(
        "SELECT order_id FROM orders WHERE currncy = 'EUR'",
        "unknown column 'currncy'; did you mean 'currency'?", id="column-in-where"),
    pytest.param(
        "SELECT o.order_id FROM ordres AS o",
        "unknown table 'ordres'; declare it first .* did you mean 'orders'?", id="table"),
    pytest.param(
        "SELECT x.amount FROM orders AS o",
        "no relation in its FROM clause is named 'x'", id="qualifier"),
    pytest.param(
        "SELECT o.order_id, r.rate FROM orders AS o "
        "JOIN rates FOR SYSTEM_TIME AS OF o.order_time AS r ON o.currency = r.curency",
        "unknown column 'r.curency'; did you mean 'currency'?", id="temporal-join-on"),
    pytest.param(
        "SELECT o.order_id, r.rate FROM orders AS o "
        "JOIN rates FOR SYSTEM_TIME AS OF o.order_tme AS r ON o.currency = r.currency",
        "unknown column 'o.order_tme'; did you mean 'order_time'?", id="temporal-join-as-of"),
    pytest.param(
        "SELECT window_start, window_end, currency, SUM(amout) AS total "
        "FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(order_time), INTERVAL '10' MINUTES)) "
        "GROUP BY window_start, window_end, currency",
        "unknown column 'amout'; did you mean 'amount'?", id="window-aggregate"),
    pytest.param(
        "SELECT window_strt, window_end, COUNT(*) AS n "
        "FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(order_time), INTERVAL '10' MINUTES)) "
        "GROUP BY window_start, window_end",
        "unknown column 'window_strt'; did you mean 'window_start'?", id="window-column"),
    pytest.param(
        "SELECT window_start, window_end, COUNT(*) AS n "
        "FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(order_tme), INTERVAL '10' MINUTES)) "
        "GROUP BY window_start, window_end",
        r"unknown column 'order_tme' of 'orders' in TUMBLE\(TABLE orders, "
        r"DESCRIPTOR\(order_tme\), ...\); did you mean 'order_time'\?",
        id="window-descriptor"),
    pytest.param(
        "SELECT currency, rate FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY currncy "
        "ORDER BY currency_time DESC) AS rn FROM rates) WHERE rn = 1",
        "unknown column 'currncy'; did you mean 'currency'?", id="dedup-partition"),
    pytest.param(
        "SELECT currency, rte FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY currency "
        "ORDER BY currency_time DESC) AS rn FROM rates) WHERE rn = 1",
        "unknown column 'rte'; did you mean 'rate'?", id="dedup-outer"),
    pytest.param(
        "SELECT e.order_id, e.amount_usdd FROM orders_enriched AS e",
        "unknown column 'e.amount_usdd'; did you mean 'amount_usd'?", id="view-over-view"),
    pytest.param(
        "SELECT currency, total_amont FROM orders_per_currency",
        "unknown column 'total_amont'; did you mean 'total_amount'?", id="view-over-window"),
    pytest.param(
        "SELECT window_start, window_end, SUM(amount_usd) AS usd FROM TABLE(TUMBLE(TABLE "
        "orders_enriched, DESCRIPTOR(order_tim), INTERVAL '15' MINUTES)) "
        "GROUP BY window_start, window_end",
        "unknown column 'order_tim' of 'orders_enriched'.* did you mean 'order_time'?",
        id="window-over-view"),
]


@pytest.mark.parametrize(("query", "message"), BAD_VIEWS)
def test_a_view_reading_an_unknown_name_is_refused_when_declared(
    tmp_path: Path, query: str, message: str
) -> None:
    catalog = declared(tmp_path)
    before = registered(tmp_path)
    with pytest.raises(DefinitionError, match=f"view 'typo' .*{message}"):
        catalog.declare(f"CREATE VIEW typo AS {query}")
    assert registered(tmp_path) == before


def test_the_message_names_the_view_the_name_and_what_the_relation_has(tmp_path: Path) -> None:
    catalog = declared(tmp_path)
    with pytest.raises(DefinitionError) as error:
        catalog.declare("CREATE VIEW usd AS SELECT o.order_id, o.amonut FROM orders AS o")
    assert str(error.value) == (
        "view 'usd' reads unknown column 'o.amonut'; did you mean 'amount'?\n"
        "o (orders) has: order_id, currency, amount, order_time, proc_time"
    )


def test_a_typo_late_in_a_script_registers_nothing_of_it(tmp_path: Path) -> None:
    script = f"""{ORDERS};
        CREATE VIEW eur AS SELECT order_id, amount FROM orders WHERE currency = 'EUR';
        CREATE VIEW late AS SELECT order_id, order_tme FROM orders"""
    with pytest.raises(DefinitionError, match="did you mean 'order_time'"):
        Catalog(tmp_path).declare(script)
    assert registered(tmp_path) == []


VALID_VIEWS = [
    pytest.param("SELECT Order_ID, ORDERS.Amount FROM Orders", id="names-ignore-case"),
    pytest.param("SELECT order_id, proc_time FROM orders", id="computed-proctime"),
    pytest.param("SELECT currency, changelog_time FROM rates", id="metadata-column"),
    pytest.param(
        "SELECT window_start, window_end, window_time, w.currency, COUNT(*) AS n FROM "
        "TABLE(HOP(TABLE orders, DESCRIPTOR(order_time), INTERVAL '5' MINUTES, "
        "INTERVAL '10' MINUTES)) AS w GROUP BY window_start, window_end, window_time, w.currency",
        id="window-time-and-alias"),
    pytest.param(
        "SELECT o.order_id, r.rate FROM orders AS o "
        "JOIN latest_rates FOR SYSTEM_TIME AS OF o.order_time AS r ON o.currency = r.currency",
        id="join-a-dedup-view"),
    pytest.param(
        "SELECT currency, COUNT(*) AS n FROM orders GROUP BY currency HAVING n > 1 ORDER BY n",
        id="output-alias"),
    pytest.param(
        "WITH eur AS (SELECT order_id, amount FROM orders WHERE currency = 'EUR') "
        "SELECT eur.amount FROM eur", id="cte"),
    pytest.param(
        "SELECT o.order_id FROM orders AS o WHERE EXISTS "
        "(SELECT 1 FROM rates AS r WHERE r.currency = o.currency AND rate > amount)",
        id="correlated-subquery"),
    pytest.param("SELECT currency FROM orders UNION ALL SELECT currency FROM rates", id="union"),
    pytest.param(
        "SELECT TIMESTAMPDIFF(SECOND, order_time, proc_time) AS lag_s, "
        "EXTRACT(HOUR FROM order_time) AS hour_of_day FROM orders", id="time-units"),
    pytest.param("SELECT * FROM orders_enriched WHERE amount_usd > 0", id="star-over-a-view"),
    pytest.param(
        "SELECT x FROM (SELECT CAST(amount AS DOUBLE) FROM orders)", id="unnamed-item-unchecked"),
]


@pytest.mark.parametrize("query", VALID_VIEWS)
def test_valid_views_are_declared(tmp_path: Path, query: str) -> None:
    catalog = declared(tmp_path)
    catalog.declare(f"CREATE VIEW fine AS {query}")
    assert "fine" in catalog.names()


def test_a_nested_row_field_resolves(tmp_path: Path) -> None:
    catalog = Catalog(tmp_path)
    catalog.declare("""
        CREATE TABLE events (id BIGINT, event ROW<log_ts TIMESTAMP(3), kind STRING>)
        WITH ('connector' = 'delta', 'path' = 'events');
        CREATE VIEW kinds AS SELECT e.id, e.event.kind, event.log_ts FROM events AS e""")
    with pytest.raises(DefinitionError, match="unknown column 'e.evnt'; did you mean 'event'"):
        catalog.declare("CREATE VIEW bad AS SELECT e.evnt.kind FROM events AS e")


def test_cli_refuses_a_typo_with_exit_1_and_registers_nothing(tmp_path: Path) -> None:
    script = tmp_path / "typo.sql"
    script.write_text(
        f"{ORDERS};\nCREATE VIEW recent AS SELECT order_id, order_tme FROM orders;\n"
    )
    run = subprocess.run(
        [str(CHRONOLAKE), "sql", "--lake", str(tmp_path), "-f", str(script)],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert run.returncode == 1, run.stderr
    assert "view 'recent' reads unknown column 'order_tme'" in run.stderr
    assert "did you mean 'order_time'?" in run.stderr
    assert registered(tmp_path) == []


# -- CREATE TABLE over an existing Delta table -----------------------------------------------


def write_orders(tmp_path: Path) -> None:
    write_deltalake(tmp_path / "orders", pa.table({
        "order_id": pa.array([1], pa.int64()),
        "quantity": pa.array([3], pa.int32()),
        "currency": pa.array(["EUR"]),
        "amount": pa.array([Decimal("12.34")], pa.decimal128(10, 2)),
        "weight": pa.array([1.5], pa.float32()),
        "order_time": pa.array([datetime(2024, 1, 1, 12)], pa.timestamp("us")),
        "paid_at": pa.array([datetime(2024, 1, 1, 12)], pa.timestamp("us", tz="UTC")),
        "note": pa.array(["2024-01-01 12:00:00"]),
    }))


def orders_ddl(**types: str) -> str:
    columns = {
        "order_id": "BIGINT", "quantity": "INT", "currency": "STRING",
        "amount": "DECIMAL(10, 2)", "weight": "FLOAT", "order_time": "TIMESTAMP(3)",
        "paid_at": "TIMESTAMP_LTZ(3)", "note": "STRING",
    } | types
    listed = ",\n  ".join(f"{name} {kind}" for name, kind in columns.items())
    return f"CREATE TABLE orders (\n  {listed}\n) WITH ('connector' = 'delta', 'path' = 'orders')"


def test_a_declared_type_that_would_round_values_is_refused_naming_both(tmp_path: Path) -> None:
    write_orders(tmp_path)
    with pytest.raises(DefinitionError) as error:
        Catalog(tmp_path).declare(orders_ddl(amount="DOUBLE"))
    assert str(error.value) == (
        "CREATE TABLE orders: column amount is declared DOUBLE but the Delta table at orders "
        "stores decimal(10,2); DOUBLE would round its values. Declare it DECIMAL(10, 2) (or a "
        "wider DECIMAL)."
    )
    assert registered(tmp_path) == []


@pytest.mark.parametrize(("types", "message"), [
    ({"order_id": "INT"}, "order_id is declared INT .* stores bigint; INT cannot hold every "
                          "BIGINT value.* Declare it BIGINT"),
    ({"amount": "FLOAT"}, "amount is declared FLOAT .* stores decimal.*FLOAT would round"),
    ({"amount": "DECIMAL(5, 2)"}, r"DECIMAL\(5, 2\) holds 3 integer digits, fewer than the "
                                  "stored 8"),
    ({"amount": "DECIMAL(10, 1)"}, r"DECIMAL\(10, 1\) would round its values to 1 decimal"),
    ({"note": "TIMESTAMP(3)"}, r"note is declared TIMESTAMP\(3\) .* stores string; .*would "
                               r"read as NULL. Declare it STRING and convert it in a computed "
                               r"column, e.g. `note_value AS TO_TIMESTAMP\(note\)`"),
    ({"order_time": "DATE"}, "DATE would drop the time of day"),
    ({"weight": "INT"}, "INT is not an implicit widening of FLOAT"),
    ({"currency": "INT"}, "stores string"),
])
def test_declared_types_that_change_values_are_refused(
    tmp_path: Path, types: dict[str, str], message: str
) -> None:
    write_orders(tmp_path)
    with pytest.raises(DefinitionError, match=message):
        Catalog(tmp_path).declare(orders_ddl(**types))
    assert registered(tmp_path) == []


def test_flink_widenings_identical_types_and_nullability_are_allowed(tmp_path: Path) -> None:
    write_orders(tmp_path)
    catalog = Catalog(tmp_path)
    catalog.declare(orders_ddl())
    catalog.declare(orders_ddl(
        order_id="DECIMAL(19, 0) NOT NULL", quantity="BIGINT", amount="DECIMAL(12, 3)",
        weight="DOUBLE", order_time="TIMESTAMP_LTZ(3)", paid_at="TIMESTAMP(6)",
        note="VARCHAR(40)",
    ).replace("CREATE TABLE orders", "CREATE TABLE orders_wide"))
    assert catalog.names() == ["orders", "orders_wide"]


def test_a_table_without_data_yet_may_declare_any_type(tmp_path: Path) -> None:
    Catalog(tmp_path).declare(orders_ddl(amount="DOUBLE"))
    assert registered(tmp_path) == ["orders.json"]


def test_a_bad_table_late_in_a_script_registers_nothing(tmp_path: Path) -> None:
    write_orders(tmp_path)
    script = f"{ORDERS.replace('orders', 'fine_orders', 1)};\n{orders_ddl(order_id='INT')}"
    with pytest.raises(DefinitionError, match="order_id is declared INT"):
        Catalog(tmp_path).declare(script)
    assert registered(tmp_path) == []


def test_a_table_spec_registered_in_python_is_checked_too(tmp_path: Path) -> None:
    write_orders(tmp_path)
    with pytest.raises(DefinitionError, match="quantity is declared SMALLINT"):
        Catalog(tmp_path).register(parse_table(orders_ddl(quantity="SMALLINT")))


@pytest.mark.parametrize(("declared_type", "stored", "allowed"), [
    ("BIGINT", "TINYINT", True), ("SMALLINT", "BIGINT", False),
    ("DECIMAL(10, 0)", "INT", True), ("DECIMAL(9, 0)", "INT", False),
    ("DOUBLE", "BIGINT", True), ("DOUBLE", "FLOAT", True), ("FLOAT", "DOUBLE", False),
    ("DECIMAL(38, 10)", "DECIMAL(10, 2)", True), ("DOUBLE", "DECIMAL(38, 10)", False),
    ("INT", "DECIMAL(10, 2)", False), ("DECIMAL(10, 2)", "DOUBLE", False),
    ("TIMESTAMP(3)", "TIMESTAMP_LTZ(6)", True), ("TIMESTAMP(3)", "STRING", False),
    ("STRING", "BIGINT", False), ("BYTES", "BINARY", True), ("BOOLEAN", "BOOLEAN", True),
    ("ARRAY<BIGINT>", "ARRAY<INT>", True), ("ARRAY<INT>", "ARRAY<BIGINT>", False),
    ("MAP<STRING, DOUBLE>", "MAP<STRING, DECIMAL(10, 2)>", False),
    ("ROW<a BIGINT, b STRING>", "ROW<a INT, b STRING>", True),
    ("ROW<a BIGINT>", "ROW<a BIGINT, b STRING>", False),
])
def test_which_declared_type_reads_which_stored_type(
    declared_type: str, stored: str, allowed: bool
) -> None:
    assert (mismatch(declared_type, stored) is None) is allowed
