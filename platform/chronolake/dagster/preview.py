"""A few rows of a table as Markdown, for a person looking at a materialization."""

from __future__ import annotations

from chronolake.lake.tables import first_rows
from chronolake.location import Location

PREVIEW_ROWS = 10


def markdown_preview(path: Location, *, rows: int = PREVIEW_ROWS) -> str:
    """The first `rows` rows of the Delta table at `path` as a Markdown table.

    Read without Spark (`first_rows`): a preview is shown after every run, and a Spark job
    would add a second or so to each.
    """
    head = first_rows(path, rows)
    header = "| " + " | ".join(head.column_names) + " |"
    rule = "|" + "---|" * head.num_columns
    lines = [
        "| " + " | ".join("" if value is None else str(value) for value in row.values()) + " |"
        for row in head.to_pylist()
    ]
    return "\n".join([header, rule, *lines])
