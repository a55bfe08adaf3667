"""One input of a run, in two steps: read its new commits (or, for a hybrid source, a
snapshot first), then assign their watermarks.

`read_input` defines the rows (lazy) and where the input stands afterwards; it
assigns nothing, so a run (and Dagster) can show reading and assigning as two
stages. `assign_watermarks` then stamps the rows: a source with `WATERMARK FOR`
generates event-time watermarks per split (`WatermarkAssigner`). A source
without one follows processing time: it emits `(MIN, processing)`. A hybrid
source (`'scan.startup.mode' = 'snapshot-then-changelog'`) reads the table at
version v as `+I` rows first; while bounded it makes no event-time progress,
and at the switch to the change data feed (from v + 1) it emits the
processing-time watermark.

Before a read is defined the source is checked (`source_checks`): a bad input
stops the run before anything is written. A full refresh starts an input from
its last OVERWRITE, read as a snapshot of inserts (the *bootstrap* phase).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass, replace

from pyspark.errors import PythonException
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from chronolake.catalog import Catalog
from chronolake.catalog.checkpoint import InputPosition, ReadPhase
from chronolake.catalog.relations import through_view_rows, with_declared_columns
from chronolake.errors import SourceError
from chronolake.lake import read_table_arrivals
from chronolake.lake.changelog import (
    COMMIT_TIMESTAMP,
    COMMIT_VERSION,
    POSITION,
    ROW_KIND,
    SYSTEM_COLUMNS,
    RowKind,
)
from chronolake.lake.file_span import FileSpan
from chronolake.lake.stamps import recorded_watermarks
from chronolake.lake.tables import partition_columns
from chronolake.runtime.reuse import reused
from chronolake.runtime.source_checks import (
    check_columns,
    declared_column_types,
    overwrite_versions,
)
from chronolake.schema import StartupMode, TableSpec
from chronolake.schema.options import SPLIT_BY_PARTITIONS
from chronolake.watermarks.assigner import (
    LATE_COLUMN,
    WATERMARK_COLUMN,
    WatermarkAssigner,
    WatermarkState,
    collect_maxima,
)
from chronolake.watermarks.progress import SplitTick
from chronolake.watermarks.recorded import in_force_by_commit, or_min
from chronolake.watermarks.valve import CombinedWatermarkStatus
from chronolake.watermarks.watermark import LONG_MIN, Watermark, WatermarkStatus


@dataclass(frozen=True)
class ChangelogRead:
    """One input's rows for this run, before watermarks are assigned (`assign_watermarks`)."""

    spec: TableSpec
    rows: DataFrame
    """The changelog rows the run covers (lazy), without `_watermark` and `_late`."""
    position: InputPosition
    """Where the input stands after the run; its watermark state is still the one before."""
    partition_columns: tuple[str, ...]
    """The Delta table's partition columns at the read's end, for `'$partitions'` splits
    (empty for other tables: they are not read)."""
    switched_at: int | None = None
    """The snapshot's version when this read is a hybrid source's snapshot phase."""
    recorded_watermarks: Mapping[int, int | None] | None = None
    """For a derived table read as a source: the output watermark each commit of the read
    (and the one before it) recorded, by version."""
    views: tuple[TableSpec, ...] = ()
    """The plain views this input is, innermost first, when it reads `spec`'s changes through
    their SELECTs."""

    @property
    def phase(self) -> ReadPhase:
        return self.position.phase


@dataclass(frozen=True)
class InputRead:
    """One input's rows for this run, watermarks assigned, and where it stands afterwards."""

    spec: TableSpec
    rows: DataFrame
    """Read from the rows `assign_all` holds; held again where they cost more to compute than
    to store (stamped in arrival order, or through a view's SELECT), so an operator reads them
    as they are, however many of its jobs do."""
    watermark: Watermark
    position: InputPosition
    switched_at: int | None = None
    assigner: WatermarkAssigner | None = None
    """The generator that stamped `rows` (None: the source follows processing time)."""
    maxima: tuple[SplitTick, ...] = ()
    """The assigner's per-(split, commit) facts, from which the run's ticks are cut."""

    @property
    def phase(self) -> ReadPhase:
        return self.position.phase

    @property
    def idle(self) -> bool:
        """Whether every split of the input is idle after the run (`'scan.idle-timeout'`)."""
        return self.position.watermarks.status.is_idle


