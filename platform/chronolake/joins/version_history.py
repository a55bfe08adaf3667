"""A versioned table's versions as rows, valid from one time to the next: its history.

The versions are the ones the event-time temporal join picks from (`chronolake.joins.asof`):
the same events (`version_events`) cut into the same validity intervals
(`chronolake.joins._intervals`), so a history row says exactly when a probe row would have
joined it. Deduplication views choose their versions first (`chronolake.joins.versions`).
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from chronolake.joins._columns import all_of, is_version_event, quote
from chronolake.joins._intervals import END, validity_intervals
from chronolake.lake.changelog import ARRIVAL_ORDER, COMMIT_TIMESTAMP, ROW_KIND, SYSTEM_COLUMNS
from chronolake.sql.history import COMMITTED_AT, VALID_FROM, VALID_TO

_LAST = "__vh_last"


def version_events(events: DataFrame, keys: Sequence[str], time: str, kind: str | None
                   ) -> DataFrame:
    """The changes that are version events: anything but `-U` (`kind` None: every row), with
    a key and a time (a version needs both)."""
    present = all_of([F.col(quote(name)).isNotNull() for name in [*keys, time]])
    return events.where(is_version_event(kind)).where(present)


def version_history(
    events: DataFrame,
    *,
    keys: Sequence[str],
    time: str,
    carried: Sequence[str] = (),
) -> DataFrame:
    """One row per version in a changelog `events`: its own columns (system columns dropped,
    `carried` kept), `valid_from` (its time), `valid_to` (the key's next version time or
    delete, exclusive; null while current) and `committed_at` (its commit's timestamp).

    Example:
        >>> version_history(rates_changelog, keys=["currency"], time="rate_time").show()
    """
    kind = ROW_KIND if ROW_KIND in events.columns else None
    own = [c for c in events.columns if c not in SYSTEM_COLUMNS and c not in carried]
    intervals = validity_intervals(
        version_events(events, keys, time, kind), keys=keys, start=time,
        arrival=ARRIVAL_ORDER, kind=kind,
    )
    return intervals.select(
        *[F.col(quote(c)) for c in own],
        F.col(quote(time)).alias(VALID_FROM),
        F.col(END).alias(VALID_TO),
        F.col(COMMIT_TIMESTAMP).alias(COMMITTED_AT),
        *[F.col(quote(c)) for c in carried],
    )


def deciding_events(events: DataFrame, keys: Sequence[str], time: str) -> DataFrame:
    """`events` (version events) without those that lost to a later arrival of the same key
    and time: they can never decide a version again, as any event still to come arrives
    later than them all. An aggregate, not a window (see `chronolake.lake.upserts`)."""
    grouping = [*keys, time]
    rest = [c for c in events.columns if c not in grouping]
    last = F.max_by(F.struct(*[F.col(quote(c)) for c in rest]),
                    F.struct(*[F.col(c) for c in ARRIVAL_ORDER]))
    return events.groupBy(*[F.col(quote(c)) for c in grouping]).agg(last.alias(_LAST)).select(
        *[F.col(quote(c)) for c in grouping], *[F.col(f"{_LAST}.{quote(c)}").alias(c) for c in rest]
    ).select(*[F.col(quote(c)) for c in events.columns])
