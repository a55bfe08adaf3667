"""Knobs of the as-of join's physical plan; none of them changes its result."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class AsOfTuning(BaseModel):
    """How `join_valid_versions` lays out its work: broadcast or shuffle, bucket sizes, hot keys.

    Example:
        >>> join_valid_versions(orders, rates, ..., tuning=AsOfTuning(broadcast_max_rows=0))
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    broadcast_max_rows: int = Field(
        1_000_000,
        ge=0,
        description="Broadcast the build side when it has at most this many version events "
        "(the probe side is then never shuffled); above it both sides are shuffled by "
        "(key, time bucket).",
    )
    versions_per_bucket: int = Field(
        2,
        ge=1,
        description="Target versions of one key per time bucket: smaller copies versions into "
        "more buckets, larger makes each probe row check more versions.",
    )
    hot_key_min_rows: int | None = Field(
        None,
        ge=1,
        description="Build events from which a key is hot and gets buckets sized by its own "
        "count; None means four times the mean per key.",
    )
    max_hot_keys: int = Field(
        64, ge=1, description="At most this many hot keys (the most frequent) per side."
    )
    probe_rows_per_bucket: int = Field(
        500_000,
        ge=1,
        description="When both sides are shuffled: a key with more probe rows than this gets "
        "buckets small enough to spread its rows over several tasks.",
    )
