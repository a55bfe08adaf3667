"""Watermark values, the valve that combines channels, and watermark generation."""

from chronolake.watermarks.valve import CombinedWatermarkStatus, ValveOutput, WatermarkValve
from chronolake.watermarks.watermark import LONG_MAX, LONG_MIN, Watermark, WatermarkStatus

__all__ = [
    "LONG_MAX",
    "LONG_MIN",
    "CombinedWatermarkStatus",
    "ValveOutput",
    "Watermark",
    "WatermarkStatus",
    "WatermarkValve",
]
