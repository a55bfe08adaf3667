"""A retract stream stored as a multiset: each row by a hidden identity, one retraction one row.

A changelog without a key (Flink's retract stream) retracts, with a -U or -D, one row equal
to its own values; its table is a multiset of rows, and two equal rows are two rows. Such a
table is stored with a hidden column, `ROW_IDENTITY`: a hash of the row's values and the
row's occurrence number among the stored rows equal to it (1, 2, ...). A batch of changes
is counted per distinct row (its additions minus its retractions: equal rows of one batch
cancel in pairs, as in Flink's multiset), and the net count adds occurrences above the
stored ones or takes back the highest ones. Each becomes a +I or a -D of one identity, a
keyed change that `chronolake.lake.upserts` applies by `ROW_IDENTITY`, so Delta's change
feed shows one `insert` per added row and one `delete` per retracted row.

A retraction with no equal row left to take back is dropped, as Flink's retracting sinks
drop one whose row their state no longer holds. All of it is lazy Spark work.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from chronolake.lake.changelog import (
    ADDITIONS,
    ARRIVAL_ORDER,
    ROW_KIND,
    SYSTEM_COLUMNS,
    RowKind,
)

ROW_IDENTITY = "_chronolake_row"
"""The hidden column of a multiset's stored rows: `<hash of the values>#<occurrence>`.
Readers never see it (a derived table's declared columns leave it out)."""

_VALUES = "__multiset_values"
_NET = "__multiset_net"
_STORED = "__multiset_stored"
_ROW = "__multiset_row"
_OCCURRENCE = "__multiset_occurrence"


def values_hash(columns: Sequence[str]) -> Column:
    """The identity of a row's values: 96 bits of two hashes (xxHash64 and Murmur3) of the
    values and of which of them are null (Spark's hashes skip a null, so (1, null) and
    (null, 1) would otherwise be equal). Hashes of Spark's internal values: independent of
    the session's time zone, so every run computes the same identity."""
    values = [part for c in columns for part in (F.col(f"`{c}`"), F.col(f"`{c}`").isNull())]
    return F.concat_ws("-", F.hex(F.xxhash64(*values)), F.hex(F.hash(*values)))


def row_changes(changes: DataFrame, stored: DataFrame | None) -> DataFrame:
    """`changes` (a retract stream: the table's columns plus `_row_kind` and arrival order)
    as keyed changes of the `stored` multiset (its rows with `ROW_IDENTITY`; None: empty):
    a `+I` per occurrence added, a `-D` per stored occurrence taken back, keyed by
    `ROW_IDENTITY`, with the arrival columns `chronolake.lake.upserts` orders by."""
    columns = [c for c in changes.columns if c not in SYSTEM_COLUMNS]
    sign = F.when(F.col(ROW_KIND).isin(*ADDITIONS), 1).otherwise(-1)
    batch = changes.withColumn(_VALUES, values_hash(columns)).groupBy(_VALUES).agg(
        F.sum(sign).alias(_NET), F.first(F.struct(*(F.col(f"`{c}`") for c in columns))).alias(_ROW)
    )
    if stored is None:
        stored = changes.select(*columns).limit(0).withColumn(ROW_IDENTITY, F.lit("x#0"))
    touched = (
        stored.withColumn(_VALUES, F.substring_index(ROW_IDENTITY, "#", 1))
        .withColumn(_OCCURRENCE, F.substring_index(ROW_IDENTITY, "#", -1).cast("long"))
        .join(batch.select(_VALUES), on=_VALUES, how="left_semi")
    )
    counts = touched.groupBy(_VALUES).agg(F.count(F.lit(1)).alias(_STORED))
    target = F.greatest(F.lit(0), F.coalesce(F.col(_STORED), F.lit(0)) + F.col(_NET))
    counted = batch.join(counts, on=_VALUES, how="left").select(
        _VALUES, _ROW, F.coalesce(F.col(_STORED), F.lit(0)).alias(_STORED),
        target.alias(_NET),
    )
    taken_back = touched.join(counted.select(_VALUES, _NET), on=_VALUES).where(
        F.col(_OCCURRENCE) > F.col(_NET)
    ).select(*(F.col(f"`{c}`") for c in columns), ROW_IDENTITY,
             F.lit(RowKind.DELETE.value).alias(ROW_KIND))
    added = counted.where(F.col(_NET) > F.col(_STORED)).select(
        f"{_ROW}.*", _VALUES,
        F.explode(F.sequence(F.col(_STORED) + 1, F.col(_NET))).alias(_OCCURRENCE),
    ).select(
        *(F.col(f"`{c}`") for c in columns),
        F.concat_ws("#", _VALUES, F.col(_OCCURRENCE).cast("string")).alias(ROW_IDENTITY),
        F.lit(RowKind.INSERT.value).alias(ROW_KIND),
    )
    # One change per identity: its arrival order is any constant
    return taken_back.unionByName(added).select(
        "*", *(F.lit(0).cast("long").alias(c) for c in ARRIVAL_ORDER)
    )
