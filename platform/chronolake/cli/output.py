"""Printing query results for people (a table) and for programs (JSON lines)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import cast

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import DecimalType, TimestampNTZType, TimestampType
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from chronolake.cli.partitions import PartitionsReport
from chronolake.cli.status import TableStatus
from chronolake.clock import lag_text
from chronolake.lake.tables import latest_commits
from chronolake.location import Location
from chronolake.runtime.result import RunResult


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


def print_status(rows: list[TableStatus], backend: str) -> None:
    """`chronolake status` for people: full names, times on two lines (a watermark's lag behind
    the clock on a third) so that the table fits 80 columns, `held` the rows pending in state;
    below the table, where each source's watermark was read and the error of each view whose
    last run failed; last, the lake backend a run here uses (`backend`)."""
    console = Console()
    table = Table(box=box.SIMPLE_HEAD, padding=0, show_edge=False)
    for header in ("name", "kind", "rowtime", "watermark", "held", "last run"):
        table.add_column(
            header, overflow="fold", justify="right" if header == "held" else "left"
        )
    for row in rows:
        last = "" if row.last_run is None else f"{_time(row.last_run_at)} #{row.last_run}"
        if row.last_error is not None:
            last = f"{last}\n[red]failed[/]".lstrip()
        watermark = _time(row.watermark, ms=True)
        if row.lag_seconds is not None:
            watermark += f"\nlag {lag_text(row.lag_seconds)}"
        table.add_row(
            row.name, f"{row.kind}\n{row.what}", row.rowtime or "", watermark,
            "" if row.pending_rows is None else str(row.pending_rows), last,
        )
    console.print(table)
    sources = [f"{row.name} from {row.watermark_from}" for row in rows
               if row.what == "table" and row.watermark_from is not None]
    if sources:
        console.print(f"source watermarks: {'; '.join(sources)}", highlight=False)
    for row in rows:
        if row.last_error is not None:
            console.print(
                f"[red]{row.name}[/]: last run failed at {_time(row.last_error_at, sep=' ')} "
                f"UTC: {escape(row.last_error)}", highlight=False,
            )
    console.print(f"lake backend: {backend}", highlight=False)


def print_status_json(rows: list[TableStatus]) -> None:
    """`chronolake status --format json`: one JSON object per table, one per line."""
    for row in rows:
        print(row.model_dump_json())


def print_partitions(report: PartitionsReport, *, last: int | None) -> None:
    """`chronolake partitions` for people: the schedule, the watermark, the complete
    partitions (first … last) and the next one with what it waits for, then a table of the
    complete partitions that hold rows or were changed (the `last` latest; None: all)."""
    console = Console(highlight=False)
    spec = report.partitions
    column = f" of {spec.column}" if spec.column else ""
    console.print(f"[bold]{report.name}[/]: {spec.schedule} partitions{column} from "
                  f"{spec.start} {spec.zone}")
    if report.watermark_ms is None:
        console.print("  watermark: none yet")
    else:
        console.print(f"  watermark: {_instant(report.watermark_ms)} ({report.watermark_from})")
    done = report.complete
    if not done:
        console.print("  complete: none yet")
    else:
        span = done[0] if len(done) == 1 else f"{done[0]} … {done[-1]}"
        console.print(f"  complete: {len(done)} ({span})")
    if report.next_open is not None and report.next_due_ms is not None:
        console.print(f"  next: {report.next_open.key}, waits for the watermark to reach "
                      f"{_instant(report.next_due_ms)[:-4]}", soft_wrap=True)
        if report.watermark_ms is None:
            console.print("        (there is none yet)")
        else:
            ahead = lag_text((report.next_due_ms - report.watermark_ms) / 1000)
            console.print(f"        ({ahead} beyond the watermark)")
    if not report.derived:
        console.print("A source table's commits stamp no figures per partition; a derived "
                      "table's do.")
        return
    records = report.records
    if not records:
        console.print("No complete partition holds rows yet.")
        return
    shown = records if last is None else records[-last:]
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    table.add_column("partition")
    for header in ("rows", "late", "-U", "+U", "-D", "version"):
        table.add_column(header, justify="right")
    table.add_column("recorded", justify="right")  # no trailing blanks
    for record in shown:
        table.add_row(
            record.key, str(record.rows), str(record.late_rows),
            *(str(record.changes.get(kind, 0)) for kind in ("-U", "+U", "-D")),
            str(record.version), "completed" if record.completed else "changed",
        )
    console.print(table)
    if len(shown) < len(records):
        console.print(f"the latest {len(shown)} of {len(records)} partitions with rows or "
                      "changes; --all shows every one")


def print_feed(
    tables: dict[str, Location], before: dict[str, int], after: dict[str, int]
) -> None:
    """What `chronolake feed` added to each table: its rows appended, updated and deleted,
    and its new Delta versions, read from the Delta log."""
    for name, path in tables.items():
        if after[name] == before[name]:
            print(f"{name}: nothing new")
            continue
        counts = dict.fromkeys(_ROW_METRICS, 0)
        for commit in latest_commits(path, after[name] - before[name]):
            # numbers from delta-rs, their digits from delta-spark
            metrics = cast(Mapping[str, int | str], commit.get("operationMetrics") or {})
            for what, names in _ROW_METRICS.items():
                counts[what] += sum(int(metrics.get(metric, 0)) for metric in names)
            if commit.get("operation") in _WRITES:
                counts["appended"] += int(metrics.get("numOutputRows", 0))
        changes = ", ".join(f"{what} {count}" for what, count in counts.items() if count)
        first, last = before[name] + 1, after[name]
        versions = f"version {last}" if first == last else f"versions {first}-{last}"
        print(f"{name}: rows {changes or 'unchanged'} (Delta {versions})")


_ROW_METRICS = {
    "appended": ("num_added_rows", "num_target_rows_inserted", "numTargetRowsInserted"),
    "updated": ("num_updated_rows", "num_target_rows_updated", "numUpdatedRows",
                "numTargetRowsUpdated"),
    "deleted": ("num_deleted_rows", "num_target_rows_deleted", "numDeletedRows",
                "numTargetRowsDeleted"),
}
"""The row counts a commit's `operationMetrics` hold, as delta-rs and Delta's writer name them
(WRITE, UPDATE, DELETE and MERGE)."""
_WRITES = ("WRITE", "STREAMING UPDATE", "CREATE TABLE AS SELECT", "REPLACE TABLE AS SELECT")
"""Delta's writer counts a write's rows as `numOutputRows`, which its MERGE uses for every row
it writes (copied ones too): only a write's are appended rows."""


def _time(at: datetime | None, *, ms: bool = False, sep: str = "\n") -> str:
    """A UTC time as date and time of day (on two lines by default), '' for none."""
    if at is None:
        return ""
    text = f"{at:%Y-%m-%d}{sep}{at:%H:%M:%S.%f}"
    return text[:-3] if ms else text[:-7]


def _instant(epoch_ms: int) -> str:
    return datetime.fromtimestamp(epoch_ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
