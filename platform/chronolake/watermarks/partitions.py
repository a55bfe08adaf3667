"""Which time partitions a watermark completes.

A partition is complete once the table's output watermark has reached its end: no row of
it can arrive any more. Its boundaries are those of Dagster's time window partitions, built
from the table's `TimePartitions` (`chronolake.schema.time_options`), so the keys chronolake
stamps are the keys Dagster shows, daylight-saving days included.

A window aggregate is partitioned by `window_start`, and its windows are emitted once the
watermark passes their ends: a partition of it is complete when the watermark has reached
the end of the last window that starts inside it (the partition's end for tumbling windows
aligned with it; later for hopping windows, or windows that straddle the boundary).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from typing import TYPE_CHECKING

from chronolake.schema.time_options import TimePartitions
from chronolake.schema.windows import WindowKind, Windows

if TYPE_CHECKING:  # Dagster loads in a second; only a partitioned table's runs need it
    from dagster import TimeWindowPartitionsDefinition

_NAMED = {"hourly": "Hourly", "daily": "Daily", "weekly": "Weekly", "monthly": "Monthly"}


@dataclass(frozen=True, slots=True)
class PartitionWindow:
    """One partition: its key, and the instants it covers, [start_ms, end_ms)."""

    key: str
    start_ms: int
    end_ms: int


@cache
def partitions_definition(partitions: TimePartitions) -> TimeWindowPartitionsDefinition:
    """The Dagster partitions definition that draws `partitions`' boundaries and keys."""
    import dagster

    start = partitions.start_time
    named = _NAMED.get(partitions.schedule)
    if named is not None:
        definition: type[TimeWindowPartitionsDefinition] = getattr(
            dagster, f"{named}PartitionsDefinition"
        )
        return definition(start_date=start, timezone=partitions.zone)  # type: ignore[call-arg]
    return dagster.TimeWindowPartitionsDefinition(
        cron_schedule=partitions.schedule, start=start, timezone=partitions.zone,
        fmt="%Y-%m-%d-%H:%M",
    )


def windows_between(partitions: TimePartitions, start_ms: int, end_ms: int
                    ) -> list[PartitionWindow]:
    """Every partition that overlaps [start_ms, end_ms), oldest first (none before the
    partitions' start)."""
    from dagster import TimeWindow

    definition = partitions_definition(partitions)
    end = _instant(max(end_ms, start_ms + 1))
    containing = definition.get_partition_key_for_timestamp(start_ms / 1000)
    first = max(definition.time_window_for_partition_key(containing).start, definition.start)
    if first >= end:
        return []
    span = TimeWindow(first, end)  # the partitions that start inside it
    return [
        PartitionWindow(key, _millis(window.start), _millis(window.end))
        for key in definition.get_partition_keys_in_time_window(span)
        for window in [definition.time_window_for_partition_key(key)]
    ]


def first_start_ms(partitions: TimePartitions) -> int:
    """The first partition's start instant."""
    return _millis(partitions_definition(partitions).start)


def completed_at(window: PartitionWindow, windows: Windows | None) -> int:
    """The watermark that completes `window`: its end; for a window aggregate partitioned by
    `window_start`, the end of the last window that starts inside it."""
    if windows is None:
        return window.end_ms
    slide = windows.slide_ms
    if windows.kind is WindowKind.CUMULATE:  # windows start every max size, ending by then
        slide = windows.size_ms
    last_start = window.end_ms - 1 - (window.end_ms - 1 - windows.offset_ms) % slide
    return max(window.end_ms, last_start + windows.size_ms)


def newly_complete(
    partitions: TimePartitions, windows: Windows | None, before_ms: int | None, after_ms: int
) -> list[PartitionWindow]:
    """The partitions a watermark's move from `before_ms` (None: none yet) to `after_ms`
    completes, oldest first."""
    start = first_start_ms(partitions)
    lower = start if before_ms is None else max(before_ms - _reach(windows), start)
    return [
        window for window in windows_between(partitions, lower, after_ms)
        if (before_ms is None or completed_at(window, windows) > before_ms)
        and completed_at(window, windows) <= after_ms
    ]


def complete(partitions: Sequence[PartitionWindow], windows: Windows | None,
             watermark_ms: int | None) -> list[PartitionWindow]:
    """Those of `partitions` that `watermark_ms` completes."""
    if watermark_ms is None:
        return []
    return [window for window in partitions if completed_at(window, windows) <= watermark_ms]


def _reach(windows: Windows | None) -> int:
    """How far a partition's completion can trail its end: a window's size."""
    return 0 if windows is None else windows.size_ms


def _instant(millis: int) -> datetime:
    return datetime.fromtimestamp(millis / 1000, tz=UTC)


def _millis(moment: datetime) -> int:
    return round(moment.timestamp() * 1000)
