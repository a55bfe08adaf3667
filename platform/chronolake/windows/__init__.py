"""Event-time window aggregation (Flink's TUMBLE, HOP and CUMULATE window table functions)."""

from chronolake.windows.tvf import (
    WINDOW_END,
    WINDOW_START,
    WINDOW_TIME,
    WindowKind,
    WindowResult,
    Windows,
    WindowSplit,
    cumulate,
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
    "cumulate",
    "hop",
    "open_windows",
    "split_windows",
    "tumble",
]
