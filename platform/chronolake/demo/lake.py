"""The demo lake: a CDC `orders` table and a CDC `rates` table, in a folder or a bucket.

The data is small and seeded, so every build gives the same tables: orders in
several append commits followed by a correction (an update of a few amounts)
and a cancellation (a delete), and rates written with inserts, updates and
deletes over several commits, both with the change data feed on, so that
updates and deletes flow from `orders` through `orders_enriched` into the
revenue figures.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import TypeVar

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from chronolake.lake.storage import Storage
from chronolake.lake.tables import table_version
from chronolake.location import Location, LocationLike, as_location

DEMO_START = datetime(2026, 11, 2, 9, 0, 0)
CURRENCIES = ("USD", "EUR", "JPY", "GBP", "CHF")
ORDER_COMMITS = 4
ORDERS_PER_COMMIT = 500
CDF_ON = {"delta.enableChangeDataFeed": "true"}
T = TypeVar("T")

ORDERS_SCHEMA = pa.schema(
    [
        ("order_id", pa.int64()),
        ("currency", pa.string()),
        ("amount", pa.decimal128(10, 2)),
        ("order_time", pa.timestamp("us")),
    ]
)
RATES_SCHEMA = pa.schema(
    [
        ("currency", pa.string()),
        ("rate", pa.decimal128(38, 10)),
        ("currency_time", pa.timestamp("us")),
    ]
)


def build_demo_lake(root: LocationLike, *, fresh: bool = True) -> dict[str, int]:
    """Write the demo tables under the lake location `root` (a folder, or a URI such as
    `s3://bucket/lake`: delta-rs writes them there); returns each table's latest Delta
    version. `fresh` first removes the tables and chronolake's folder a former build left."""
    lake = Storage(root)
    if fresh:
        for name in ("orders", "rates", "_chronolake"):
            lake.delete_tree(name)
    if lake.location.is_local:
        lake.location.path.mkdir(parents=True, exist_ok=True)
    return {"rates": _write_rates(lake.location / "rates"),
            "orders": _write_orders(lake.location / "orders")}


def _write_orders(path: Location) -> int:
    rng = random.Random(7)
    for commit in range(ORDER_COMMITS):
        append_orders(path, rng=rng, first_id=commit * ORDERS_PER_COMMIT, count=ORDERS_PER_COMMIT,
                      start=DEMO_START + timedelta(minutes=15 * commit))
    correct_orders(path, [3, 4], percent=10)  # a customer was charged 10% too much
    cancel_orders(path, [5])
    return DeltaTable(str(path)).version()


def correct_orders(path: LocationLike, order_ids: list[int], *, percent: int) -> None:
    """One update commit: the amounts of `order_ids` lowered by `percent` (a correction)."""
    DeltaTable(str(path)).update(
        updates={"amount": f"CAST(amount * {100 - percent} / 100 AS DECIMAL(10, 2))"},
        predicate=f"order_id IN ({', '.join(map(str, order_ids))})",
    )


def cancel_orders(path: LocationLike, order_ids: list[int]) -> None:
    """One delete commit: `order_ids` cancelled."""
    DeltaTable(str(path)).delete(f"order_id IN ({', '.join(map(str, order_ids))})")


