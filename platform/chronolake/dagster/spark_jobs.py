"""Where a run's time goes: Spark jobs and seconds per stage, without a SparkListener.

Each stage runs under its own Spark job group; afterwards the status tracker
says how many jobs the group started. A run's fixed cost is mostly the number
of small Spark jobs (each ~0.2-1 s locally), so that is what a stage reports.
Spark Connect sessions have no status tracker: their stages report seconds only.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from pyspark import SparkContext
from pyspark.sql import SparkSession

_JOB_GROUP = "spark.jobGroup.id"
_JOB_DESCRIPTION = "spark.job.description"


@dataclass
class StageCost:
    """One stage of a run: its Spark jobs (None: not countable, Spark Connect) and seconds."""

    name: str
    spark_jobs: int | None = None
    seconds: float = 0.0


@contextmanager
def counted_stage(spark: SparkSession, name: str, *, label: str) -> Iterator[StageCost]:
    """Run the body as stage `name`: its Spark jobs carry the job group `label/name/<id>`
    (visible in Spark's UI) and are counted when it ends; the previous group is restored."""
    cost = StageCost(name)
    context = _spark_context(spark)
    started = time.monotonic()
    if context is None:
        try:
            yield cost
        finally:
            cost.seconds = time.monotonic() - started
        return
    group = f"{label}/{name}/{uuid.uuid4().hex[:8]}"
    previous = (context.getLocalProperty(_JOB_GROUP), context.getLocalProperty(_JOB_DESCRIPTION))
    context.setJobGroup(group, f"chronolake {label}: {name}")
    failed = True
    try:
        yield cost
        failed = False
    finally:
        cost.seconds = time.monotonic() - started
        try:
            cost.spark_jobs = len(context.statusTracker().getJobIdsForGroup(group))
            context.setLocalProperty(_JOB_GROUP, previous[0])  # type: ignore[arg-type]
            context.setLocalProperty(_JOB_DESCRIPTION, previous[1])  # type: ignore[arg-type]
        except Exception:
            if not failed:
                raise
            # the stage's own error (Ctrl-C, a JVM gone) is the one to report, not this


def _spark_context(spark: SparkSession) -> SparkContext | None:
    """The session's SparkContext; None for Spark Connect, which has none."""
    try:
        return spark.sparkContext
    except Exception:  # Spark Connect raises its own "not supported" error here
        return None
