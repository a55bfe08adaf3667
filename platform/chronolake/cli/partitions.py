"""Where a partitioned table's time partitions stand, read from the catalog and Delta logs (no
Spark): `chronolake partitions NAME`.

A partition is complete once the table's watermark passed its end
(`chronolake.watermarks.partitions`); each commit of a derived table stamped the partitions it
completed or changed, with their figures (`chronolake.lake.stamps`), which is what Dagster
records as their materializations. Partitions whose commits log cleanup removed show no
figures.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from chronolake.catalog import load_entries
from chronolake.catalog.watermarks import current_watermarks
from chronolake.errors import DefinitionError
from chronolake.lake.layout import output_path
from chronolake.lake.stamps import PartitionFigures, logged_stamps
from chronolake.lake.tables import is_table
from chronolake.location import LocationLike, as_location
from chronolake.schema import ViewSpec
from chronolake.schema.time_options import TimePartitions
from chronolake.sql.existing import unknown_error
from chronolake.sql.partition_windows import partition_windows
from chronolake.watermarks.partitions import (
    PartitionWindow,
    complete,
    completed_at,
    first_start_ms,
    windows_between,
)


@dataclass(frozen=True, slots=True)
class PartitionRecord:
    """A complete partition as the table's commits left it."""

    key: str
    rows: int
    late_rows: int
    changes: Mapping[str, int]
    """The row changes of the commit that last recorded it, by row kind."""
    version: int
    """The Delta version that completed it or last changed it."""
    completed: bool
    """Whether that commit completed it (else it changed it once complete)."""


@dataclass(frozen=True, slots=True)
class PartitionsReport:
    """A partitioned table's partitions: which are complete, which is next, and their rows."""

    name: str
    derived: bool
    partitions: TimePartitions
    watermark_ms: int | None
    watermark_from: str | None
    complete: list[str]
    """The keys of the complete partitions, oldest first."""
    next_open: PartitionWindow | None
    """The first partition that is not complete."""
    next_due_ms: int | None
    """The watermark that completes it."""
    records: list[PartitionRecord] = field(default_factory=list)
    """The complete partitions that hold rows or late rows or were changed, oldest first."""


def partitions_report(root: LocationLike, name: str) -> PartitionsReport:
    """Where the partitions of table or view `name` stand; `UnknownNameError` for a name
    nothing is registered under, `DefinitionError` for one without time partitions."""
    location = as_location(root)
    entries = load_entries(location)
    entry = entries.get(name.lower())
    if entry is None:
        raise unknown_error(name, None, (e.spec.name for e in entries.values()),
                            statement="chronolake partitions")
    spec = entry.spec
    partitions = spec.time.partitions
    if partitions is None:
        keyword = "VIEW" if entry.kind == "view" else "TABLE"
        msg = (
            f"{entry.kind} {spec.name!r} has no time partitions; declare them with its WITH "
            f"options, e.g. CREATE OR REPLACE {keyword} {spec.name} WITH "
            "('partition.time.schedule' = 'hourly', 'partition.time.start' = '2026-11-01') ..."
        )
        raise DefinitionError(msg)
    watermark = current_watermarks(location, {name.lower(): entry})[name.lower()]
    windows = partition_windows(spec, {n: e.spec for n, e in entries.items()})
    start = first_start_ms(partitions)
    reached = watermark.watermark_ms
    upto = start + 1 if reached is None else max(reached, start) + 1
    # every partition up to the one holding the watermark, which is open
    candidates = windows_between(partitions, start, upto)
    done = complete(candidates, windows, reached)
    pending = [window for window in candidates if window not in done]
    next_open = pending[0] if pending else None
    derived = isinstance(spec, ViewSpec)
    return PartitionsReport(
        name=spec.name, derived=derived, partitions=partitions,
        watermark_ms=reached, watermark_from=watermark.watermark_from,
        complete=[window.key for window in done], next_open=next_open,
        next_due_ms=None if next_open is None else completed_at(next_open, windows),
        records=_records(output_path(location, spec.name)) if derived else [],
    )


def _records(path: LocationLike) -> list[PartitionRecord]:
    """The partitions the commits of a derived table stamped, each as its latest stamp left
    it: rows and late rows from the latest; changes and version from the latest that
    recorded it (completed it or changed its rows)."""
    if not is_table(path):
        return []
    latest: dict[str, PartitionFigures] = {}
    recorded: dict[str, tuple[PartitionFigures, int]] = {}
    for stamp in logged_stamps(path):
        for figures in stamp.partitions:
            latest[figures.key] = figures
            if figures.materialized:
                recorded[figures.key] = (figures, stamp.version)
    records = []
    for key in recorded:  # in the order they completed: time order
        figures, version = recorded[key]
        now = latest[key]
        if now.rows or now.late_rows or not figures.completed:
            records.append(PartitionRecord(
                key=key, rows=now.rows, late_rows=now.late_rows, changes=figures.changes,
                version=version, completed=figures.completed,
            ))
    return records
