"""Generated interval-join data: `clicks` and `impressions` streams, as Delta tables.

Both streams have `rows` rows over the same ads (the join key). Ad popularity is lognormal
(a few ads take many rows, most take few; the same ad is popular on both sides), with
`rows_per_key` rows per ad on average. Times are milliseconds (TIMESTAMP(3)), uniform over a
span chosen so that a click meets `matches` impressions on average in the interval the view
asks for (5 s before to 10 s after the impression: 15 s wide, bounds included). Each table
also holds one closing row (id -1, ad -1), hours after the data and joining nothing, as the
stream's later rows would: its watermark then passes every real row's interval in one run,
so a LEFT join emits every unmatched click.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
from deltalake import DeltaTable, WriterProperties, write_deltalake

START_MS = 1_704_067_200_000  # 2024-01-01T00:00:00
INTERVAL_MS = 15_000  # BETWEEN i.imp_time - 5 s AND i.imp_time + 10 s
HOUR_MS = 3_600_000
# Small row groups and files, as a lake of many files has: every engine can scan in parallel.
ROW_GROUP_ROWS = 131_072
FILE_BYTES = 8 << 20


@dataclass(frozen=True)
class IntervalData:
    """Where the generated tables are and how they were made."""

    clicks: Path
    impressions: Path
    rows: int
    keys: int
    span_s: float

    @staticmethod
    def files(table: Path) -> list[str]:
        """The table's data files (one commit: its snapshot), for engines that read Parquet."""
        return DeltaTable(str(table)).file_uris()


def generate(
    folder: Path,
    *,
    rows: int,
    rows_per_key: int = 100,
    matches: float = 3.0,
    sigma: float = 1.0,
    seed: int = 7,
) -> IntervalData:
    """Write `clicks` and `impressions` (`rows` rows each, one commit each) under `folder`."""
    rng = np.random.default_rng(seed)
    keys = max(rows // rows_per_key, 1)
    popularity = rng.lognormal(0.0, sigma, keys)
    share = popularity / popularity.sum()
    # An average click meets rows * sum(share**2) impressions of its ad per span, uniformly.
    span_ms = max(int(rows * float(np.sum(share**2)) * INTERVAL_MS / matches), 1)
    data = IntervalData(
        clicks=folder / "clicks",
        impressions=folder / "impressions",
        rows=rows,
        keys=keys,
        span_s=span_ms / 1000,
    )
    end_ms = START_MS + span_ms
    clicks = {
        "click_id": np.arange(rows, dtype=np.int64),
        "ad_id": rng.choice(keys, rows, p=share).astype(np.int64),
        "click_time": START_MS + rng.integers(0, span_ms, rows, dtype=np.int64),
    }
    impressions = {
        "imp_id": np.arange(rows, dtype=np.int64),
        "ad_id": rng.choice(keys, rows, p=share).astype(np.int64),
        "imp_time": START_MS + rng.integers(0, span_ms, rows, dtype=np.int64),
        "bid": rng.integers(1, 10_000, rows, dtype=np.int64),
    }
    _write(data.clicks, clicks, "click_time", closing_ms=end_ms + 2 * HOUR_MS)
    _write(data.impressions, impressions, "imp_time", closing_ms=end_ms + HOUR_MS)
    return data


def _write(path: Path, columns: dict[str, np.ndarray], time: str, *, closing_ms: int) -> None:
    closed = {
        name: np.append(values, closing_ms if name == time else -1)
        for name, values in columns.items()
    }
    table = pa.table(
        {
            name: pa.array(values * 1_000, type=pa.timestamp("us")) if name == time else values
            for name, values in closed.items()
        }
    )
    write_deltalake(
        str(path),
        table,
        target_file_size=FILE_BYTES,
        writer_properties=WriterProperties(max_row_group_size=ROW_GROUP_ROWS),
    )
