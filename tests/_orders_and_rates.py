"""The two CDC tables the pipeline tests build on: orders keyed by order_id, rates by currency,
each watermarked at its own time (no delay), so a test controls every watermark exactly; and
their rows, timed in minutes after 09:00 on 2 Nov 2026."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

BASE = datetime(2026, 11, 2, 9, 0)

ORDERS_AND_RATES = """
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
"""
RAW_ORDERS = """
CREATE TABLE raw_orders (
  order_id BIGINT, currency STRING, amount BIGINT, order_time TIMESTAMP(3),
  WATERMARK FOR order_time AS order_time
) WITH ('path' = 'raw_orders', 'changelog' = 'append');
"""
"""The orders as an upstream system exports them: an append table without the change data
feed, whose ranges a re-export replaces (restatement)."""
ENRICHED = """
CREATE VIEW enriched AS
SELECT o.order_id, o.currency, o.amount, o.order_time, r.rate, o.amount * r.rate AS usd
FROM orders AS o LEFT JOIN rates FOR SYSTEM_TIME AS OF o.order_time AS r
ON o.currency = r.currency;
"""
"""Each order with the rate valid at its time, and its amount in USD."""


def at(minutes: float) -> datetime:
    return BASE + timedelta(minutes=minutes)


def ms(minutes: float) -> int:
    """The epoch milliseconds of `at(minutes)`, a UTC wall-clock time."""
    return int(at(minutes).replace(tzinfo=UTC).timestamp() * 1000)


def between(start: float, end: float, column: str = "order_time") -> str:
    """The predicate of a re-export of the rows of [start, end) (minutes after 09:00) of a
    time `column`."""
    return (f"{column} >= '{at(start):%Y-%m-%d %H:%M:%S}' AND "
            f"{column} < '{at(end):%Y-%m-%d %H:%M:%S}'")


def order_row(order_id: int, amount: int, minutes: float, currency: str = "EUR") -> dict:
    return {"order_id": order_id, "currency": currency, "amount": amount,
            "order_time": at(minutes)}


def rate_row(currency: str, rate: int, minutes: float) -> dict:
    return {"currency": currency, "rate": rate, "currency_time": at(minutes)}
