"""An inner interval join over a retract stream (issue 44, item 3), on real Delta tables.

Orders without a PRIMARY KEY whose updates and deletes arrive as -U/+U/-D are interval-joined
to append-only payments, as Flink's retract semantics extend to the join: a pair takes its
rows' kinds, so a -U/-D of an order emits a -D of each pair its addition made, and the
output is a multiset (two equal pairs are two rows) stored by a hidden row identity; a
retracted order leaves the join's state, so a later payment no longer meets it. A full
refresh rebuilds the multiset the incremental runs reached. In a LEFT join an order is padded
when its interval closes with no live match (its matches less those retracted), and an
order retracted after its padded row was emitted deletes that row.
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
from chronolake.lake.layout import output_path
from chronolake.lake.multisets import ROW_IDENTITY
from chronolake.runtime.derived import DerivedTable

BASE = datetime(2026, 11, 2, 9, 0)

_TABLES = """
CREATE TABLE orders (
  id BIGINT, amount BIGINT, order_time TIMESTAMP(3),
  WATERMARK FOR order_time AS order_time
) WITH ('path' = 'orders', 'changelog' = 'op-column', 'changelog.op-column' = 'op');
CREATE TABLE payments (
  order_id BIGINT, paid BIGINT, pay_time TIMESTAMP(3),
  WATERMARK FOR pay_time AS pay_time
) WITH ('path' = 'payments', 'changelog' = 'append');
"""
_VIEW = """
CREATE VIEW paid AS
SELECT o.id, o.amount, p.paid, o.order_time
FROM orders AS o {join} payments AS p
  ON o.id = p.order_id AND p.pay_time BETWEEN o.order_time AND o.order_time + INTERVAL '1' HOUR;
"""
_ORDERS = pa.schema([("op", pa.string()), ("id", pa.int64()), ("amount", pa.int64()),
                     ("order_time", pa.timestamp("us"))])
_PAYMENTS = pa.schema([("order_id", pa.int64()), ("paid", pa.int64()),
                       ("pay_time", pa.timestamp("us"))])


def _order(op: str, id_: int, amount: int, minutes: int) -> dict[str, object]:
    return {"op": op, "id": id_, "amount": amount, "order_time": BASE + timedelta(minutes=minutes)}


def _payment(order_id: int, paid: int, minutes: int) -> dict[str, object]:
    return {"order_id": order_id, "paid": paid, "pay_time": BASE + timedelta(minutes=minutes)}


def _contents(catalog: Catalog) -> Counter[tuple[object, ...]]:
    """The view's rows as a multiset (id, amount, paid)."""
    rows = catalog.sql("SELECT * FROM paid").collect()  # a handful of test rows
    assert all(ROW_IDENTITY not in row.asDict() for row in rows)
    return Counter((row["id"], row["amount"], row["paid"]) for row in rows)


def _feed(path: Path) -> Counter[tuple[object, ...]]:
    """Delta's change feed of the output's last commit, as (change type, id, amount, paid)."""
    version = DeltaTable(str(path)).version()
    feed = DeltaTable(str(path)).load_cdf(starting_version=version, ending_version=version)
    table = pa.table(feed.read_all()).to_pylist()
    return Counter((row["_change_type"], row["id"], row["amount"], row["paid"]) for row in table)


