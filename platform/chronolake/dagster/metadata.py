"""Asset metadata: Dagster's own keys first, chronolake's under `chronolake/`."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from dagster import MetadataValue, TableColumn, TableSchema
from dagster._core.definitions.metadata.metadata_set import NamespacedMetadataSet
from pyspark.sql import SparkSession

from chronolake.dagster.preview import markdown_preview
from chronolake.lake.tables import table_row_count
from chronolake.runtime.result import RunResult
from chronolake.schema import (
    ComputedColumn,
    MetadataColumn,
    PhysicalColumn,
    TableSpec,
    ViewSpec,
)


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


def table_definition_metadata(spec: TableSpec | ViewSpec, uri: Path | None) -> dict[str, Any]:
    """The definition metadata of a table or view asset, shown in the asset's page."""
    metadata: dict[str, Any] = {"dagster/table_name": spec.name}
    if uri is not None:
        metadata["dagster/uri"] = uri.as_uri()
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


def run_metadata(spark: SparkSession, result: RunResult, path: Path) -> dict[str, Any]:
    """A run's materialization metadata: the figures Dagster plots, the watermark, a preview."""
    metadata: dict[str, Any] = {
        "dagster/uri": path.as_uri(),
        "chronolake/run": result.run,
        "chronolake/status": result.status.value,
        "chronolake/message": result.message,
    }
    if path.exists():
        metadata["dagster/row_count"] = table_row_count(path)
        metadata["preview"] = MetadataValue.md(markdown_preview(spark, path))
    if result.watermark_ms is not None:
        metadata["chronolake/watermark"] = MetadataValue.timestamp(result.watermark_ms / 1000)
        lag = max(time.time() - result.watermark_ms / 1000, 0.0)
        metadata["watermark_lag_seconds"] = MetadataValue.float(round(lag, 3))
    if result.processing_time:
        metadata["chronolake/watermark_kind"] = "processing-time"
    for name, phase in result.source_phases.items():
        metadata[f"chronolake/source_phase/{name}"] = phase
    for name, version in result.switch_versions.items():
        metadata[f"chronolake/switch_version/{name}"] = version
    if result.waiting_reason:
        metadata["chronolake/waiting_reason"] = result.waiting_reason
    for name, value in result.figures.items():
        metadata[name] = MetadataValue.int(value) if isinstance(value, int) else value
    return metadata
