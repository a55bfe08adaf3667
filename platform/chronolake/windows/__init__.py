"""Event-time window aggregation (Flink's TUMBLE and HOP window table functions)."""

from chronolake.windows.tvf import (
    WINDOW_END,
    WINDOW_START,
    WINDOW_TIME,
    WindowKind,
    WindowResult,
    hop,
    tumble,
)

__all__ = [
    "WINDOW_END",
    "WINDOW_START",
    "WINDOW_TIME",
    "WindowKind",
    "WindowResult",
    "hop",
    "tumble",
]