@pytest.mark.spark
@pytest.mark.slow
def test_a_retraction_takes_back_one_pair_and_leaves_the_joins_state(
    tmp_path: Path, spark: SparkSession
) -> None:
    """Run by run, the multiset Flink's retract semantics give; a full refresh gives it too."""
    catalog = Catalog(tmp_path, spark)
    catalog.declare(_TABLES + _VIEW.format(join="JOIN"))
    view = catalog.spec("paid")
    assert (view.primary_key, view.updating) == ((), True)
    orders, payments = tmp_path / "orders", tmp_path / "payments"
    out = output_path(tmp_path, "paid")
    write_commits(orders, [[
        _order("+I", 1, 5, 0), _order("+I", 1, 5, 0),  # two equal orders: two equal pairs
        _order("+I", 2, 3, 0), _order("+I", 3, 7, 0), _order("+I", 4, 2, 0),
    ]], schema=_ORDERS, cdf=False)
    write_commits(payments, [[_payment(1, 50, 10), _payment(2, 30, 10)]], schema=_PAYMENTS,
                  cdf=False)
    DerivedTable(catalog, "paid").run()
    assert _contents(catalog) == Counter({(1, 5, 50): 2, (2, 3, 30): 1})

    write_commits(orders, [[
        _order("-D", 1, 5, 0),  # one of the two equal orders: one of the two equal pairs
        _order("-U", 2, 3, 0), _order("+U", 2, 4, 0),  # the pair follows the update
        _order("-D", 3, 7, 0),  # no payment yet: it only leaves the state
    ]], schema=_ORDERS, cdf=False)
    write_commits(payments, [[_payment(1, 51, 12)]], schema=_PAYMENTS, cdf=False)
    result = DerivedTable(catalog, "paid").run()
    # pairs made (not their retractions): order 2's update, and the new payment with the two
    # orders 1 of the state (one taken back in the same run by the order's -D)
    assert result.figures["matched_pairs"] == 3
    assert _contents(catalog) == Counter({(1, 5, 50): 1, (1, 5, 51): 1, (2, 4, 30): 1})
    assert _feed(out) == Counter({
        ("delete", 1, 5, 50): 1, ("delete", 2, 3, 30): 1, ("insert", 2, 4, 30): 1,
        ("insert", 1, 5, 51): 1,  # the order left meets the new payment once
    })

    write_commits(payments, [[_payment(3, 70, 20)]], schema=_PAYMENTS, cdf=False)
    write_commits(orders, [[_order("-D", 4, 2, 0)]], schema=_ORDERS, cdf=False)
    write_commits(payments, [[_payment(4, 20, 20)]], schema=_PAYMENTS, cdf=False)
    result = DerivedTable(catalog, "paid").run()
    # order 3 was retracted a run before its payment, order 4 in the run of its payment
    assert _contents(catalog) == Counter({(1, 5, 50): 1, (1, 5, 51): 1, (2, 4, 30): 1})
    assert result.figures["left_state_rows"] == 2  # one order 1 and order 2's update

    DerivedTable(catalog, "paid").run(full_refresh=True)
    assert _contents(catalog) == Counter({(1, 5, 50): 1, (1, 5, 51): 1, (2, 4, 30): 1})


@pytest.mark.spark
@pytest.mark.slow
def test_retractions_of_both_inputs_in_one_run_take_back_each_pair_once(
    tmp_path: Path, spark: SparkSession
) -> None:
    """Payments read from Delta's change data feed retract too: a DELETE of two equal payments
    takes back both their pairs; an order and the payment it met, both retracted in one run,
    take back their one pair once, and the payment's update meets no order any more."""
    catalog = Catalog(tmp_path, spark)
    catalog.declare(_TABLES.replace("'changelog' = 'append'", "'changelog' = 'cdf'")
                    + _VIEW.format(join="JOIN"))
    orders, payments = tmp_path / "orders", tmp_path / "payments"
    out = output_path(tmp_path, "paid")
    write_commits(orders, [[_order("+I", 1, 5, 0), _order("+I", 2, 3, 0)]], schema=_ORDERS,
                  cdf=False)
    write_commits(payments, [[_payment(1, 50, 10), _payment(1, 50, 10), _payment(2, 20, 10)]],
                  schema=_PAYMENTS)
    DerivedTable(catalog, "paid").run()
    assert _contents(catalog) == Counter({(1, 5, 50): 2, (2, 3, 20): 1})

    delete_rows(payments, "order_id = 1")
    update_rows(payments, "order_id = 2", {"paid": "21"})
    write_commits(orders, [[_order("-D", 2, 3, 0)]], schema=_ORDERS, cdf=False)
    DerivedTable(catalog, "paid").run()
    assert _contents(catalog) == Counter()
    assert _feed(out) == Counter({("delete", 1, 5, 50): 2, ("delete", 2, 3, 20): 1})

    write_commits(payments, [[_payment(1, 60, 15)]], schema=_PAYMENTS)
    DerivedTable(catalog, "paid").run()  # order 1 is still in state; the deleted payments not
    assert _contents(catalog) == Counter({(1, 5, 60): 1})
    DerivedTable(catalog, "paid").run(full_refresh=True)
    assert _contents(catalog) == Counter({(1, 5, 60): 1})


