"""A few rows of a table as Markdown, for a person looking at a materialization."""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import SparkSession

from chronolake.lake import backend_for

PREVIEW_ROWS = 10


def markdown_preview(spark: SparkSession, path: Path, *, rows: int = PREVIEW_ROWS) -> str:
    """The first `rows` rows of the Delta table at `path` as a Markdown table."""
    frame = backend_for(spark).snapshot(path).limit(rows)
    header = "| " + " | ".join(frame.columns) + " |"
    rule = "|" + "---|" * len(frame.columns)
    # A handful of rows for display: metadata-sized, so taking them to the driver is fine.
    lines = [
        "| " + " | ".join("" if value is None else str(value) for value in row) + " |"
        for row in frame.take(rows)
    ]
    return "\n".join([header, rule, *lines])
