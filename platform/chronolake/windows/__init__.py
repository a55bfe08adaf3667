"""Event-time window aggregation (Flink's TUMBLE and HOP window table functions)."""

from chronolake.windows.tvf import (
    WINDOW_END,
    WINDOW_START,
    WINDOW_TIME,
    WindowKind,
    WindowResult,
    Windows,
    WindowSplit,
    hop,
    open_windows,
    split_windows,
    tumble,
)

__all__ = [
    "WINDOW_END",
    "WINDOW_START",
    "WINDOW_TIME",
    "WindowKind",
    "WindowResult",
    "WindowSplit",
    "Windows",
    "hop",
    "open_windows",
    "split_windows",
    "tumble",
]
