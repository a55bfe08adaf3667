"""Asset metadata: Dagster's own keys first, chronolake's under `chronolake/`."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any, cast

from dagster import MetadataValue, TableColumn, TableSchema
from dagster._core.definitions.metadata.metadata_set import NamespacedMetadataSet

from chronolake.dagster.preview import markdown_preview
from chronolake.lake.stamps import latest_recorded_watermark
from chronolake.lake.tables import is_table, table_row_count
from chronolake.location import Location
from chronolake.runtime.result import RunResult, TickReport
from chronolake.schema import (
    ComputedColumn,
    MetadataColumn,
    PhysicalColumn,
    TableSpec,
    ViewSpec,
)
from chronolake.watermarks.watermark import LONG_MAX, LONG_MIN, Watermark


class ChronolakeMetadataSet(NamespacedMetadataSet):
    """chronolake's metadata keys (`chronolake/kind`, `chronolake/rowtime`, ...)."""

    kind: str | None = None
    rowtime: str | None = None
    watermark_strategy: str | None = None
    primary_key: str | None = None
    changelog: str | None = None
    startup_mode: str | None = None

    @classmethod
    def namespace(cls) -> str:
        return "chronolake"


def _column(
    column: PhysicalColumn | ComputedColumn | MetadataColumn, spec: TableSpec
) -> TableColumn:
    marker = ""
    if spec.rowtime and spec.rowtime.split(".")[0].lower() == column.name.lower():
        marker = " *ROWTIME*"
    if isinstance(column, ComputedColumn):
        if column.is_proctime:
            return TableColumn(column.name, "TIMESTAMP_LTZ(3) *PROCTIME*", description="PROCTIME()")
        return TableColumn(column.name, f"COMPUTED{marker}", description=f"AS {column.expression}")
    if isinstance(column, MetadataColumn):
        return TableColumn(
            column.name,
            column.type + marker,
            description=f"METADATA FROM '{column.key.value}' VIRTUAL",
        )
    return TableColumn(column.name, column.type + marker)


def table_definition_metadata(
    spec: TableSpec | ViewSpec, location: Location | None
) -> dict[str, Any]:
    """The definition metadata of a table or view asset, shown in the asset's page."""
    metadata: dict[str, Any] = {"dagster/table_name": spec.name}
    if location is not None:
        metadata["dagster/uri"] = location.uri
    chronolake = ChronolakeMetadataSet(
        kind=spec.kind.value,
        rowtime=spec.rowtime,
        primary_key=", ".join(spec.primary_key) or None,
    )
    if isinstance(spec, TableSpec):
        metadata["dagster/column_schema"] = TableSchema(
            columns=[_column(column, spec) for column in spec.columns]
        )
        chronolake = chronolake.model_copy(
            update={
                "watermark_strategy": spec.watermark.expression if spec.watermark else None,
                "changelog": spec.options.changelog.value,
                "startup_mode": spec.options.startup_mode.value,
            }
        )
    return metadata | {key: value for key, value in dict(chronolake).items() if value is not None}


def run_metadata(result: RunResult, path: Location) -> dict[str, Any]:
    """A run's materialization metadata: the figures Dagster plots, the watermark, a preview.

    Every figure of the run (`RunResult.figures`, all counts) becomes a numeric entry under
    its own name, so Dagster plots it over materializations; ticks and split alignment
    (`RunResult.ticks`) add their counts and a per-split table. No Spark job: the row
    count comes from the Delta log, the preview from delta-rs.
    """
    metadata: dict[str, Any] = {
        "dagster/uri": path.uri,
        "chronolake/run": result.run,
        "chronolake/status": result.status.value,
        "chronolake/message": result.message,
    }
    written = is_table(path)
    if written:
        metadata["dagster/row_count"] = table_row_count(path)
        metadata["preview"] = MetadataValue.md(markdown_preview(path))
    # A derived table's watermark as its latest commit recorded it (what readers downstream see)
    recorded = latest_recorded_watermark(path) if written else None
    watermark_ms = result.watermark_ms if recorded is None else recorded
    if watermark_ms is not None:
        metadata["chronolake/watermark"] = MetadataValue.timestamp(watermark_ms / 1000)
        lag = max(time.time() - watermark_ms / 1000, 0.0)
        metadata["watermark_lag_seconds"] = MetadataValue.float(round(lag, 3))
    if result.processing_time:
        metadata["chronolake/watermark_kind"] = "processing-time"
    for name, phase in result.source_phases.items():
        metadata[f"chronolake/source_phase/{name}"] = phase.value
    for name, version in result.switch_versions.items():
        metadata[f"chronolake/switch_version/{name}"] = version
    if result.waiting_reason:
        metadata["chronolake/waiting_reason"] = result.waiting_reason
    if result.ticks is not None:
        metadata |= tick_metadata(result.ticks)
    for name, value in result.figures.items():  # a TypedDict's items are typed `object`
        metadata[name] = MetadataValue.int(cast(int, value))  # every declared figure is an int
    return metadata


def tick_metadata(ticks: TickReport) -> dict[str, Any]:
    """Ticks and split alignment: counts Dagster plots, and which split stood where."""
    metadata: dict[str, Any] = {
        "ticks": MetadataValue.int(ticks.ticks),
        "split_pauses": MetadataValue.int(sum(ticks.pauses.values())),
        "split_resumes": MetadataValue.int(sum(ticks.resumes.values())),
        "paused_splits": MetadataValue.int(sum(len(s) for s in ticks.paused_splits.values())),
    }
    if ticks.buffered_rows:
        metadata["peak_buffered_rows"] = MetadataValue.int(max(ticks.buffered_rows))
    if ticks.unaligned:
        metadata["chronolake/unaligned_inputs"] = ", ".join(ticks.unaligned)
    if ticks.split_watermarks:
        rows = [
            f"| {source} | {split} | {_instant(watermark)} | "
            f"{'paused' if split in ticks.paused_splits.get(source, ()) else ''} |"
            for source, splits in ticks.split_watermarks.items()
            for split, watermark in sorted(splits.items())
        ]
        table = ["| input | split | watermark | |", "|---|---|---|---|", *rows]
        metadata["chronolake/split_watermarks"] = MetadataValue.md("\n".join(table))
    return metadata


def shown_watermark(watermark: Watermark) -> str:
    """A watermark as a person reads it in the run's log."""
    return "processing time" if watermark.use_processing_time else _instant(watermark.timestamp)


def _instant(watermark_ms: int) -> str:
    if watermark_ms <= LONG_MIN:
        return "none yet"
    if watermark_ms >= LONG_MAX:
        return "+infinity (finished)"
    return datetime.fromtimestamp(watermark_ms / 1000, UTC).isoformat(timespec="milliseconds")
