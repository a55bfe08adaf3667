"""Watermark alignment (FLIP-182/217): a group's max desired watermark, and split pausing."""

from chronolake.alignment.aligner import ALLOW_UNALIGNED_SOURCE_SPLITS, SplitAligner
from chronolake.alignment.coordinator import AlignmentCoordinator, AlignmentParams

__all__ = [
    "ALLOW_UNALIGNED_SOURCE_SPLITS",
    "AlignmentCoordinator",
    "AlignmentParams",
    "SplitAligner",
]
