"""Named fault-injection points, armed by an environment variable, for crash tests.

`CHRONOLAKE_FAULT=after_output` makes the process kill itself with SIGKILL
(no cleanup, no exception handlers) when a run reaches that point, so a test
can prove that running again loses nothing and duplicates nothing.
`CHRONOLAKE_FAULT=after_output:stop` freezes it there instead (SIGSTOP, until a
SIGCONT), as a long pause or a host cut off from the others would: a test can let
another run take over meanwhile, then let the frozen one go on.
"""

from __future__ import annotations

import os
import signal
from enum import StrEnum

FAULT_ENV = "CHRONOLAKE_FAULT"


class FaultPoint(StrEnum):
    """The points where a crash is worth proving harmless: a run's, in run order, then a drop's."""

    AFTER_INTENT = "after_intent"  # input versions fixed, nothing else written
    AFTER_READ = "after_read"  # inputs read and joined, nothing written yet
    IN_STAGING = "in_staging"  # Spark wrote the output's files into staging, not moved in yet
    AFTER_OUTPUT = "after_output"  # output committed
    AFTER_SIDE_OUTPUT = "after_side_output"  # late/invalid rows committed
    AFTER_STATE = "after_state"  # history and state written
    BEFORE_CHECKPOINT = "before_checkpoint"  # the last moment before the commit point
    AFTER_CHECKPOINT = "after_checkpoint"  # committed; old state not yet cleaned up
    DROP_AFTER_OUTPUT = "drop_after_output"  # a drop: unregistered, output gone, state not yet


RUN_FAULT_POINTS = tuple(point for point in FaultPoint if point is not FaultPoint.DROP_AFTER_OUTPUT)
"""The points a run passes, in order (the last point belongs to `DROP VIEW`)."""


def fault_point(point: FaultPoint) -> None:
    """Kill this process with SIGKILL if `CHRONOLAKE_FAULT` names `point` (freeze it with
    SIGSTOP if it names `<point>:stop`)."""
    armed, _, action = os.environ.get(FAULT_ENV, "").partition(":")
    if armed == point.value:
        os.kill(os.getpid(), signal.SIGSTOP if action == "stop" else signal.SIGKILL)
