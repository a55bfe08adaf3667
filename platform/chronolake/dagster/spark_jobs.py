"""Where a run's time goes: Spark jobs and seconds per stage, without a SparkListener.

A run's fixed cost is mostly the number of small Spark jobs (each ~0.2-1 s locally), so that
is what a stage reports. In a classic session each stage runs under its own Spark job group,
and afterwards the status tracker says how many jobs the group started. A Spark Connect
session has no status tracker: there each stage tags its operations (`addTag`), and the
server's Spark UI (its REST API, on the Connect server's host) lists the jobs with that tag.
A server whose UI is off, or out of reach, leaves the stages with seconds only.
"""

from __future__ import annotations

import json
import socket
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from pyspark import SparkContext
from pyspark.sql import SparkSession

from chronolake.spark.connect_server import ui_applications

_JOB_GROUP = "spark.jobGroup.id"
_JOB_DESCRIPTION = "spark.job.description"
_UI_TIMEOUT_S = 2.0
_UI_FIRST_TIMEOUT_S = 15.0
"""For a session's first request: the UI's REST API starts on the first request it gets
(1.8 s on an idle 2-core machine, more under load)."""
_SETTLE_S = 0.05
"""Between two reads of the UI's job list: a job the stage started is listed within it."""


@dataclass
class StageCost:
    """One stage of a run: its Spark jobs (None: not countable) and seconds."""

    name: str
    spark_jobs: int | None = None
    seconds: float = 0.0


@contextmanager
def counted_stage(spark: SparkSession, name: str, *, label: str) -> Iterator[StageCost]:
    """Run the body as stage `name`: its Spark jobs carry the job group `label/name/<id>`
    (visible in Spark's UI) and are counted when it ends; the previous group is restored.
    On Spark Connect they carry the tag `chronolake-<name>-<id>` instead."""
    cost, started, unique = StageCost(name), time.monotonic(), uuid.uuid4().hex[:8]
    context = _spark_context(spark)
    if context is not None:
        counting = _in_job_group(context, f"{label}/{name}/{unique}", f"chronolake {label}: {name}")
    else:
        counting = _tagged(spark, f"chronolake-{name}-{unique}")  # a tag holds no ","
    try:
        with counting as count:
            yield cost
    finally:
        cost.seconds = time.monotonic() - started
    cost.spark_jobs = count()


@contextmanager
def _in_job_group(context: SparkContext, group: str, description: str
                  ) -> Iterator[Callable[[], int | None]]:
    """The body's jobs in job group `group`; yields how to count them afterwards."""
    previous = (context.getLocalProperty(_JOB_GROUP), context.getLocalProperty(_JOB_DESCRIPTION))
    context.setJobGroup(group, description)
    jobs: list[int] = []
    failed = True
    try:
        yield lambda: jobs[0] if jobs else None
        failed = False
    finally:
        try:
            jobs.append(len(context.statusTracker().getJobIdsForGroup(group)))
            context.setLocalProperty(_JOB_GROUP, previous[0])  # type: ignore[arg-type]
            context.setLocalProperty(_JOB_DESCRIPTION, previous[1])  # type: ignore[arg-type]
        except Exception:
            if not failed:
                raise
            # the stage's own error (Ctrl-C, a JVM gone) is the one to report, not this


@contextmanager
def _tagged(spark: SparkSession, tag: str) -> Iterator[Callable[[], int | None]]:
    """The body's operations tagged `tag`; yields how to count their jobs afterwards."""
    ui = _connect_ui(spark)
    spark.addTag(tag)
    try:
        yield lambda: None if ui is None else _tagged_jobs(ui, tag)
    finally:
        spark.removeTag(tag)


def _connect_ui(spark: SparkSession) -> str | None:
    """The REST API of the Connect server's application; None when its UI is off or out of
    reach. Asked once per session (four round trips), not per stage."""
    session = str(getattr(spark, "session_id", id(spark)))
    if session not in _UI_BY_SESSION:
        _UI_BY_SESSION[session] = _ask_connect_ui(spark)
    return _UI_BY_SESSION[session]


_UI_BY_SESSION: dict[str, str | None] = {}


def _ask_connect_ui(spark: SparkSession) -> str | None:
    try:
        if spark.conf.get("spark.ui.enabled", "true") != "true":
            return None
        port = spark.conf.get("spark.ui.port", "4040")
        host = spark.client.host  # the server's, from sc://
    except Exception:
        return None
    assert port is not None, "conf.get with a default returns a value (typed Optional)"
    base = ui_applications(host, port)
    try:
        # A host that drops packets costs the short timeout, not the first request's long one.
        socket.create_connection((host, int(port)), timeout=_UI_TIMEOUT_S).close()
        with urllib.request.urlopen(base, timeout=_UI_FIRST_TIMEOUT_S) as response:
            [application, *_] = json.load(response)
    except (OSError, ValueError):
        return None
    return f"{base}/{application['id']}"


def _tagged_jobs(ui: str, tag: str) -> int | None:
    """How many jobs the server's UI lists with session tag `tag` (read until two reads
    agree, since the UI learns of a job a moment after it starts)."""
    counts: list[int] = []
    suffix = f"_Tag_{tag}"
    for _ in range(3):
        try:
            with urllib.request.urlopen(f"{ui}/jobs", timeout=_UI_TIMEOUT_S) as response:
                jobs = json.load(response)
        except (OSError, ValueError):
            return None
        counts.append(sum(any(t.endswith(suffix) for t in job.get("jobTags", ())) for job in jobs))
        if len(counts) > 1 and counts[-1] == counts[-2]:
            break
        time.sleep(_SETTLE_S)
    return counts[-1]


def _spark_context(spark: SparkSession) -> SparkContext | None:
    """The session's SparkContext; None for Spark Connect, which has none."""
    try:
        return spark.sparkContext
    except Exception:  # Spark Connect raises its own "not supported" error here
        return None