def combined_watermark(reads: Iterable[InputRead], *, with_idleness: bool = True) -> Watermark:
    """The watermark of an operator over `reads`, its inputs: Flink's rule for the inputs of
    a multi-input operator (`CombinedWatermarkStatus`), where an idle input does not hold
    the others back. `with_idleness=False` counts every input as active (a tick before the
    run's last, whose idleness is not tracked per input)."""
    return combined_of([(read.watermark, with_idleness and read.idle) for read in reads])


def combined_of(inputs: Sequence[tuple[Watermark, bool]]) -> Watermark:
    """`combined_watermark` of inputs given as (watermark, idle) pairs."""
    combined = CombinedWatermarkStatus(len(inputs))
    for index, (watermark, idle) in enumerate(inputs):
        combined.update_watermark(index, watermark)
        if idle:
            combined.update_status(index, WatermarkStatus.IDLE)
    return combined.watermark


def position_watermark(position: InputPosition) -> tuple[Watermark, bool]:
    """Where an input's watermark stands at `position`, and whether it is idle there."""
    return position.watermarks.to_watermark(), position.watermarks.status.is_idle


def initial_position(spec: TableSpec) -> InputPosition:
    """Where a never-run input starts: hybrid sources in their snapshot phase."""
    hybrid = spec.options.startup_mode is StartupMode.SNAPSHOT_THEN_CHANGELOG
    return InputPosition(phase=ReadPhase.SNAPSHOT if hybrid else ReadPhase.CHANGELOG)


def refresh_position(catalog: Catalog, spec: TableSpec, end_version: int) -> InputPosition:
    """Where a full refresh starts an input.

    A hybrid source starts with its snapshot, as on a first run. Any other source
    starts at its last OVERWRITE (that version read as inserts, then its changes),
    at version 0 when it has none, or at a snapshot of `end_version` when the
    changes from there can no longer be read (VACUUM or log cleanup removed them:
    the refresh then sees the table as it is, without its history). A plain view starts
    where its source does.
    """
    if spec.through_view is not None:
        return refresh_position(catalog, spec.through_view.source, end_version)
    if spec.options.startup_mode is StartupMode.SNAPSHOT_THEN_CHANGELOG:
        return initial_position(spec)
    last = max(overwrite_versions(catalog.table_path(spec), 0, end_version), default=0)
    phase = ReadPhase.BOOTSTRAP if last else ReadPhase.CHANGELOG
    start = InputPosition(version=last - 1, phase=phase)
    try:
        _rows(catalog, spec, start, end_version)  # defines the read: checks the log and files
    except SourceError:
        return InputPosition(version=end_version - 1, phase=ReadPhase.BOOTSTRAP)
    return start


def read_input(
    catalog: Catalog,
    spec: TableSpec,
    position: InputPosition,
    end_version: int,
    *,
    derived: str,
    span: FileSpan | None = None,
) -> ChangelogRead:
    """The input's rows after `position` up to `end_version` (lazy), watermarks not assigned.

    Raises `SourceError` (before any Spark job) when the source lost or retyped a declared
    column, or cannot be read in that range; `derived` is the derived table's name, for the
    message. That the source is a Delta table the run checked first (`DerivedTable.prepare`).
    A plain view reads its source's changes. A `span` limits a bootstrap's snapshot to the
    files that may hold rows in it (a restatement's region; rows outside may still come).
    """
    if spec.through_view is not None:
        read = read_input(catalog, spec.through_view.source, position, end_version,
                          derived=derived)
        return replace(read, views=(*read.views, spec))
    path = catalog.table_path(spec)
    columns = declared_column_types(path, spec, end_version)
    check_columns(
        spec, consumed=position.columns, consumed_version=position.version, current=columns,
        version=end_version, derived=derived,
    )
    rows = _rows(catalog, spec, position, end_version, span)
    recorded = None
    if spec.derived and spec.rowtime is not None:  # without one it follows processing time
        recorded = recorded_watermarks(catalog.backend, path, position.version, end_version)
        if position.phase is ReadPhase.BOOTSTRAP:  # a refresh reads the snapshot as new rows
            recorded[position.version] = None
    # Read from the log only where the splits follow them ('$partitions').
    by_partitions = spec.options.split_by == SPLIT_BY_PARTITIONS
    partitions = tuple(partition_columns(path, end_version)) if by_partitions else ()
    if position.phase is ReadPhase.SNAPSHOT:
        moved = InputPosition(version=end_version, phase=ReadPhase.CHANGELOG, columns=columns)
        return ChangelogRead(
            spec, rows, moved, partitions, switched_at=end_version, recorded_watermarks=recorded
        )
    moved = InputPosition(
        version=max(end_version, position.version),
        watermarks=position.watermarks,
        phase=ReadPhase.CHANGELOG,
        columns=columns,
    )
    return ChangelogRead(spec, rows, moved, partitions, recorded_watermarks=recorded)


