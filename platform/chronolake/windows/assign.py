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

from dataclasses import dataclass
from enum import StrEnum

from pyspark.sql import Column
from pyspark.sql import functions as F

START = "start"
END = "end"


class WindowKind(StrEnum):
    """The window table functions."""

    TUMBLE = "TUMBLE"
    HOP = "HOP"
    CUMULATE = "CUMULATE"
    SESSION = "SESSION"  # merging windows: `chronolake.windows.session`, not `Windows`


@dataclass(frozen=True)
class Windows:
    """The windows of one window table function call.

    `size_ms`: the window size (CUMULATE: the max size). `slide_ms`: the slide
    (TUMBLE: the size; CUMULATE: the step). `offset_ms`: Flink's optional offset,
    shifting every window bound; any sign or magnitude (checked by the callers).
    """

    kind: WindowKind
    size_ms: int
    slide_ms: int
    offset_ms: int = 0

    def last_end(self, rowtime_ms: Column) -> Column:
        """The largest end of the windows holding `rowtime_ms`: once it fired, the row is done."""
        every = self.size_ms if self.kind is WindowKind.CUMULATE else self.slide_ms
        return self._start(rowtime_ms, every) + F.lit(self.size_ms)

    def bounds(self, rowtime_ms: Column) -> Column:
        """Every window holding `rowtime_ms`, as `array<struct<start, end>>` (epoch ms)."""
        size, slide = F.lit(self.size_ms).cast("long"), F.lit(self.slide_ms).cast("long")
        if self.kind is WindowKind.CUMULATE:
            start = self._start(rowtime_ms, self.size_ms)
            first_end = self._start(rowtime_ms, self.slide_ms) + slide
            return F.transform(
                F.sequence(first_end, start + size, slide),
                lambda end: F.struct(start.alias(START), end.alias(END)),
            )
        last_start = self._start(rowtime_ms, self.slide_ms)
        return F.transform(
            F.sequence(last_start - size + slide, last_start, slide),
            lambda start: F.struct(start.alias(START), (start + size).alias(END)),
        )

    def _start(self, rowtime_ms: Column, every: int) -> Column:
        """Flink's `getWindowStartWithOffset(ts, offset, every)`."""
        shifted = rowtime_ms.cast("long") - F.lit(self.offset_ms).cast("long")
        return rowtime_ms.cast("long") - F.pmod(shifted, F.lit(every).cast("long"))
