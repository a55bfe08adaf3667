"""The error of a view's last run, while that run is its latest failure.

A failed run leaves no checkpoint (exactly-once: the next run redoes its intent), so
without this record `chronolake status` could not say that the last attempt failed, nor
why. One small document per view, `lake.layout.last_error_path`: written
when a run fails, removed by the next successful run.
"""

from __future__ import annotations

from datetime import UTC, datetime

from pydantic import ConfigDict, Field

from chronolake.errors import ChronolakeError
from chronolake.lake.layout import LAST_ERROR_NAME, state_path
from chronolake.lake.storage import Storage
from chronolake.location import LocationLike
from chronolake.schema.persisted import Persisted
from chronolake.spark.errors import is_spark_error, spark_error_line

MAX_CHARS = 500
"""A longer error is cut here (the command that failed showed it whole)."""


class RunFailure(Persisted):
    """When a view's last run failed, and its error on one line."""

    model_config = ConfigDict(frozen=True)

    at: datetime = Field(..., description="When the run failed (UTC).")
    error: str = Field(..., description="The error, on one line.")


def record_failure(root: LocationLike, name: str, error: BaseException) -> None:
    """Keep `error` as the last run's error of view `name`."""
    if is_spark_error(error):
        text = spark_error_line(error)
    elif isinstance(error, ChronolakeError):
        text = " ".join(str(error).split())
    else:  # not one of ours: its type says more than its message
        text = " ".join(f"{type(error).__name__}: {error}".split())
    failure = RunFailure(at=datetime.now(tz=UTC), error=text[:MAX_CHARS])
    _document(root, name).write_text(LAST_ERROR_NAME, failure.model_dump_json())


def clear_failure(root: LocationLike, name: str) -> None:
    """A successful run: the view's last run did not fail."""
    _document(root, name).delete(LAST_ERROR_NAME)


def last_failure(root: LocationLike, name: str) -> RunFailure | None:
    """The error of view `name`'s last run, if that run failed."""
    document = _document(root, name)
    text = document.read_text(LAST_ERROR_NAME)
    where = str(document.path_of(LAST_ERROR_NAME))
    return RunFailure.read_json(text, where=where) if text else None


def _document(root: LocationLike, name: str) -> Storage:
    """The folder of view `name`'s last error (`layout.last_error_path`)."""
    return Storage(state_path(root, name))

