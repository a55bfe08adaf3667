"""Window assignment: which windows of a TUMBLE, HOP or CUMULATE a rowtime belongs to.

Bounds follow Flink's slice assigners, in epoch milliseconds (UTC): a window
start is `ts − ((ts − offset) mod every)` (`TimeWindow.getWindowStartWithOffset`,
the mod taken non-negative, so negative offsets work), with `every` the size
for TUMBLE, the slide for HOP and the max size for CUMULATE. A row belongs to
every window with start <= rowtime < end:

- TUMBLE: one window [start, start + size).
- HOP: size / slide windows, starting every slide.
- CUMULATE: the windows of one cumulation share its start (aligned to the max
  size); they end at start + step, start + 2·step, … start + size, and a row is
  in those ending after it: the first ends at its step boundary.

All of it is Spark column arithmetic (lazy); `bounds` is an array to explode.
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

from chronolake.schema.windows import WindowKind, Windows

START = "start"
END = "end"


def last_end(windows: Windows, rowtime_ms: Column) -> Column:
    """The largest end of the windows holding `rowtime_ms`: once it fired, the row is done."""
    every = windows.size_ms if windows.kind is WindowKind.CUMULATE else windows.slide_ms
    return _start(windows, rowtime_ms, every) + F.lit(windows.size_ms)


def bounds(windows: Windows, rowtime_ms: Column) -> Column:
    """Every window holding `rowtime_ms`, as `array<struct<start, end>>` (epoch ms)."""
    size, slide = F.lit(windows.size_ms).cast("long"), F.lit(windows.slide_ms).cast("long")
    if windows.kind is WindowKind.CUMULATE:
        start = _start(windows, rowtime_ms, windows.size_ms)
        first_end = _start(windows, rowtime_ms, windows.slide_ms) + slide
        return F.transform(
            F.sequence(first_end, start + size, slide),
            lambda end: F.struct(start.alias(START), end.alias(END)),
        )
    last_start = _start(windows, rowtime_ms, windows.slide_ms)
    return F.transform(
        F.sequence(last_start - size + slide, last_start, slide),
        lambda start: F.struct(start.alias(START), (start + size).alias(END)),
    )


def overlapping_span(windows: Windows, start_ms: int, end_ms: int) -> tuple[int, int]:
    """[first start, last end) of the windows overlapping [`start_ms`, `end_ms`): every row of
    those windows lies in it, so recomputing them reads only that span (a restatement)."""
    every = windows.size_ms if windows.kind is WindowKind.CUMULATE else windows.slide_ms
    first = _start_ms(windows, start_ms, every) - windows.size_ms + every
    return first, _start_ms(windows, end_ms - 1, every) + windows.size_ms


def first_end(windows: Windows, start_ms: int) -> int:
    """The earliest end of the windows overlapping [`start_ms`, ...): the window holding
    `start_ms` that ends first (a cumulation's first step, a hop's latest start)."""
    return _start_ms(windows, start_ms, windows.slide_ms) + windows.slide_ms


def _start_ms(windows: Windows, timestamp_ms: int, every: int) -> int:
    """`_start` in Python, for bounds known before any row is read."""
    return timestamp_ms - (timestamp_ms - windows.offset_ms) % every


def _start(windows: Windows, rowtime_ms: Column, every: int) -> Column:
    """Flink's `getWindowStartWithOffset(ts, offset, every)`."""
    shifted = rowtime_ms.cast("long") - F.lit(windows.offset_ms).cast("long")
    return rowtime_ms.cast("long") - F.pmod(shifted, F.lit(every).cast("long"))
