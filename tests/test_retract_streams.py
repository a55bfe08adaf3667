"""Retract streams without a key (issue 44, item 3), on real Delta tables.

A probe changelog without a PRIMARY KEY whose updates and deletes arrive as -U/+U/-D is
joined FOR SYSTEM_TIME AS OF a versioned table, as Flink's `TemporalRowTimeJoinOperator`
joins it: each joined row takes its probe row's kind, and a -U/-D retracts one output row
equal to its own values (the output is a multiset: two equal rows are two rows). The
output is stored by a hidden row identity, so Delta's change feed shows one `delete` per
retracted row, and readers never see the identity.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable
from deltatables import delete_rows, update_rows, write_commits
from pyspark.sql import SparkSession

from chronolake import Catalog
from chronolake.errors import DefinitionError
from chronolake.lake.layout import output_path
from chronolake.lake.multisets import ROW_IDENTITY
from chronolake.runtime.derived import DerivedTable

pytestmark = pytest.mark.spark

BASE = datetime(2026, 11, 2, 9, 0)

_DDL = """
CREATE TABLE orders (
  id BIGINT, currency STRING, amount BIGINT, order_time TIMESTAMP(3),
  WATERMARK FOR order_time AS order_time
) WITH ('path' = 'orders', 'changelog' = 'op-column', 'changelog.op-column' = 'op');
CREATE TABLE rates (
  currency STRING, rate BIGINT, currency_time TIMESTAMP(3),
  PRIMARY KEY (currency) NOT ENFORCED,
  WATERMARK FOR currency_time AS currency_time
) WITH ('path' = 'rates', 'changelog' = 'append');
CREATE VIEW converted AS
SELECT o.id, o.currency, o.amount * r.rate AS total, o.order_time
FROM orders AS o
JOIN rates FOR SYSTEM_TIME AS OF o.order_time AS r ON o.currency = r.currency;
"""
_ORDERS = pa.schema([("op", pa.string()), ("id", pa.int64()), ("currency", pa.string()),
                     ("amount", pa.int64()), ("order_time", pa.timestamp("us"))])
_RATES = pa.schema([("currency", pa.string()), ("rate", pa.int64()),
                    ("currency_time", pa.timestamp("us"))])


def _order(op: str, id_: int, currency: str, amount: int, minutes: int) -> dict[str, object]:
    return {"op": op, "id": id_, "currency": currency, "amount": amount,
            "order_time": BASE + timedelta(minutes=minutes)}


def _rate(currency: str, rate: int, minutes: int) -> dict[str, object]:
    return {"currency": currency, "rate": rate, "currency_time": BASE + timedelta(minutes=minutes)}


def _contents(catalog: Catalog) -> Counter[tuple[object, ...]]:
    """The view's rows as a multiset (id, currency, total)."""
    rows = catalog.sql("SELECT * FROM converted").collect()  # a handful of test rows
    assert all(ROW_IDENTITY not in row.asDict() for row in rows)
    return Counter((row["id"], row["currency"], row["total"]) for row in rows)


def _feed(path: Path, version: int) -> Counter[tuple[object, ...]]:
    """Delta's change feed of one commit of the output, as (change type, id, total)."""
    feed = DeltaTable(str(path)).load_cdf(starting_version=version, ending_version=version)
    table = pa.table(feed.read_all()).to_pylist()
    return Counter((row["_change_type"], row["id"], row["total"]) for row in table)


@pytest.mark.slow
def test_a_probe_without_a_key_retracts_one_equal_row_per_retraction(
    tmp_path: Path, spark: SparkSession
) -> None:
    """Flink's result, run by run: the joined rows take their probe rows' kinds; a -D of one
    of two equal orders takes back one of the two equal joined rows; an addition and its
    retraction in one run cancel; a retraction with nothing equal left is dropped."""
    catalog = Catalog(tmp_path, spark)
    catalog.declare(_DDL)
    view = catalog.spec("converted")
    assert (view.primary_key, view.updating) == ((), True)
    orders, rates, out = tmp_path / "orders", tmp_path / "rates", output_path(tmp_path, "converted")
    write_commits(rates, [[_rate("EUR", 2, 0), _rate("USD", 10, 0)], [_rate("EUR", 4, 60)]],
                  schema=_RATES, cdf=False)
    write_commits(orders, [[
        _order("+I", 1, "EUR", 5, 1), _order("+I", 1, "EUR", 5, 1),  # two equal orders
        _order("+I", 2, "USD", 3, 2),
    ]], schema=_ORDERS, cdf=False)
    DerivedTable(catalog, "converted").run()
    assert _contents(catalog) == Counter({(1, "EUR", 10): 2, (2, "USD", 30): 1})

    write_commits(orders, [[
        _order("-D", 1, "EUR", 5, 1),  # one of the two equal orders
        _order("-U", 2, "USD", 3, 2), _order("+U", 2, "USD", 4, 2),
        _order("+I", 3, "EUR", 1, 3),
    ]], schema=_ORDERS, cdf=False)
    DerivedTable(catalog, "converted").run()
    assert _contents(catalog) == Counter({(1, "EUR", 10): 1, (2, "USD", 40): 1, (3, "EUR", 2): 1})
    version = DeltaTable(str(out)).version()
    assert _feed(out, version) == Counter({
        ("delete", 1, 10): 1, ("delete", 2, 30): 1, ("insert", 2, 40): 1, ("insert", 3, 2): 1,
    })

    write_commits(orders, [
        [_order("+I", 4, "USD", 1, 4)],
        [_order("-D", 4, "USD", 1, 4)],  # takes back the addition of the same run
        [_order("-D", 9, "EUR", 7, 4)],  # nothing equal was ever emitted: dropped
        [_order("-D", 1, "EUR", 5, 1)],  # the last of the two equal orders
    ], schema=_ORDERS, cdf=False)
    DerivedTable(catalog, "converted").run()
    assert _contents(catalog) == Counter({(2, "USD", 40): 1, (3, "EUR", 2): 1})
    assert _feed(out, DeltaTable(str(out)).version()) == Counter({("delete", 1, 10): 1})


