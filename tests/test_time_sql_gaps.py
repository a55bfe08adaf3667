"""Three gaps in the time SQL that exists (issue 22, item 7), each checked on real Delta tables.

- a keep-first deduplication view is a versioned table, as in Flink: the build side of an
  event-time temporal join;
- `WATERMARK FOR c AS expr` is refused when `expr`'s type differs from `c`'s, as Flink
  refuses it;
- a hybrid source's snapshot keeps Delta's commit order, so a processing-time temporal join
  against it joins each key's latest arrival.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pytest
from deltatables import write_commits
from pyspark.sql import SparkSession

from chronolake import Catalog
from chronolake.errors import DefinitionError
from chronolake.runtime.derived import DerivedTable
from chronolake.sql.ddl import parse_table

pytestmark = pytest.mark.spark


BASE = datetime(2026, 11, 2, 9, 0)


def _at(minutes: float) -> datetime:
    return BASE + timedelta(minutes=minutes)


def _emitted(catalog: Catalog, view: str) -> list[tuple]:
    return sorted(
        (tuple(row) for row in catalog.sql(f"SELECT id, rate FROM {view}").collect()),
        key=lambda row: (row[0], row[1] is None, row[1] or 0),
    )


# -- a keep-first deduplication view is versioned ------------------------------------------------

_FIRST_DDL = """
CREATE TABLE orders (
  id BIGINT, currency STRING, order_time TIMESTAMP(3),
  WATERMARK FOR order_time AS order_time
) WITH ('path' = 'orders', 'changelog' = 'append');
CREATE TABLE rate_log (
  currency STRING, rate BIGINT, currency_time TIMESTAMP(3),
  WATERMARK FOR currency_time AS currency_time - INTERVAL '10' MINUTE
) WITH ('path' = 'rate_log', 'changelog' = 'append');
CREATE VIEW first_rates AS
SELECT currency, rate, currency_time FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY currency ORDER BY currency_time ASC) AS rownum
  FROM rate_log
) WHERE rownum = 1;
CREATE VIEW enriched AS
SELECT o.id, r.rate FROM orders AS o
LEFT JOIN first_rates FOR SYSTEM_TIME AS OF o.order_time AS r ON o.currency = r.currency;
"""
_RATES = pa.schema([("currency", pa.string()), ("rate", pa.int64()),
                    ("currency_time", pa.timestamp("us"))])
_TIMED_ORDERS = pa.schema([("id", pa.int64()), ("currency", pa.string()),
                           ("order_time", pa.timestamp("us"))])


def _rate(currency: str, rate: int, minutes: float) -> list[dict[str, object]]:
    return [{"currency": currency, "rate": rate, "currency_time": _at(minutes)}]


def _order(id_: int, currency: str, minutes: float) -> list[dict[str, object]]:
    return [{"id": id_, "currency": currency, "order_time": _at(minutes)}]


@pytest.mark.slow
def test_a_keep_first_deduplication_is_the_build_side_of_an_event_time_join(
    tmp_path: Path, spark: SparkSession
) -> None:
    """Flink 2.x keeps each key's earliest on-time row (`RowTimeDeduplicateKeepFirstRowFunction`):
    one version per key, valid from its time on. Rates arrive 10 minutes behind."""
    catalog = Catalog(tmp_path, spark)
    catalog.declare(_FIRST_DDL)
    view = catalog.spec("first_rates")
    assert (view.primary_key, view.rowtime, view.updating) == (("currency",), "currency_time",
                                                               False)
    rates, orders = tmp_path / "rate_log", tmp_path / "orders"
    write_commits(rates, [_rate("EUR", 2, 10)], schema=_RATES, cdf=False)  # watermark 09:00
    write_commits(orders, [_order(1, "EUR", 3)], schema=_TIMED_ORDERS, cdf=False)
    first = DerivedTable(catalog, "enriched").run()
    assert first.figures["rows_out"] == 0  # order 1 waits for the rates' watermark

    write_commits(rates, [
        _rate("EUR", 1, 5),  # earlier, on time (watermark 09:00): replaces EUR 2 before 09:10
        _rate("USD", 7, 20),
        _rate("USD", 8, 30),  # later: the first row stays
        _rate("EUR", 9, 1),  # earlier but late (watermark 09:20): dropped
        _rate("CHF", 1, 100),  # moves the rates' watermark to 10:30
    ], schema=_RATES, cdf=False)
    write_commits(orders, [_order(2, "EUR", 5), _order(3, "EUR", 12), _order(4, "USD", 25),
                           _order(5, "USD", 40), _order(6, "GBP", 30), _order(7, "CHF", 95)],
                  schema=_TIMED_ORDERS, cdf=False)
    DerivedTable(catalog, "enriched").run()
    # EUR 1 is valid from 09:05 on (also at 09:12, after EUR 2's time); order 7 (09:35) waits
    assert _emitted(catalog, "enriched") == [
        (1, None), (2, 1), (3, 1), (4, 7), (5, 7), (6, None)]


_PROC_FIRST_DDL = """
CREATE TABLE orders (id BIGINT, currency STRING, proc_time AS PROCTIME())
WITH ('path' = 'orders', 'changelog' = 'append');
CREATE TABLE rate_feed (currency STRING, rate BIGINT, proc_time AS PROCTIME())
WITH ('path' = 'rate_feed', 'changelog' = 'append');
CREATE VIEW first_rates AS
SELECT currency, rate FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY currency ORDER BY proc_time ASC) AS rownum
  FROM rate_feed
) WHERE rownum = 1;
CREATE VIEW enriched AS
SELECT o.id, r.rate FROM orders AS o
LEFT JOIN first_rates FOR SYSTEM_TIME AS OF o.proc_time AS r ON o.currency = r.currency;
"""
_FEED = pa.schema([("currency", pa.string()), ("rate", pa.int64())])
_PROC_ORDERS = pa.schema([("id", pa.int64()), ("currency", pa.string())])


@pytest.mark.slow
def test_a_keep_first_deduplication_on_processing_time_keeps_the_first_arrival(
    tmp_path: Path, spark: SparkSession
) -> None:
    catalog = Catalog(tmp_path, spark)
    catalog.declare(_PROC_FIRST_DDL)
    feed, orders = tmp_path / "rate_feed", tmp_path / "orders"
    write_commits(feed, [[{"currency": "EUR", "rate": 1}], [{"currency": "EUR", "rate": 2}]],
                  schema=_FEED, cdf=False)
    write_commits(orders, [[{"id": 1, "currency": "EUR"}]], schema=_PROC_ORDERS, cdf=False)
    DerivedTable(catalog, "enriched").run()
    write_commits(feed, [[{"currency": "EUR", "rate": 3}]], schema=_FEED, cdf=False)
    write_commits(orders, [[{"id": 2, "currency": "EUR"}]], schema=_PROC_ORDERS, cdf=False)
    DerivedTable(catalog, "enriched").run()  # the first row, kept in state, stays
    assert _emitted(catalog, "enriched") == [(1, 1), (2, 1)]


# -- a watermark expression returns its time field's type ---------------------------------------

_DELTA = "WITH ('path' = 't')"


@pytest.mark.parametrize(
    ("columns", "output", "field"),
    [
        ("ts TIMESTAMP(3), WATERMARK FOR ts AS CAST(ts AS TIMESTAMP_LTZ(3))",
         "TIMESTAMP_LTZ(3)", "TIMESTAMP(3)"),
        ("ts TIMESTAMP_LTZ(3), WATERMARK FOR ts AS CAST(ts AS TIMESTAMP(3)) - INTERVAL '1' SECOND",
         "TIMESTAMP(3)", "TIMESTAMP_LTZ(3)"),
        ("ts TIMESTAMP(3), n BIGINT, WATERMARK FOR ts AS n", "BIGINT", "TIMESTAMP(3)"),
        ("ts TIMESTAMP(3), s STRING, WATERMARK FOR ts AS s", "STRING", "TIMESTAMP(3)"),
        ("ts TIMESTAMP(3), WATERMARK FOR ts AS CAST(ts AS TIMESTAMP)", "TIMESTAMP(6)",
         "TIMESTAMP(3)"),  # Flink allows precisions 0 to 3 only
        ("ct TIMESTAMP_LTZ(3) METADATA FROM 'commit_timestamp' VIRTUAL, ts TIMESTAMP(3), "
         "WATERMARK FOR ts AS ct", "TIMESTAMP_LTZ(3)", "TIMESTAMP(3)"),
        ("n BIGINT, rt AS TO_TIMESTAMP_LTZ(n, 3), WATERMARK FOR rt AS CAST(rt AS TIMESTAMP(3))",
         "TIMESTAMP(3)", "TIMESTAMP_LTZ(3)"),
        ("e ROW<ts TIMESTAMP(3), note STRING>, WATERMARK FOR e.ts AS e.note", "STRING",
         "TIMESTAMP(3)"),
    ],
)
def test_a_watermark_of_another_type_than_its_time_field_is_refused(
    columns: str, output: str, field: str
) -> None:
    message = (
        rf"table 't': WATERMARK FOR .* AS .*: the watermark output type {re.escape(output)} "
        rf"is different from the time field's type {re.escape(field)}; the expression must "
        r"return a TIMESTAMP(_LTZ)?\(p\) with p <= 3, like its time field"
    )
    with pytest.raises(DefinitionError, match=message):
        parse_table(f"CREATE TABLE t ({columns}) {_DELTA}")


@pytest.mark.parametrize(
    "columns",
    [
        "ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '5' SECOND",
        "ts TIMESTAMP(3), WATERMARK FOR ts AS CAST(ts AS TIMESTAMP(0))",  # precisions may differ
        "ts TIMESTAMP(1), WATERMARK FOR ts AS CAST(ts AS TIMESTAMP(3))",
        "ts TIMESTAMP_LTZ(3), WATERMARK FOR ts AS ts - INTERVAL '1' MINUTE",
        "TS TIMESTAMP(3), WATERMARK FOR ts AS Ts - '5' SECOND",
        "e ROW<ts TIMESTAMP(3)>, WATERMARK FOR e.ts AS e.ts - '5' SECOND",
        "s STRING, rt AS TO_TIMESTAMP(s), WATERMARK FOR rt AS rt - INTERVAL '1' SECOND",
        # a function's type is Spark's to tell, on read
        "ts TIMESTAMP(3), flag BOOLEAN, WATERMARK FOR ts AS watermarkOnFlag(ts, flag)",
    ],
)
def test_a_watermark_of_its_time_fields_type_is_accepted(columns: str) -> None:
    assert parse_table(f"CREATE TABLE t ({columns}) {_DELTA}").watermark is not None


# -- a hybrid source's snapshot keeps the order rows arrived in ---------------------------------

_HYBRID_DDL = """
CREATE TABLE orders (id BIGINT, k STRING, proc_time AS PROCTIME())
WITH ('path' = 'orders', 'changelog' = 'append');
CREATE TABLE dim (k STRING, v BIGINT, note STRING, PRIMARY KEY (k) NOT ENFORCED)
WITH ('path' = 'dim', 'changelog' = 'append', 'scan.startup.mode' = 'snapshot-then-changelog');
CREATE VIEW enriched AS
SELECT o.id, o.k, d.v FROM orders AS o
LEFT JOIN dim FOR SYSTEM_TIME AS OF o.proc_time AS d ON o.k = d.k;
"""
_DIM = pa.schema([("k", pa.string()), ("v", pa.int64()), ("note", pa.string())])
_ORDERS = pa.schema([("id", pa.int64()), ("k", pa.string())])


def _dim(k: str, v: int, note: str = "") -> dict[str, object]:
    return {"k": k, "v": v, "note": note}


@pytest.mark.slow
def test_a_hybrid_snapshot_joins_the_latest_arrival_of_a_repeated_key(
    tmp_path: Path, spark: SparkSession
) -> None:
    """Key `a` written in three commits (1, 2, 3): the snapshot phase must let 3 win. The
    later commits' files are the larger ones (Spark reads larger files first), and `b`
    repeats inside one commit, where the later row wins."""
    padding = [_dim(f"p{i}", i, "x" * 200) for i in range(40)]
    write_commits(tmp_path / "dim", [
        [_dim("a", 1)],
        [_dim("a", 2), *padding[:10]],
        [_dim("b", 1), _dim("a", 3), _dim("b", 2), *padding[10:]],
    ], schema=_DIM, cdf=False)
    write_commits(tmp_path / "orders", [[{"id": 1, "k": "a"}, {"id": 2, "k": "b"}]],
                  schema=_ORDERS, cdf=False)
    catalog = Catalog(tmp_path, spark)
    catalog.declare(_HYBRID_DDL)
    DerivedTable(catalog, "enriched").run()
    rows = catalog.sql("SELECT id, k, v FROM enriched").collect()
    assert sorted((r["id"], r["k"], r["v"]) for r in rows) == [(1, "a", 3), (2, "b", 2)]
