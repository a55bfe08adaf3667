"""A few rows of a table as Markdown, for a person looking at a materialization."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable

PREVIEW_ROWS = 10


def markdown_preview(path: Path, *, rows: int = PREVIEW_ROWS) -> str:
    """The first `rows` rows of the Delta table at `path` as a Markdown table.

    Read with delta-rs's scan (which honours deletion vectors) from the first batches, not
    with Spark: a preview is shown after every run, and a Spark job would add a second or so
    to each.
    """
    # A handful of rows for display: metadata-sized, so reading them in the driver is fine.
    reader = pa.RecordBatchReader.from_stream(DeltaTable(str(path)).scan())
    batches: list[pa.RecordBatch] = []
    for batch in reader:  # a loop over batches, not rows: stops at the first `rows` rows
        batches.append(batch)
        if sum(b.num_rows for b in batches) >= rows:
            break
    head = pa.Table.from_batches(batches, schema=reader.schema).slice(0, rows)
    header = "| " + " | ".join(head.column_names) + " |"
    rule = "|" + "---|" * head.num_columns
    lines = [
        "| " + " | ".join("" if value is None else str(value) for value in row.values()) + " |"
        for row in head.to_pylist()
    ]
    return "\n".join([header, rule, *lines])