def assign_all(
    reads: Mapping[str, ChangelogRead], *, now_ms: int | None = None
) -> dict[str, InputRead]:
    """`assign_watermarks` for every read, with the event-time inputs' per-split maxima
    collected in one Spark job for all of them instead of one each.

    Each read's rows are held from that job on (`reused`): the run reads its inputs' files
    once, however many of its jobs read the rows after (on an object store every read of a
    file is a request, and its bytes cross the network again).
    """
    reads = {name: replace(read, rows=reused(read.rows)) for name, read in reads.items()}
    assigners = {name: _assigner(read) for name, read in reads.items()}
    timed = {name: assigner for name, assigner in assigners.items() if assigner is not None}
    facts: dict[str, tuple[SplitTick, ...]] = {}
    if timed:
        queries = [assigner.fact_rows(reads[name].rows) for name, assigner in timed.items()]
        # On a failing strategy, each input runs on its own below: the error names its row.
        with suppress(PythonException):
            facts = dict(zip(timed, collect_maxima(queries), strict=True))
    return {
        name: assign_watermarks(read, now_ms=now_ms, maxima=facts.get(name))
        for name, read in reads.items()
    }


def assign_watermarks(
    read: ChangelogRead,
    *,
    now_ms: int | None = None,
    maxima: Sequence[SplitTick] | None = None,
) -> InputRead:
    """The read's rows stamped with `_watermark` and `_late`, and the input's new watermark.

    An event-time source runs its `WatermarkAssigner` from the stored state (one Spark
    job: the per-split maxima, unless given as `maxima`) and moves the position's
    watermark state; a source without `WATERMARK FOR`, and a hybrid source in either
    phase, follow processing time and nothing is late. `now_ms` is the run's clock,
    against which a split with no new rows may go idle (`'scan.idle-timeout'`). A plain
    view's rows are its source's, watermarked, through the view's SELECT.
    """
    assigned = _assign(read, now_ms=now_ms, maxima=maxima)
    if not read.views:
        return assigned
    rows = assigned.rows
    carried = [c for c in (*SYSTEM_COLUMNS, WATERMARK_COLUMN, LATE_COLUMN) if c in rows.columns]
    for view in read.views:
        assert view.through_view is not None
        rows = through_view_rows(rows, view.through_view.query, carried, view.through_view.source)
    # a view's SELECT may compute anything: computed once, for every job that reads the rows
    return InputRead(read.views[-1], reused(rows), assigned.watermark, assigned.position,
                     read.switched_at)


def _assign(
    read: ChangelogRead, *, now_ms: int | None, maxima: Sequence[SplitTick] | None
) -> InputRead:
    spec, position = read.spec, read.position
    if read.recorded_watermarks is not None:
        return _recorded(read)
    assigner = _assigner(read)
    if assigner is None:
        return InputRead(
            spec, _unstamped(read.rows), _processing_time(), position, read.switched_at
        )
    assigned = assigner.assign(read.rows, state=position.watermarks, now_ms=now_ms, maxima=maxima)
    state = assigned.state()
    moved = position.model_copy(update={"watermarks": state})
    rows = reused(assigned.rows) if assigner.stamps_in_arrival_order else assigned.rows
    return InputRead(
        spec, rows, Watermark(state.watermark), moved, assigner=assigner, maxima=assigned.maxima
    )


