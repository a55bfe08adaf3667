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


def version_events(events: DataFrame, keys: Sequence[str], time: str, kind: str | None
                   ) -> DataFrame:
    """The changes that are version events: anything but `-U` (`kind` None: every row), with
    a key and a time (a version needs both)."""
    present = all_of([F.col(quote(name)).isNotNull() for name in [*keys, time]])
    return events.where(is_version_event(kind)).where(present)


def version_history(events: DataFrame, *, keys: Sequence[str], time: str) -> DataFrame:
    """One row per version in a changelog `events`: its own columns (system columns dropped),
    `valid_from` (its time), `valid_to` (the key's next version time or
    delete, exclusive; null while current) and `committed_at` (its commit's timestamp).

    Example:
        >>> version_history(rates_changelog, keys=["currency"], time="rate_time").show()
    """
    kind = ROW_KIND if ROW_KIND in events.columns else None
    own = [c for c in events.columns if c not in SYSTEM_COLUMNS]
    intervals = validity_intervals(
        version_events(events, keys, time, kind), keys=keys, start=time,
        arrival=ARRIVAL_ORDER, kind=kind,
    )
    return intervals.select(
        *[F.col(quote(c)) for c in own],
        F.col(quote(time)).alias(VALID_FROM),
        F.col(END).alias(VALID_TO),
        F.col(COMMIT_TIMESTAMP).alias(COMMITTED_AT),
    )

