"""A versioned table's changelog as validity intervals: one row per version, `[start, end)`.

This is where FLIP-132's version rules live: among the events of one key with the same
version time the later arrival wins; a winning `-D` means "no version from here on", so it
only ends the interval before it and yields none itself. The caller has already dropped
`-U` events and events with a null key or time.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from chronolake.lake.changelog import RowKind

END = "__cl_end"


def validity_intervals(
    events: DataFrame,
    *,
    keys: Sequence[str],
    start: str,
    arrival: Sequence[str],
    kind: str | None,
) -> DataFrame:
    """`events` with an `END` column (exclusive; null = still valid), winners only, no deletes.

    One window over the build side ordered by (time, arrival): a row whose successor has the
    same time lost to a later arrival; the winner's successor carries the next version time.
    """
    order = [F.col(start), *(F.col(name) for name in arrival)]
    following = F.lead(start).over(Window.partitionBy(*keys).orderBy(*order))
    stamped = events.withColumn(END, following)
    winners = stamped.where(F.col(END).isNull() | (F.col(END) != F.col(start)))
    if kind is None:
        return winners
    return winners.where(_is_not_delete(F.col(kind)))


def _is_not_delete(kind: Column) -> Column:
    return kind.isNull() | (kind != F.lit(RowKind.DELETE.value))
