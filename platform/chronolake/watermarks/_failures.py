"""Turn a failing strategy function into a `RunError` that names the row it failed on.

Spark reports a Python UDF failure without the row. The row is found again by
bisection over arrival order (commit version, then position): each probe is a
count over a slice, about 2·log2(rows) small jobs, run only on this error path.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NoReturn

from pyspark.errors import PythonException
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from chronolake.errors import RunError
from chronolake.lake.changelog import COMMIT_VERSION, POSITION
from chronolake.watermarks.progress import GENERATED, SPLIT


def _fails(frame: DataFrame) -> bool:
    try:
        # One count read back, only on the error path: metadata-sized.
        frame.agg(F.count(F.col(GENERATED))).collect()
    except PythonException:
        return True
    return False


def _first_failing(base: DataFrame, column: str, low: int, high: int) -> int | None:
    """The smallest value of `column` in [low, high] whose rows make the function fail,
    given that the rows of [low, high] do; None if the last probe no longer fails."""
    confirmed = True
    while low < high:
        middle = (low + high) // 2
        confirmed = _fails(base.filter(F.col(column).between(low, middle)))
        if confirmed:
            high = middle
        else:
            low = middle + 1
    if not confirmed and not _fails(base.filter(F.col(column) == low)):
        return None
    return low


def _bounds(frame: DataFrame, column: str) -> tuple[int, int]:
    # Two numbers read back to the driver: metadata-sized.
    row = frame.agg(F.min(column).alias("low"), F.max(column).alias("high")).first()
    assert row is not None, "a global aggregate has one row"
    return int(row["low"]), int(row["high"])


def _error_line(error: PythonException) -> str:
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return lines[-1] if lines else type(error).__name__


def raise_strategy_failure(
    base: DataFrame, error: PythonException, *, strategy: str, key: Sequence[str]
) -> NoReturn:
    """Raise a `RunError` naming the first row (in arrival order) the strategy fails on."""
    failure = _error_line(error)
    where = "on a row that a second evaluation did not reproduce (the function is flaky)"
    version = _first_failing(base, COMMIT_VERSION, *_bounds(base, COMMIT_VERSION))
    if version is not None:
        in_commit = base.filter(F.col(COMMIT_VERSION) == version)
        position = _first_failing(in_commit, POSITION, *_bounds(in_commit, POSITION))
        if position is not None:
            names: list[str | Column] = [SPLIT, *key]
            # One row read back to name it in the message.
            row = in_commit.filter(F.col(POSITION) == position).select(*names).first()
            assert row is not None, "_first_failing found a row at this position"
            described = ", ".join(f"{name}={row[name]!r}" for name in key)
            where = (
                f"on the row at commit version {version}, position {position} "
                f"(split {row[SPLIT]!r}{', ' + described if described else ''})"
            )
    msg = (
        f"watermark strategy {strategy!r} failed {where}: {failure}; fix the function (a "
        "strategy must return a TIMESTAMP, BIGINT or NULL for every row) and run again; "
        "nothing was committed"
    )
    raise RunError(msg) from error
