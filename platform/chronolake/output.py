"""Printing query results for people (a table) and for programs (JSON lines)."""

from __future__ import annotations

from datetime import UTC, datetime

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import DecimalType, TimestampNTZType, TimestampType
from rich.console import Console
from rich.table import Table

from chronolake.runtime.result import RunResult
from chronolake.status import TableStatus


def _portable(frame: DataFrame) -> DataFrame:
    """Timestamps as 'YYYY-MM-DD HH:MM:SS[.fff]' and decimals as exact strings, in Spark."""
    columns: list[Column] = []
    for field in frame.schema.fields:
        column = F.col(f"`{field.name}`")
        if isinstance(field.dataType, TimestampType | TimestampNTZType):
            text = F.date_format(column, "yyyy-MM-dd HH:mm:ss.SSS")
            column = F.regexp_replace(text, r"\.000$", "")
        elif isinstance(field.dataType, DecimalType):
            column = column.cast("string")
        columns.append(column.alias(field.name))
    return frame.select(*columns)


def print_jsonl(frame: DataFrame) -> None:
    """One JSON object per row on standard output."""
    options = {"timestampFormat": "yyyy-MM-dd HH:mm:ss.SSS", "ignoreNullFields": "false"}
    lines = _portable(frame).select(F.to_json(F.struct("*"), options).alias("json"))
    # Printing query results to a terminal is the one place rows leave Spark on purpose.
    for row in lines.toLocalIterator():
        print(row.json)


def print_table(frame: DataFrame) -> None:
    """The rows as a table for people."""
    portable = _portable(frame)
    table = Table(*portable.columns, show_lines=False)
    # Printing query results to a terminal is the one place rows leave Spark on purpose.
    for row in portable.toLocalIterator():
        table.add_row(*("NULL" if value is None else str(value) for value in row))
    Console().print(table)


def print_run(result: RunResult) -> None:
    """A run's outcome and figures."""
    console = Console()
    console.print(f"[bold]{result.table}[/]: {result.message}")
    if result.watermark_ms is not None:
        kind = "processing time" if result.processing_time else "event time"
        console.print(f"  watermark: {_instant(result.watermark_ms)} ({kind})")
    if result.waiting_reason:
        console.print(f"  waiting: {result.waiting_reason}")
    for name, value in result.figures.items():
        console.print(f"  {name}: {value}")


def print_status(rows: list[TableStatus]) -> None:
    """`chronolake status` as a table."""
    table = Table("name", "what", "kind", "rowtime", "watermark", "pending", "last run")
    for row in rows:
        last = "" if row.last_run_at is None else f"#{row.last_run} at {row.last_run_at:%H:%M:%S}"
        table.add_row(
            row.name, row.what, row.kind, row.rowtime or "",
            "" if row.watermark is None else f"{row.watermark:%Y-%m-%d %H:%M:%S.%f}"[:-3],
            "" if row.pending_rows is None else str(row.pending_rows), last,
        )
    Console().print(table)


def _instant(epoch_ms: int) -> str:
    return datetime.fromtimestamp(epoch_ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
