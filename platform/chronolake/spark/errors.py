"""Spark's errors in a line: what Spark could not do, and the name it suggests instead.

An error Spark raises while analysing or running a query carries the query's plan and a
JVM stack trace: 13-16 KB where a user needs one sentence. The CLI prints this summary and
writes the full text to a log file; Python API callers keep the real exception (nothing
here raises or replaces it).

Example, for the AnalysisException of `SELECT amonut FROM orders`:
    >>> spark_error_line(error)
    'A column, variable, or function parameter with name `amonut` cannot be resolved; did
    you mean `amount`? [UNRESOLVED_COLUMN.WITH_SUGGESTION]'
"""

from __future__ import annotations

import re

from py4j.protocol import Py4JError, Py4JJavaError
from pyspark.errors import PySparkException

MAX_CHARS = 400
"""A message longer than this is cut (the full text is in the log)."""

_CANDIDATES = re.compile(
    r"\s*(Otherwise )?did you mean one of the following( column\(s\))?\? \[.*?\]\.?",
    re.IGNORECASE,
)
_SQLSTATE = re.compile(r"\s*SQLSTATE: \w+\.?")


def is_spark_error(error: BaseException) -> bool:
    """Whether `error` was raised by Spark (analysis, parsing or a failed job)."""
    return isinstance(error, PySparkException | Py4JJavaError)


def spark_error_line(error: BaseException) -> str:
    """Spark's message on one line: without the plan, the SQLSTATE and the list of
    candidates; with the name Spark suggests first (`did you mean ...?`) and the error
    condition in brackets."""
    condition, message, parameters = _parts(error)
    message = _SQLSTATE.sub("", message.removeprefix(f"[{condition}]").strip())
    proposal = parameters.get("proposal") or parameters.get("proposals")
    if proposal:
        message = _CANDIDATES.sub("", message).rstrip(" .")
        message += f"; did you mean {proposal.split(', ')[0]}?"
    message = message.rstrip(" ;")
    if len(message) > MAX_CHARS:
        message = message[: MAX_CHARS - 1] + "…"
    return f"{message} [{condition}]" if condition else message


def _parts(error: BaseException) -> tuple[str | None, str, dict[str, str]]:
    """(error condition, message's first line, message parameters), asking the JVM as
    little as possible and falling back to the exception's own text."""
    try:
        if isinstance(error, PySparkException):
            condition = error.getCondition()
            message = error.getMessage() if condition else ""
            return condition, message or _first_line(str(error)), error.getMessageParameters() or {}
        if isinstance(error, Py4JJavaError):
            cause = error.java_exception
            while cause.getCause() is not None:  # the root cause says what went wrong
                cause = cause.getCause()
            message = f"{cause.getClass().getSimpleName()}: {cause.getMessage()}"
            return None, _first_line(message), {}
    except Py4JError:  # the JVM is gone: its text is all there is
        pass
    return None, _first_line(str(error)), {}


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else "(no message)"
