"""Reading one input of a run: its new commits (or, for a hybrid source, a snapshot first),
with watermarks assigned.

A source with `WATERMARK FOR` generates event-time watermarks per split
(`WatermarkAssigner`). A source without one follows processing time: it emits
`(MIN, processing)`. A hybrid source (`'scan.startup.mode' =
'snapshot-then-changelog'`) reads the table at version v as `+I` rows first;
while bounded it makes no event-time progress, and at the switch to the change
data feed (from v + 1) it emits the processing-time watermark.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from chronolake.catalog import Catalog
from chronolake.dialect import to_spark_sql
from chronolake.lake.changelog import COMMIT_TIMESTAMP, COMMIT_VERSION, POSITION, ROW_KIND, RowKind
from chronolake.relations import with_declared_columns
from chronolake.runtime.checkpoint import InputPosition
from chronolake.schema import StartupMode, TableSpec
from chronolake.watermarks.assigner import LATE_COLUMN, WATERMARK_COLUMN, WatermarkAssigner
from chronolake.watermarks.watermark import LONG_MIN, Watermark

SNAPSHOT_PHASE = "snapshot"
CHANGELOG_PHASE = "changelog"


@dataclass(frozen=True)
class InputRead:
    """One input's rows for this run and where it stands afterwards."""

    spec: TableSpec
    rows: DataFrame
    watermark: Watermark
    position: InputPosition
    switched_at: int | None = None

    @property
    def phase(self) -> str:
        return self.position.phase


def initial_position(spec: TableSpec) -> InputPosition:
    """Where a never-run input starts: hybrid sources in their snapshot phase."""
    hybrid = spec.options.startup_mode is StartupMode.SNAPSHOT_THEN_CHANGELOG
    return InputPosition(phase=SNAPSHOT_PHASE if hybrid else CHANGELOG_PHASE)


def read_input(
    catalog: Catalog, spec: TableSpec, position: InputPosition, end_version: int
) -> InputRead:
    """The input's rows after `position` up to `end_version`, stamped with watermarks."""
    if position.phase == SNAPSHOT_PHASE:
        rows = _snapshot_rows(catalog, spec, end_version)
        moved = InputPosition(version=end_version, phase=CHANGELOG_PHASE)
        return InputRead(spec, _unstamped(rows), _processing_time(), moved, end_version)
    if end_version > position.version:
        rows = catalog.changelog(spec.name, position.version + 1, end_version)
    else:  # nothing new: the schema of the changelog, no rows
        rows = catalog.changelog(spec.name, max(end_version, 0), max(end_version, 0)).limit(0)
    moved = position.model_copy(update={"version": max(end_version, position.version)})
    hybrid = spec.options.startup_mode is StartupMode.SNAPSHOT_THEN_CHANGELOG
    if spec.watermark is None or hybrid:
        return InputRead(spec, _unstamped(rows), _processing_time(), moved)
    assigner = WatermarkAssigner(
        rowtime=spec.watermark.rowtime,
        strategy=to_spark_sql(spec.watermark.expression),
        emit_strategy=spec.options.emit_strategy,
        split_by=spec.options.split_by,
        key=spec.primary_key,
    )
    assigned = assigner.assign(rows, state=position.watermarks)
    state = assigned.state()
    moved = moved.model_copy(update={"watermarks": state})
    return InputRead(spec, assigned.rows, Watermark(state.watermark), moved)


def _snapshot_rows(catalog: Catalog, spec: TableSpec, version: int) -> DataFrame:
    """The table at `version` as `+I` changelog rows stamped with that commit."""
    path = catalog.table_path(spec)
    [commit] = catalog.backend.commits(path, version, version)
    snapshot = catalog.backend.snapshot(path, version)
    rows = snapshot.select(
        "*",
        F.lit(RowKind.INSERT.value).alias(ROW_KIND),
        F.lit(version).cast("long").alias(COMMIT_VERSION),
        F.timestamp_millis(F.lit(commit.timestamp_ms)).alias(COMMIT_TIMESTAMP),
        F.monotonically_increasing_id().alias(POSITION),
    )
    return with_declared_columns(rows, spec)


def _unstamped(rows: DataFrame) -> DataFrame:
    """Rows of a source without event-time watermarks: nothing is ever late."""
    return rows.withColumn(WATERMARK_COLUMN, F.lit(LONG_MIN)).withColumn(LATE_COLUMN, F.lit(False))


def _processing_time() -> Watermark:
    return Watermark(LONG_MIN, use_processing_time=True)
