"""Time buckets that turn the as-of match into an equi-join on (key, bucket).

Each version interval `[start, end)` is copied into every bucket it overlaps and each probe
row looks only into its own bucket, so a probe row meets a handful of versions instead of
all versions of its key (no range join), and a hot key spreads over many buckets (and so
many tasks) instead of one. Any bucket function that is monotone in time and the same on
both sides is correct; the widths only decide speed. They come from cheap approximate
aggregates (count, distinct keys, min/max time, top keys) collected on the driver: one row.
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from chronolake.joins.tuning import AsOfTuning


class BucketPlan(BaseModel):
    """Bucket widths per key (by key hash) and the last bucket an open interval reaches."""

    model_config = ConfigDict(frozen=True)

    build_rows: int = Field(description="Version events on the build side (exact count).")
    broadcast: bool = Field(description="Whether the build side is broadcast.")
    origin: int = Field(description="Time (in ticks) where bucket 0 starts.")
    width: int = Field(ge=1, description="Bucket width (in ticks) of ordinary keys.")
    last: int = Field(description="Last bucket of ordinary keys: their open intervals end here.")
    hot_widths: dict[int, int] = Field(default_factory=dict, description="Key hash -> width.")
    hot_lasts: dict[int, int] = Field(default_factory=dict, description="Key hash -> last.")

    def probe_bucket(self, key_hash: Column, tick: Column) -> Column:
        """The one bucket a probe row looks into (times past the last bucket look into it)."""
        first = _floor_div(tick - F.lit(self.origin), self._width(key_hash))
        return F.least(first, self._last(key_hash))

    def interval_buckets(self, key_hash: Column, start: Column, end: Column) -> Column:
        """Every bucket the interval `[start, end)` may hold a probe row in (null end: open)."""
        width = self._width(key_hash)
        first = _floor_div(start - F.lit(self.origin), width)
        final = F.coalesce(_floor_div(end - F.lit(self.origin), width), self._last(key_hash))
        return F.sequence(first, final)

    def _width(self, key_hash: Column) -> Column:
        return _lookup(self.hot_widths, key_hash, self.width)

    def _last(self, key_hash: Column) -> Column:
        return _lookup(self.hot_lasts, key_hash, self.last)


def plan_buckets(
    events: DataFrame,
    probe: DataFrame,
    *,
    build_hash: str,
    build_tick: str,
    probe_hash: str,
    probe_tick: str,
    tuning: AsOfTuning,
) -> BucketPlan:
    """Size the buckets from the build side's density, and the probe's when it is shuffled too.

    Ordinary keys get a width holding about `versions_per_bucket` versions of an average key;
    a key with at least `hot_key_min_rows` events gets a width sized by its own count, so the
    copies stay under about twice the versions however skewed the keys are. When the build
    side is too large to broadcast, the probe side (non-null keys and times only) is measured
    too, and a key with many probe rows gets buckets small enough for one task each.
    """
    stats = _time_stats(events, build_hash, build_tick, tuning.max_hot_keys)
    rows = stats["rows"]
    broadcast = rows <= tuning.broadcast_max_rows
    if rows == 0:
        return BucketPlan(build_rows=0, broadcast=broadcast, origin=0, width=1, last=0)
    origin, end = stats["t_min"], stats["t_max"]
    span = max(end - origin, 1)
    keys = max(stats["keys"], 1)
    per_bucket = tuning.versions_per_bucket
    width = max(1, span * keys * per_bucket // rows)
    hot_min = tuning.hot_key_min_rows or 4 * rows // keys
    hot_widths = {
        top["item"]: max(1, span * per_bucket // top["count"])
        for top in stats["top"]
        if top["count"] >= hot_min
    }
    hot_ends: dict[int, int] = {}
    if not broadcast:
        probe_stats = _time_stats(probe, probe_hash, probe_tick, tuning.max_hot_keys)
        for top in probe_stats["top"]:
            if top["count"] < tuning.probe_rows_per_bucket:
                continue
            key_end = max(end, probe_stats["t_max"])
            pieces = -(-top["count"] // tuning.probe_rows_per_bucket)
            key_width = max(1, (key_end - origin) // pieces)
            hot_widths[top["item"]] = min(hot_widths.get(top["item"], width), key_width)
            hot_ends[top["item"]] = key_end
    hot_widths = {key: w for key, w in hot_widths.items() if w < width or key in hot_ends}
    return BucketPlan(
        build_rows=rows,
        broadcast=broadcast,
        origin=origin,
        width=width,
        last=(end - origin) // width,
        hot_widths=hot_widths,
        hot_lasts={key: (hot_ends.get(key, end) - origin) // w for key, w in hot_widths.items()},
    )


def _time_stats(frame: DataFrame, key_hash: str, tick: str, top: int) -> dict:
    """One aggregate row; approximate where exactness only matters for speed."""
    row = frame.agg(
        F.count(F.lit(1)).alias("rows"),
        F.approx_count_distinct(key_hash).alias("keys"),
        F.min(tick).alias("t_min"),
        F.max(tick).alias("t_max"),
        F.call_function("approx_top_k", F.col(key_hash), F.lit(top)).alias("top"),
    ).first()  # metadata-sized: one row of statistics
    assert row is not None, "a global aggregate has one row"
    return row.asDict(recursive=True)


def _lookup(table: Mapping[int, int], key_hash: Column, default: int) -> Column:
    if not table:
        return F.lit(default)
    pairs = [F.lit(value) for item in table.items() for value in item]
    return F.coalesce(F.element_at(F.create_map(*pairs), key_hash), F.lit(default))


def _floor_div(micros: Column, width: Column) -> Column:
    # Exact: both operands stay below 2**53, where a double quotient floors like `//`.
    return F.floor(micros / width)