@pytest.mark.slow
def test_a_change_data_feed_without_a_key_retracts_each_updated_and_deleted_row(
    tmp_path: Path, spark: SparkSession
) -> None:
    """Delta's own UPDATE and DELETE on a probe without a key: its change feed's pre-images
    and deletes retract one joined row each (a DELETE of two equal rows, two), and a full
    refresh rebuilds the same multiset."""
    catalog = Catalog(tmp_path, spark)
    catalog.declare(_DDL.replace(
        "'changelog' = 'op-column', 'changelog.op-column' = 'op'", "'changelog' = 'cdf'"))
    orders, out = tmp_path / "orders", output_path(tmp_path, "converted")
    write_commits(tmp_path / "rates", [[_rate("EUR", 2, 0), _rate("USD", 10, 0)],
                                       [_rate("EUR", 4, 60)]], schema=_RATES, cdf=False)
    placed = [{k: v for k, v in row.items() if k != "op"} for row in (
        _order("+I", 1, "EUR", 5, 1), _order("+I", 1, "EUR", 5, 1), _order("+I", 2, "USD", 3, 2))]
    write_commits(orders, [placed], schema=_ORDERS.remove(0))
    DerivedTable(catalog, "converted").run()
    update_rows(orders, "id = 2", {"amount": "4"})
    delete_rows(orders, "id = 1")
    DerivedTable(catalog, "converted").run()
    assert _contents(catalog) == Counter({(2, "USD", 40): 1})
    assert _feed(out, DeltaTable(str(out)).version()) == Counter({
        ("delete", 1, 10): 2, ("delete", 2, 30): 1, ("insert", 2, 40): 1,
    })
    DerivedTable(catalog, "converted").run(full_refresh=True)
    assert _contents(catalog) == Counter({(2, "USD", 40): 1})


@pytest.mark.slow
def test_a_retract_stream_feeds_a_window_and_is_refused_where_a_key_is_needed(
    tmp_path: Path, spark: SparkSession
) -> None:
    """Downstream, the output is a changelog without a key: a window aggregate takes back a
    retracted row while its window is open (Flink's window aggregate over a retract stream);
    a temporal join cannot version it, and says what to do instead."""
    catalog = Catalog(tmp_path, spark)
    catalog.declare(_DDL)
    catalog.declare("""
    CREATE VIEW totals AS
    SELECT window_start, window_end, SUM(total) AS total, COUNT(*) AS orders
    FROM TABLE(TUMBLE(TABLE converted, DESCRIPTOR(order_time), INTERVAL '10' MINUTES))
    GROUP BY window_start, window_end;
    """)
    orders, rates = tmp_path / "orders", tmp_path / "rates"
    write_commits(rates, [[_rate("EUR", 2, 0)], [_rate("EUR", 4, 60)]], schema=_RATES, cdf=False)
    write_commits(orders, [[_order("+I", 1, "EUR", 5, 1), _order("+I", 2, "EUR", 1, 2),
                            _order("+I", 2, "EUR", 1, 2)]], schema=_ORDERS, cdf=False)
    DerivedTable(catalog, "converted").run()
    DerivedTable(catalog, "totals").run()  # the window [09:00, 09:10) is open
    write_commits(orders, [[_order("-D", 2, "EUR", 1, 2), _order("+I", 3, "EUR", 1, 30)]],
                  schema=_ORDERS, cdf=False)
    DerivedTable(catalog, "converted").run()
    DerivedTable(catalog, "totals").run()  # the watermark reached 09:30: it fired
    fired = catalog.sql("SELECT total, orders FROM totals").collect()  # one window
    assert [tuple(row) for row in fired] == [(12, 2)]

    catalog.declare("""
    CREATE TABLE payments (
      id BIGINT, paid_at TIMESTAMP(3), WATERMARK FOR paid_at AS paid_at
    ) WITH ('path' = 'payments', 'changelog' = 'append');
    CREATE VIEW paid AS
    SELECT p.id, c.total FROM payments AS p
    JOIN converted FOR SYSTEM_TIME AS OF p.paid_at AS c ON p.id = c.id;
    """)
    write_commits(tmp_path / "payments", [[{"id": 1, "paid_at": BASE}]], cdf=False)
    with pytest.raises(DefinitionError, match=(
        r"(?s)view 'converted' has none: its output is a changelog without a key.*"
        r"declare PRIMARY KEY \(\.\.\.\) NOT ENFORCED on the table 'converted' reads"
    )):
        DerivedTable(catalog, "paid").run()


def test_the_old_refusal_of_a_probe_without_a_key_is_gone(tmp_path: Path) -> None:
    """Declaring the join needs no Spark: the view is registered as a retract stream."""
    catalog = Catalog(tmp_path)
    catalog.declare(_DDL)
    view = catalog.spec("converted")
    assert (view.primary_key, view.updating, view.rowtime) == ((), True, "order_time")