def _recorded(read: ChangelogRead) -> InputRead:
    """A derived table's rows stamped with the watermarks its commits recorded: a row's is
    the one in force when its commit arrived (the previous commit's), and the input's is its
    latest commit's, never re-derived from the data."""
    assert read.recorded_watermarks is not None and read.spec.rowtime is not None
    recorded = read.recorded_watermarks
    latest = read.position.version
    rowtime_ms = F.unix_micros(F.col(read.spec.rowtime).cast("timestamp")) / 1000
    rows = read.rows.withColumn(WATERMARK_COLUMN, in_force_by_commit(recorded)).withColumn(
        LATE_COLUMN, F.coalesce(rowtime_ms <= F.col(WATERMARK_COLUMN), F.lit(False))
    )
    state = WatermarkState(watermark=or_min(recorded.get(latest)))
    moved = read.position.model_copy(update={"watermarks": state})
    return InputRead(read.spec, rows, Watermark(state.watermark), moved, read.switched_at)


def _assigner(read: ChangelogRead) -> WatermarkAssigner | None:
    """The read's watermark generator; None when the source follows processing time."""
    spec = read.spec
    hybrid = spec.options.startup_mode is StartupMode.SNAPSHOT_THEN_CHANGELOG
    if spec.watermark is None or hybrid or spec.derived:
        return None
    return WatermarkAssigner.for_table(spec, partition_columns=read.partition_columns)


def _rows(
    catalog: Catalog, spec: TableSpec, position: InputPosition, end_version: int,
    span: FileSpan | None = None,
) -> DataFrame:
    """The changelog rows a read covers (defining them checks the log and the files)."""
    if position.phase is ReadPhase.SNAPSHOT:
        return _snapshot_rows(catalog, spec, end_version)
    if position.phase is ReadPhase.BOOTSTRAP:
        first = position.version + 1
        rows = _snapshot_rows(catalog, spec, first, span)
        if end_version > first:
            rows = rows.unionByName(catalog.changelog(spec.name, first + 1, end_version))
        return rows
    if end_version > position.version:
        return catalog.changelog(spec.name, position.version + 1, end_version)
    return _no_rows(catalog, spec, end_version)


def _no_rows(catalog: Catalog, spec: TableSpec, version: int) -> DataFrame:
    """The changelog's columns and no rows, for an input without new commits: from the live
    snapshot, not from the last commit's changes, whose files VACUUM may have removed."""
    snapshot = catalog.backend.snapshot(catalog.table_path(spec), version)
    rows = snapshot.select(
        "*",
        F.lit(None).cast("string").alias(ROW_KIND),
        F.lit(None).cast("long").alias(COMMIT_VERSION),
        F.lit(None).cast("timestamp").alias(COMMIT_TIMESTAMP),
        F.lit(None).cast("long").alias(POSITION),
    )
    return with_declared_columns(rows, spec).limit(0)


def _snapshot_rows(catalog: Catalog, spec: TableSpec, version: int,
                   span: FileSpan | None = None) -> DataFrame:
    """The table at `version` as `+I` changelog rows stamped with that commit, positioned in
    the order they arrived (a key written in several commits has its latest write last; an
    op-column table's state is its changes applied, not its stored rows); with a `span`, of
    the files that may hold rows in it only."""
    path = catalog.table_path(spec)
    [commit] = catalog.backend.commits(path, version, version)
    snapshot = read_table_arrivals(catalog.spark, catalog.backend, spec, catalog.root, version,
                                   span)
    rows = snapshot.select(
        *(F.col(f"`{c}`") for c in snapshot.columns if c != POSITION),
        F.lit(RowKind.INSERT.value).alias(ROW_KIND),
        F.lit(version).cast("long").alias(COMMIT_VERSION),
        F.timestamp_millis(F.lit(commit.timestamp_ms)).alias(COMMIT_TIMESTAMP),
        F.col(POSITION),
    )
    return with_declared_columns(rows, spec)


def _unstamped(rows: DataFrame) -> DataFrame:
    """Rows of a source without event-time watermarks: nothing is ever late."""
    return rows.withColumn(WATERMARK_COLUMN, F.lit(LONG_MIN)).withColumn(LATE_COLUMN, F.lit(False))


def _processing_time() -> Watermark:
    return Watermark(LONG_MIN, use_processing_time=True)
