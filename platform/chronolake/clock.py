"""Processing time, from a clock the runtime is given.

Everything that reads "now" (`PROCTIME()`, processing-time watermarks, idle
timeouts) asks a `Clock` instead of the operating system, so that tests can
drive processing time step by step with a `ManualClock` and every
processing-time behaviour is deterministic.

Example:
    >>> clock = ManualClock(1_000)
    >>> clock.advance(500)
    >>> clock.now_ms()
    1500
"""

from __future__ import annotations

import time
from typing import Protocol, runtime_checkable

from chronolake.errors import RunError


@runtime_checkable
class Clock(Protocol):
    """A source of processing time in milliseconds since the epoch."""

    def now_ms(self) -> int:
        """The current processing time, ms since the epoch (UTC)."""
        ...


class WallClock:
    """The operating system's clock: the default outside tests."""

    def now_ms(self) -> int:
        """Wall-clock time now, ms since the epoch."""
        return time.time_ns() // 1_000_000

    def __repr__(self) -> str:
        return "WallClock()"


class ManualClock:
    """A clock that moves only when told to, for deterministic tests.

    `advance(ms)` moves it forward; `set(ms)` puts it anywhere, backwards
    included, to simulate a wall clock that was corrected.
    """

    def __init__(self, start_ms: int = 0) -> None:
        self._now_ms = int(start_ms)

    def now_ms(self) -> int:
        """The time the clock was last set to."""
        return self._now_ms

    def advance(self, ms: int) -> None:
        """Move the clock forward by `ms` milliseconds (0 allowed)."""
        if ms < 0:
            msg = (
                f"ManualClock.advance(ms) expects ms >= 0, got {ms}; "
                "use ManualClock.set(ms) to move the clock backwards on purpose"
            )
            raise RunError(msg)
        self._now_ms += int(ms)

    def set(self, ms: int) -> None:
        """Put the clock at `ms` since the epoch."""
        self._now_ms = int(ms)

    def __repr__(self) -> str:
        return f"ManualClock({self._now_ms})"


def lag_text(seconds: float) -> str:
    """A lag as a person reads it: `3d 4h`, `2h 05m`, `4m 10s`, `12s` (negative: ahead)."""
    sign, left = ("-" if seconds < 0 else ""), int(abs(seconds))
    days, hours, minutes = left // 86_400, left // 3_600 % 24, left // 60 % 60
    if days:
        return f"{sign}{days}d {hours}h"
    if hours:
        return f"{sign}{hours}h {minutes:02d}m"
    return f"{sign}{minutes}m {left % 60:02d}s" if minutes else f"{sign}{left % 60}s"
