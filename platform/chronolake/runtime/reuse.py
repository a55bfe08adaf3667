"""Frames a run reads more than once, computed once."""

from __future__ import annotations

from pyspark.sql import DataFrame


def reused(frame: DataFrame) -> DataFrame:
    """`frame`, computed once by the first job that needs it and read back by the others.

    A lazy local checkpoint: no Spark job of its own (an eager one costs a job each, which
    dominates a run on a few rows), and later plans start from the stored rows.
    """
    return frame.localCheckpoint(eager=False)
