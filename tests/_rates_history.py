"""An op-column `rates` table and its history view, for the history tests
(`tests/test_history.py`) and its anchor (`tests/test_history_anchors.py`)."""

from __future__ import annotations

from datetime import datetime, timedelta

import pyarrow as pa

BASE = datetime(2026, 11, 2, 9, 0)
RATES_SCHEMA = pa.schema([("currency", pa.string()), ("rate", pa.int64()),
                          ("currency_time", pa.timestamp("us")), ("op", pa.string())])
RATES_DDL = """
CREATE TABLE rates (
  currency STRING, rate BIGINT, currency_time TIMESTAMP(3),
  WATERMARK FOR currency_time AS currency_time,
  PRIMARY KEY (currency) NOT ENFORCED
) WITH ('path' = 'rates', 'changelog' = 'op-column', 'changelog.op-column' = 'op');
"""
HISTORY_VIEW_DDL = """
CREATE VIEW rates_history AS
SELECT currency, rate, valid_from, valid_to, committed_at FROM rates FOR SYSTEM_TIME ALL;
"""


def at(minute: int) -> datetime:
    """`minute` minutes after `BASE`."""
    return BASE + timedelta(minutes=minute)


def rate(currency: str, value: int, minute: int, op: str = "+U") -> dict:
    """One change of `rates`: `currency` at `value` from `at(minute)`, of kind `op`."""
    return {"currency": currency, "rate": value, "currency_time": at(minute), "op": op}