def append_orders(path: LocationLike, *, rng: random.Random, first_id: int, count: int,
                  start: datetime, span: timedelta = timedelta(minutes=15)) -> None:
    """Append one commit of orders spread over `span` from `start`, a few out of order."""
    span_ms = max(int(span.total_seconds() * 1000), 1)
    times = sorted(start + timedelta(milliseconds=rng.randrange(span_ms)) for _ in range(count))
    for index in rng.sample(range(count), k=count // 50):  # a few stragglers arrive late
        times[index] -= timedelta(milliseconds=rng.randrange(5_000, 120_000))
    rows = pa.table(
        {
            "order_id": pa.array(range(first_id, first_id + count), pa.int64()),
            "currency": pa.array([rng.choice(CURRENCIES) for _ in range(count)]),
            "amount": pa.array(
                [Decimal(rng.randrange(100, 100_000)) / 100 for _ in range(count)],
                pa.decimal128(10, 2),
            ),
            "order_time": pa.array(times, pa.timestamp("us")),
        },
        schema=ORDERS_SCHEMA,
    )
    write_deltalake(str(path), rows, mode="append", configuration=CDF_ON)


def _rates(rows: list[tuple[str, str, datetime]]) -> pa.Table:
    return pa.table(
        {
            "currency": [r[0] for r in rows],
            "rate": pa.array([Decimal(r[1]) for r in rows], pa.decimal128(38, 10)),
            "currency_time": pa.array([r[2] for r in rows], pa.timestamp("us")),
        },
        schema=RATES_SCHEMA,
    )


def _write_rates(path: Location) -> int:
    t = DEMO_START
    write_deltalake(
        str(path),
        _rates([("USD", "1.0", t), ("EUR", "1.08", t), ("JPY", "0.0067", t), ("GBP", "1.27", t)]),
        configuration=CDF_ON,
    )
    table = DeltaTable(str(path))
    change_rate(table, "EUR", "1.10", t + timedelta(minutes=10))
    change_rate(table, "JPY", "0.0069", t + timedelta(minutes=20))
    table.delete("currency = 'GBP'")
    write_deltalake(str(path), _rates([("CHF", "1.13", t + timedelta(minutes=30))]), mode="append")
    change_rate(table, "EUR", "1.09", t + timedelta(minutes=40))
    return DeltaTable(str(path)).version()


def change_rate(table: DeltaTable, currency: str, rate: str, at: datetime) -> None:
    """One update commit: a new version of `currency`'s rate, valid from `at`."""
    table.update(
        updates={
            "rate": f"CAST('{rate}' AS DECIMAL(38, 10))",
            "currency_time": f"CAST('{at.isoformat(sep=' ')}' AS TIMESTAMP)",
        },
        predicate=f"currency = '{currency}'",
    )


def feed_demo_lake(root: LocationLike, *, seed: int, now: datetime | None = None) -> dict[str, int]:
    """Append a commit of new orders, correct one of them, cancel another and change one
    rate: something new for the runs to see, updates and deletes included.

    As a live system would: the new orders happened since the latest order (at most the last
    15 minutes before `now`, the wall clock unless given), so the watermark moves on and only
    a few stragglers arrive behind it.
    """
    rng = random.Random(seed)
    orders = as_location(root) / "orders"
    next_id = _next_order_id(orders)
    now = now or datetime.now(tz=UTC).replace(tzinfo=None, microsecond=0)
    start = max(_latest_order_time(orders), now - timedelta(minutes=15))
    append_orders(orders, rng=rng, first_id=next_id, count=100,
                  start=start, span=now - start)
    correct_orders(orders, [next_id + rng.randrange(50)], percent=rng.randrange(5, 30))
    cancel_orders(orders, [next_id + 50 + rng.randrange(50)])
    currency = rng.choice(("USD", "EUR", "JPY", "CHF"))
    rates = DeltaTable(str(as_location(root) / "rates"))
    current = {"USD": 1.0, "EUR": 1.09, "JPY": 0.0069, "CHF": 1.13}[currency]
    change_rate(rates, currency, f"{current * rng.uniform(0.97, 1.03):.6f}", now)
    return {name: table_version(as_location(root) / name) for name in ("orders", "rates")}



def _next_order_id(path: LocationLike) -> int:
    """One past the largest order id (cancelled orders leave gaps, so not the row count)."""
    return _largest(path, "order_id", default=-1) + 1


def _latest_order_time(path: LocationLike) -> datetime:
    return _largest(path, "order_time", default=DEMO_START)


def _largest(path: LocationLike, column: str, *, default: T) -> T:
    """A column's largest value, from the data files' statistics (no scan)."""
    actions = pa.table(DeltaTable(str(path)).get_add_actions(flatten=True))
    values = [m for m in actions[f"max.{column}"].to_pylist() if m is not None]
    return max(values, default=default)