@pytest.mark.spark
@pytest.mark.slow
def test_a_left_joins_retracted_row_is_padded_only_if_it_was_and_its_pad_is_taken_back(
    tmp_path: Path, spark: SparkSession
) -> None:
    """Orders retract on the preserved side of a LEFT join: an order retracted before its
    interval closes is never padded; one retracted after its padded row was emitted deletes
    that row; an order updated away from its payment retracts the pair and its new version is
    padded when its interval closes. A full refresh reaches the same multiset."""
    catalog = Catalog(tmp_path, spark)
    catalog.declare(_TABLES + _VIEW.format(join="LEFT JOIN"))
    assert catalog.spec("paid").updating
    orders, payments = tmp_path / "orders", tmp_path / "payments"
    out = output_path(tmp_path, "paid")
    write_commits(orders, [[
        _order("+I", 1, 5, 0), _order("+I", 2, 3, 0), _order("+I", 3, 7, 0),
        _order("+I", 4, 2, 0),
    ]], schema=_ORDERS, cdf=False)
    write_commits(payments, [[_payment(4, 40, 10)]], schema=_PAYMENTS, cdf=False)
    DerivedTable(catalog, "paid").run()
    assert _contents(catalog) == Counter({(4, 2, 40): 1})  # the others' intervals are open

    write_commits(orders, [[
        _order("-D", 1, 5, 0),  # retracted while its interval is open: never padded
        _order("-U", 4, 2, 0), _order("+U", 5, 2, 0),  # its pair retracted, the new one alone
        _order("+I", 9, 1, 70),
    ]], schema=_ORDERS, cdf=False)
    write_commits(payments, [[_payment(9, 90, 70)]], schema=_PAYMENTS, cdf=False)
    result = DerivedTable(catalog, "paid").run()  # the watermark, 70 min, closes orders at 0
    assert result.figures["padded_rows"] == 3
    assert _contents(catalog) == Counter({
        (2, 3, None): 1, (3, 7, None): 1, (5, 2, None): 1, (9, 1, 90): 1})
    assert _feed(out) == Counter({
        ("delete", 4, 2, 40): 1, ("insert", 2, 3, None): 1, ("insert", 3, 7, None): 1,
        ("insert", 5, 2, None): 1, ("insert", 9, 1, 90): 1,
    })

    write_commits(orders, [[_order("-D", 3, 7, 0)]], schema=_ORDERS, cdf=False)
    DerivedTable(catalog, "paid").run()  # order 3 was padded: its retraction deletes the pad
    assert _contents(catalog) == Counter({(2, 3, None): 1, (5, 2, None): 1, (9, 1, 90): 1})
    assert _feed(out) == Counter({("delete", 3, 7, None): 1})

    DerivedTable(catalog, "paid").run(full_refresh=True)
    assert _contents(catalog) == Counter({(2, 3, None): 1, (5, 2, None): 1, (9, 1, 90): 1})


@pytest.mark.spark
@pytest.mark.slow
def test_a_left_joins_row_whose_only_match_is_retracted_is_padded_when_its_interval_closes(
    tmp_path: Path, spark: SparkSession
) -> None:
    """Payments retract on the null-padded side of a LEFT join (Delta's change data feed): an
    order whose only payment is deleted loses the pair and is padded once its interval
    closes; an order with a payment left is not. A full refresh reaches the same multiset."""
    catalog = Catalog(tmp_path, spark)
    catalog.declare(_TABLES.replace("'changelog' = 'append'", "'changelog' = 'cdf'").replace(
        "'changelog' = 'op-column', 'changelog.op-column' = 'op'", "'changelog' = 'append'",
    ) + _VIEW.format(join="LEFT JOIN"))
    assert catalog.spec("paid").updating
    orders, payments = tmp_path / "orders", tmp_path / "payments"
    out = output_path(tmp_path, "paid")
    appended = pa.schema([field for field in _ORDERS if field.name != "op"])
    write_commits(orders, [[
        {k: v for k, v in _order("+I", 1, 5, 0).items() if k != "op"},
        {k: v for k, v in _order("+I", 2, 3, 0).items() if k != "op"},
    ]], schema=appended, cdf=False)
    write_commits(payments, [[_payment(1, 50, 10), _payment(2, 20, 10), _payment(2, 21, 20)]],
                  schema=_PAYMENTS)
    DerivedTable(catalog, "paid").run()
    assert _contents(catalog) == Counter({(1, 5, 50): 1, (2, 3, 20): 1, (2, 3, 21): 1})

    delete_rows(payments, "order_id = 1 OR paid = 20")
    DerivedTable(catalog, "paid").run()  # the pairs go; order 1's interval is still open
    assert _contents(catalog) == Counter({(2, 3, 21): 1})
    assert _feed(out) == Counter({("delete", 1, 5, 50): 1, ("delete", 2, 3, 20): 1})

    write_commits(orders, [[{k: v for k, v in _order("+I", 9, 1, 70).items() if k != "op"}]],
                  schema=appended, cdf=False)
    write_commits(payments, [[_payment(9, 90, 70)]], schema=_PAYMENTS)
    DerivedTable(catalog, "paid").run()  # order 1 closes with no live match: padded
    assert _contents(catalog) == Counter({(1, 5, None): 1, (2, 3, 21): 1, (9, 1, 90): 1})
    assert _feed(out) == Counter({("insert", 1, 5, None): 1, ("insert", 9, 1, 90): 1})

    DerivedTable(catalog, "paid").run(full_refresh=True)
    assert _contents(catalog) == Counter({(1, 5, None): 1, (2, 3, 21): 1, (9, 1, 90): 1})
