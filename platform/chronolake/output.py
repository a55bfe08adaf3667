"""Printing query results for people (a table) and for programs (JSON lines)."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import DecimalType, TimestampNTZType, TimestampType
from rich.console import Console
from rich.table import Table


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
