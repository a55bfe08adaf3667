"""Generated benchmark data: an `orders` probe table and a `rates` changelog, as Parquet.

Every engine reads the same two files, so every variant joins identical rows. Keys are
integers; `skew="hot"` gives key 0 half of the rows on both sides. Times are milliseconds
over one day (TIMESTAMP_NTZ), so equal version times of one key occur, as do `-U` events
(ignored), deletes, and arrival out of time order.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

DAY_MS = 86_400_000
START_MS = 1_704_067_200_000  # 2024-01-01T00:00:00
ROWS_PER_COMMIT = 1_000
# Small row groups, as a lake of many files has: every engine can scan in parallel.
ROW_GROUP_ROWS = 131_072
MANIFEST = "bench.json"


class Skew(StrEnum):
    """Key distribution of both sides."""

    UNIFORM = "uniform"
    HOT = "hot"


@dataclass(frozen=True)
class BenchData:
    """Where the generated tables are and how they were made."""

    orders: Path
    rates: Path
    rows: int
    changelog_rows: int
    keys: int
    skew: Skew


def generate(folder: Path, *, rows: int, skew: Skew, keys: int = 1_000, seed: int = 7) -> BenchData:
    """Write `orders` (`rows` rows) and `rates` (10% of that) under `folder`."""
    rng = np.random.default_rng(seed)
    changelog_rows = max(rows // 10, 1)
    orders = pa.table(
        {
            "order_id": np.arange(rows, dtype=np.int64),
            "currency": _keys(rng, rows, keys, skew),
            "order_time": _timestamps(_times(rng, rows)),
            "amount": rng.integers(1, 100_000, rows, dtype=np.int64),
        }
    )
    currency = _keys(rng, changelog_rows, keys, skew)
    times = _times(rng, changelog_rows)
    # 2% of the events repeat an earlier event's key and time: ties decided by arrival.
    copies = rng.random(changelog_rows) < 0.02
    source = rng.integers(0, changelog_rows, changelog_rows)
    currency = np.where(copies, currency[source], currency)
    times = np.where(copies, times[source], times)
    arrival = np.arange(changelog_rows, dtype=np.int64)
    rates = pa.table(
        {
            "currency": currency,
            "currency_time": _timestamps(times),
            "version_id": arrival,
            "rate_cents": rng.integers(1, 1_000_000, changelog_rows, dtype=np.int64),
            "_row_kind": rng.choice(
                ["+I", "+U", "-U", "-D"], changelog_rows, p=[0.1, 0.7, 0.15, 0.05]
            ),
            "_commit_version": arrival // ROWS_PER_COMMIT,
            "_position": arrival % ROWS_PER_COMMIT,
        }
    )
    folder.mkdir(parents=True, exist_ok=True)
    data = BenchData(
        orders=folder / "orders.parquet",
        rates=folder / "rates.parquet",
        rows=rows,
        changelog_rows=changelog_rows,
        keys=keys,
        skew=skew,
    )
    pq.write_table(orders, data.orders, row_group_size=ROW_GROUP_ROWS)
    pq.write_table(rates, data.rates, row_group_size=ROW_GROUP_ROWS)
    manifest = {"rows": rows, "changelog_rows": changelog_rows, "keys": keys, "skew": str(skew)}
    (folder / MANIFEST).write_text(json.dumps(manifest))
    return data


def load(folder: Path) -> BenchData:
    """The data `generate` wrote under `folder`: a run in another process reads the same
    files instead of generating them again."""
    manifest = json.loads((folder / MANIFEST).read_text())
    return BenchData(
        orders=folder / "orders.parquet",
        rates=folder / "rates.parquet",
        rows=manifest["rows"],
        changelog_rows=manifest["changelog_rows"],
        keys=manifest["keys"],
        skew=Skew(manifest["skew"]),
    )


def _keys(rng: np.random.Generator, n: int, keys: int, skew: Skew) -> np.ndarray:
    uniform = rng.integers(0, keys, n, dtype=np.int64)
    if skew is Skew.UNIFORM:
        return uniform
    return np.where(rng.random(n) < 0.5, 0, uniform)


def _times(rng: np.random.Generator, n: int) -> np.ndarray:
    return START_MS + rng.integers(0, DAY_MS, n, dtype=np.int64)


def _timestamps(millis: np.ndarray) -> pa.Array:
    return pa.array(millis * 1_000, type=pa.timestamp("us"))
