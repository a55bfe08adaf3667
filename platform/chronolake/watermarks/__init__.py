"""Watermark values, the valve that combines channels, and watermark generation."""

from chronolake.watermarks.assigner import (
    LATE_COLUMN,
    WATERMARK_COLUMN,
    AssignedChangelog,
    WatermarkAssigner,
    WatermarkState,
)
from chronolake.watermarks.late import REASON_COLUMN, LateReason
from chronolake.watermarks.valve import CombinedWatermarkStatus, ValveOutput, WatermarkValve
from chronolake.watermarks.watermark import LONG_MAX, LONG_MIN, Watermark, WatermarkStatus

__all__ = [
    "LATE_COLUMN",
    "LONG_MAX",
    "LONG_MIN",
    "REASON_COLUMN",
    "WATERMARK_COLUMN",
    "AssignedChangelog",
    "CombinedWatermarkStatus",
    "LateReason",
    "ValveOutput",
    "Watermark",
    "WatermarkAssigner",
    "WatermarkState",
    "WatermarkStatus",
    "WatermarkValve",
]
