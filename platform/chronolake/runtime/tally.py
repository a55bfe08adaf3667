"""Counts over a frame taken by the job that writes what is built on it.

A run's figures are counts over the frames it writes (an operator's output, its state). Counted
before the writes, each needs a job that reads the frame once more; observed on the write
(`DataFrame.observe`), they cost no job and no pass of their own. A write can be skipped (a
redone run whose write was committed before it was killed), or read its frame through a
checkpoint whose query ends before its rows are computed: then the counts come from a job of
their own.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from pyspark.sql import Column, DataFrame, Observation

from chronolake.runtime.reuse import reused

REPORT_WAIT_SECONDS = 2.0
"""How long a write's observation may take to complete after the write returned (classic
Spark completes it before; the wait only guards against a later completion)."""


class Tally:
    """Named aggregates over `frame`: build the written frame on `observed`, and on nothing
    else, then read `written(version)`; or read `counted()` for a job of their own.

    `held`: the counts are taken by `counted()` (the write cannot observe them), so the frame
    is held (`reused`): computed once, read by the count and by the write. `behind_view`: the
    write reads `observed` through the view's SQL (`chronolake.spark.frames`), inside its
    plan; unless such an observation is reported exactly (`_observed_exactly_inside`), the
    counts are taken by `counted()` and the frame is held too.
    """

    def __init__(
        self, frame: DataFrame, aggregates: Mapping[str, Column], *, held: bool = False,
        behind_view: bool = False,
    ) -> None:
        self._exact = not behind_view or _observed_exactly_inside(frame)
        if held or not self._exact:
            frame = reused(frame)
        self.frame, self.aggregates = frame, dict(aggregates)
        named = [column.alias(name) for name, column in aggregates.items()]
        self._observation = _observation_for(frame)
        self.observed = frame.observe(self._observation, *named)

    def counted(self) -> dict[str, int]:
        """The counts, taken now by one aggregation over the frame."""
        named = [column.alias(name) for name, column in self.aggregates.items()]
        row = self.frame.agg(*named).first()  # one row of counts
        assert row is not None, "a global aggregate has one row"
        return self._counts(row.asDict())

    def written(self, version: int | None) -> dict[str, int]:
        """The counts the write of a frame built on `observed` took, `version` the version it
        committed; None means it was skipped, or read `observed` through a checkpoint (whose
        own query completes the observation at once, with zeros: the caller must know, a
        tally cannot tell), so they are counted now. So are counts the write did not report
        (`_reported`)."""
        observed = {} if version is None or not self._exact else _reported(self._observation)
        if not all(name in observed for name in self.aggregates):
            return self.counted()
        return self._counts(observed)

    def _counts(self, values: Mapping[str, object]) -> dict[str, int]:
        return {name: int(value or 0) for name, value in values.items()}  # type: ignore[call-overload]


def _reported(observation: Observation) -> Mapping[str, object]:
    """What the query that ran `observation`'s frame reported: nothing when its plan lost the
    observed part (adaptive execution drops the side of a join it finds empty, an observation
    there with it: classic Spark then completes the observation with an empty row, which
    pyspark cannot convert), when Spark Connect's client did not see the observation in the
    plan it sent (one in a frame an SQL query reads) or reports an error for it, and when no
    query ran the frame at all (a write another attempt had committed, credited with a later
    version by a concurrent commit): classic Spark's `get` would wait for it forever."""
    if not _completed(observation):
        return {}
    try:
        return observation.get
    except Exception:  # any failure to report means: count them instead
        return {}


def _completed(observation: Observation) -> bool:
    """Whether a query completed `observation` (classic Spark completes it as the query ends;
    a Connect observation holds what its query's responses carried, never waits)."""
    completion = getattr(observation, "_jo", None)
    if completion is None:
        return True
    deadline = time.monotonic() + REPORT_WAIT_SECONDS
    while not completion.future().isCompleted():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _observed_exactly_inside(frame: DataFrame) -> bool:
    """Whether an observation inside another query's plan reports each row once: in a classic
    session on a local master. Spark Connect's client does not report one there, and on a
    cluster its stage may run again (a lost executor, a speculative task), every attempt
    adding to it."""
    if _is_connect(frame):
        return False
    master = frame.sparkSession.sparkContext.master  # typed Optional; set on a running context
    return master is not None and master.startswith("local")


def _is_connect(frame: DataFrame) -> bool:
    from pyspark.sql.connect.dataframe import DataFrame as ConnectDataFrame

    return isinstance(frame, ConnectDataFrame)


def _observation_for(frame: DataFrame) -> Observation:
    """An observation for `frame`'s kind of session. `Observation()` picks Spark Connect's
    whenever the process has opened a Connect session, even for a classic frame."""
    if _is_connect(frame):
        from pyspark.sql.connect.observation import Observation as ConnectObservation

        return ConnectObservation()  # type: ignore[return-value]
    observation = object.__new__(Observation)  # the classic class, whatever the process opened
    Observation.__init__(observation)
    return observation
