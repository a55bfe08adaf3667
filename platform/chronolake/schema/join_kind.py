"""The one join-kind enum: the SQL planners (temporal, interval) and the as-of core share it.

Each planner accepts the kinds Flink allows for its join and refuses the others with its own
message: a temporal join is INNER or LEFT, an interval join any of the four. The values are the
lower-case SQL words, so a kind written into a spec reads back the same.
"""

from __future__ import annotations

from enum import StrEnum


class JoinKind(StrEnum):
    """Which rows without a match are emitted, null-padded: none, the left's, the right's, both."""

    INNER = "inner"
    LEFT = "left"
    RIGHT = "right"
    FULL = "full"

    @property
    def pads_left(self) -> bool:
        """True when an unmatched left (probe) row is emitted with null right columns."""
        return self in (JoinKind.LEFT, JoinKind.FULL)

    @property
    def pads_right(self) -> bool:
        """True when an unmatched right (build) row is emitted with null left columns."""
        return self in (JoinKind.RIGHT, JoinKind.FULL)
