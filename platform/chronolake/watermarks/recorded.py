"""A derived table's watermarks as its commits recorded them, stamped on the rows it changes.

A derived table generates no watermark of its own when read: each of its commits records
the watermark its run reached (`chronolake.lake.stamps`), and a row arrives with the watermark
in force when its commit did, the one the commit before recorded.
"""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import Column
from pyspark.sql import functions as F

from chronolake.lake.changelog import COMMIT_VERSION
from chronolake.watermarks.watermark import LONG_MIN


def or_min(watermark_ms: int | None) -> int:
    """A recorded watermark, or the minimum where none was recorded (the epoch is one)."""
    return LONG_MIN if watermark_ms is None else watermark_ms


def in_force_by_commit(recorded: Mapping[int, int | None]) -> Column:
    """Per row, by its `_commit_version`: the watermark the commit before recorded (epoch ms,
    Long.MIN_VALUE where none). `recorded` holds the commits read and the one before them
    (`recorded_watermarks`; version -1 for a read from the first commit): a literal map,
    metadata-sized, so no join."""
    first = min(recorded)
    pairs = [
        F.lit(v) for version in recorded if version > first
        for v in (version, or_min(recorded.get(version - 1)))
    ]
    stamped = F.create_map(*pairs)[F.col(COMMIT_VERSION)] if pairs else F.lit(None)
    return F.coalesce(stamped.cast("long"), F.lit(or_min(recorded[first])))
