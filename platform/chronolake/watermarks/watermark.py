"""Watermark values and watermark statuses.

A watermark says "no more rows with rowtime <= timestamp are expected". Besides
event-time watermarks, the processing-time watermarks proposal adds a kind that
says "follow the wall clock" (`use_processing_time=True`): sources with a
bounded phase then an unbounded phase (the hybrid source) switch to it once the
bounded phase is done.
"""

from __future__ import annotations

import functools
import operator
from dataclasses import dataclass
from enum import StrEnum
from typing import ClassVar

from chronolake.clock import Clock
from chronolake.errors import RunError

LONG_MIN = -(2**63)
"""Java's Long.MIN_VALUE: the watermark before anything is known."""

LONG_MAX = 2**63 - 1
"""Java's Long.MAX_VALUE: +infinity, the final watermark of a bounded input."""


@functools.total_ordering
@dataclass(frozen=True, slots=True, eq=False)
class Watermark:
    """A watermark: `timestamp` in ms since the epoch, and whether it follows the wall clock.

    Semantics of processing-time watermarks (the proposal's note): a
    processing-time watermark may only be emitted with `timestamp <= now`, which
    makes `Watermark(t, True)` equivalent to `Watermark(MIN, True)`: its value
    is the clock's time whenever it is read. So:

    - equality and hashing ignore the timestamp of a processing-time watermark:
      all processing-time watermarks are equal to each other;
    - ordering: event-time watermarks are ordered by timestamp, and every
      event-time watermark (`MAX_WATERMARK` included) sorts *below* every
      processing-time watermark. This is the order in which combining inputs
      works (the proposal's table): `min` over channels gives `(MIN,
      processing)` when all are processing-time and the smallest event-time
      watermark as soon as one is event-time, and a switch from event time to
      processing time is an increase, never a decrease.

    Example:
        >>> Watermark(5) < Watermark(7) < Watermark.MAX_WATERMARK < Watermark(0, True)
        True
        >>> Watermark(1_000, True) == Watermark.PROCESSING_TIME
        True
    """

    timestamp: int
    use_processing_time: bool = False

    MIN_WATERMARK: ClassVar[Watermark]
    MAX_WATERMARK: ClassVar[Watermark]
    PROCESSING_TIME: ClassVar[Watermark]

    def __post_init__(self) -> None:
        try:
            timestamp = operator.index(self.timestamp)
        except TypeError:
            timestamp = None
        if isinstance(self.timestamp, bool) or timestamp is None:
            msg = (
                f"Watermark timestamp must be an int of ms since the epoch, got "
                f"{self.timestamp!r} ({type(self.timestamp).__name__}); convert it first"
            )
            raise RunError(msg)
        if not LONG_MIN <= timestamp <= LONG_MAX:
            msg = (
                f"Watermark timestamp {timestamp} is outside the 64-bit range "
                f"[{LONG_MIN}, {LONG_MAX}]; use Watermark.MAX_WATERMARK for +infinity"
            )
            raise RunError(msg)
        if not isinstance(self.use_processing_time, bool):
            msg = f"Watermark use_processing_time must be a bool, got {self.use_processing_time!r}"
            raise RunError(msg)
        object.__setattr__(self, "timestamp", timestamp)

    def _key(self) -> tuple[int, int]:
        return (1, 0) if self.use_processing_time else (0, self.timestamp)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Watermark):
            return NotImplemented
        return self._key() == other._key()

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Watermark):
            return NotImplemented
        return self._key() < other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def effective_timestamp(self, clock: Clock) -> int:
        """The time this watermark stands for now: the clock's time if it follows the clock.

        Operators fire event-time timers up to this value (the proposal's
        updated `AbstractStreamOperator` behaviour).
        """
        return clock.now_ms() if self.use_processing_time else self.timestamp

    def check_clock(self, clock: Clock) -> None:
        """Raise if this is a processing-time watermark stamped ahead of the clock.

        The proposal requires `t <= now` for `Watermark(t, True)`; a later
        timestamp means the sender's clock runs ahead of ours.
        """
        if not self.use_processing_time:
            return
        now = clock.now_ms()
        if self.timestamp > now:
            msg = (
                f"processing-time watermark {self.timestamp} is ahead of the clock ({now} ms): "
                "a processing-time watermark must carry a timestamp <= now; emit "
                "Watermark.PROCESSING_TIME, or give sender and receiver the same clock"
            )
            raise RunError(msg)


Watermark.MIN_WATERMARK = Watermark(LONG_MIN)
Watermark.MAX_WATERMARK = Watermark(LONG_MAX)
Watermark.PROCESSING_TIME = Watermark(LONG_MIN, use_processing_time=True)


class WatermarkStatus(StrEnum):
    """Whether an input currently holds back the watermark (Flink's `WatermarkStatus`)."""

    IDLE = "idle"
    ACTIVE = "active"

    @property
    def is_idle(self) -> bool:
        """True for IDLE."""
        return self is WatermarkStatus.IDLE

    @property
    def is_active(self) -> bool:
        """True for ACTIVE."""
        return self is WatermarkStatus.ACTIVE
