"""What a window table function call declares: its kind, its sizes, and the columns it adds.

The planner (`chronolake.sql.window`) reads these from a view's SQL; the window operators
(`chronolake.windows`) assign rows to the windows they describe.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

WINDOW_START = "window_start"
WINDOW_END = "window_end"
WINDOW_TIME = "window_time"
WINDOW_COLUMNS = (WINDOW_START, WINDOW_END, WINDOW_TIME)
"""The columns every window table function adds to its input's, in Flink's order."""


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
