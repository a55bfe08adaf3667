"""A partitioned table's Dagster partitions, and the partitions its commits completed.

A run does not target partitions: it brings its table up to date, whichever partition or
backfill launched it. Each commit stamps the partitions it completed or changed
(`chronolake.lake.stamps`); they become one materialization per partition, recorded by the
run that committed or, for commits made outside Dagster (`chronolake run`, a notebook), by
the reconciling sensor. The lake is the truth: a partition the watermark has not completed
is never recorded, and one a later commit changed is recorded again with its changes.
"""

# No `from __future__ import annotations` here: Dagster reads the `context` annotation at
# definition time and refuses a string.

import json
from collections.abc import Iterable
from typing import Any

from dagster import (
    AssetCheckResult,
    AssetCheckSeverity,
    AssetCheckSpec,
    AssetKey,
    AssetMaterialization,
    DagsterInstance,
    DefaultSensorStatus,
    MetadataValue,
    OpExecutionContext,
    SensorDefinition,
    SensorEvaluationContext,
    SensorResult,
    TimeWindowPartitionsDefinition,
    sensor,
)

from chronolake.catalog.entry import CatalogEntry
from chronolake.catalog.watermarks import current_watermarks
from chronolake.dagster.declaring import served_specs
from chronolake.lake.layout import output_path
from chronolake.lake.stamps import PartitionFigures, Stamp, logged_stamps
from chronolake.lake.tables import is_table
from chronolake.location import Location
from chronolake.schema import TableSpec, ViewSpec
from chronolake.watermarks.partitions import newly_complete, partitions_definition

DELTA_VERSION = "chronolake/delta_version"
LATE_PARTITIONS_CHECK = "late_rows_per_partition"
RECONCILE_SENSOR = "reconcile_partitions"


def asset_partitions(spec: TableSpec | ViewSpec) -> TimeWindowPartitionsDefinition | None:
    """The time window partitions `spec` declares (None: not partitioned)."""
    partitions = spec.time.partitions
    return None if partitions is None else partitions_definition(partitions)


def launched_span(context: OpExecutionContext) -> tuple[int, int] | None:
    """The time the partitions a run was launched for span, [start, end) in epoch ms (a
    backfill of a range: from its first partition's start to its last one's end); None for a
    run launched for no partition."""
    if not (context.has_partition_key or context.has_partition_key_range):
        return None
    window = context.partition_time_window
    return round(window.start.timestamp() * 1000), round(window.end.timestamp() * 1000)


def partition_materializations(name: str, stamps: Iterable[Stamp]) -> list[AssetMaterialization]:
    """One materialization per partition that `stamps` (a table's commits) completed or
    changed, oldest commit first."""
    return [
        AssetMaterialization(asset_key=AssetKey(name), partition=figures.key,
                             metadata=_metadata(stamp, figures))
        for stamp in stamps for figures in stamp.partitions if figures.materialized
    ]


def _metadata(stamp: Stamp, figures: PartitionFigures) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        "dagster/row_count": figures.rows,
        "late_rows": figures.late_rows,
        "chronolake/partition": "completed" if figures.completed else "changed",
        DELTA_VERSION: stamp.version,
        **{kind: figures.changes.get(kind, 0) for kind in ("+I", "-U", "+U", "-D")},
    }
    if stamp.watermark_ms is not None:
        metadata["chronolake/watermark"] = MetadataValue.timestamp(stamp.watermark_ms / 1000)
    return metadata


def committed_stamps(path: Location, version: int | None) -> list[Stamp]:
    """What commit `version` of a derived table stamped (none when the run committed
    nothing)."""
    if version is None:
        return []
    return [stamp for stamp in logged_stamps(path, version) if stamp.version == version]


def late_rows_per_partition(
    name: str, stamps: Iterable[Stamp], threshold: float
) -> AssetCheckResult:
    """`late_rows_per_partition`: the rows of each complete partition's time that this commit
    sent to the late side table, at most `threshold` of the partition's rows and late rows."""
    late = {figures.key: figures for stamp in stamps for figures in stamp.partitions
            if figures.new_late_rows}
    rates = {key: figures.late_rows / (figures.rows + figures.late_rows)
             for key, figures in late.items()}
    over = sorted(key for key, rate in rates.items() if rate > threshold)
    return AssetCheckResult(
        check_name=LATE_PARTITIONS_CHECK, asset_key=AssetKey(name), passed=not over,
        severity=AssetCheckSeverity.WARN,
        metadata={
            "late_rows": sum(figures.new_late_rows for figures in late.values()),
            "by_partition": MetadataValue.json({key: figures.new_late_rows
                                                for key, figures in sorted(late.items())}),
            "over_threshold": MetadataValue.json(over), "threshold": threshold,
        },
    )


def late_partitions_check_spec(name: str) -> AssetCheckSpec:
    return AssetCheckSpec(
        LATE_PARTITIONS_CHECK, asset=name,
        description="The rows each run sends to the late side table, counted per time "
        "partition: at most late_row_rate_threshold of each complete partition's rows.",
    )


def recorded_version(instance: DagsterInstance, name: str) -> int:
    """The latest Delta version whose partitions Dagster recorded for table `name` (-1: none)."""
    event = instance.get_latest_materialization_event(AssetKey(name))
    materialization = event.asset_materialization if event else None
    value = materialization.metadata.get(DELTA_VERSION) if materialization else None
    version = getattr(value, "value", None)
    return version if isinstance(version, int) else -1


def reconcile_sensor(
    root: Location, specs: Iterable[TableSpec | ViewSpec] | None = None, *,
    minimum_interval_seconds: int = 30,
) -> SensorDefinition:
    """The sensor that records what the lake says Dagster has not: the partitions that
    commits of derived tables made outside Dagster completed or changed (from their stamps),
    and the partitions of source tables their watermark completed (from Delta's file
    statistics). Runless events, from Delta logs alone, no Spark; on by default: it launches
    nothing, it records what is true."""
    served = served_specs(root, specs)
    views = {spec.name: output_path(root, spec.name) for spec in served
             if isinstance(spec, ViewSpec) and spec.time.partitions is not None}
    sources = [spec for spec in served
               if isinstance(spec, TableSpec) and spec.time.partitions is not None]
    entries = {spec.name.lower(): CatalogEntry.of(spec) for spec in served}

    @sensor(
        name=RECONCILE_SENSOR, minimum_interval_seconds=minimum_interval_seconds,
        default_status=DefaultSensorStatus.RUNNING,
        description="Record the time partitions that the lake says are complete or changed and "
        "Dagster has not recorded: commits made outside Dagster, sources' watermarks.",
    )
    def _reconcile(context: SensorEvaluationContext) -> SensorResult:
        seen: dict[str, int] = json.loads(context.cursor) if context.cursor else {}
        events: list[AssetMaterialization] = []
        for name, path in views.items():
            if not is_table(path):
                continue
            since = max(seen.get(name, -1), recorded_version(context.instance, name)) + 1
            stamps = logged_stamps(path, since)
            events += partition_materializations(name, stamps)
            if stamps:
                seen[name] = stamps[-1].version
        if sources:
            watermarks = current_watermarks(root, entries)
            for spec in sources:
                events += _source_partitions(context.instance, spec,
                                             watermarks[spec.name.lower()].watermark_ms)
        skipped = None if events else "every completed or changed partition is recorded"
        return SensorResult(asset_events=events, cursor=json.dumps(seen), skip_reason=skipped)

    return _reconcile


def _source_partitions(instance: DagsterInstance, spec: TableSpec, watermark_ms: int | None
                       ) -> list[AssetMaterialization]:
    """The partitions of source table `spec` that its watermark completed and Dagster has not
    recorded (a source's rows are not counted: that would take a Spark job)."""
    if watermark_ms is None:
        return []
    watermark = MetadataValue.timestamp(watermark_ms / 1000)
    return [
        AssetMaterialization(asset_key=AssetKey(spec.name), partition=key,
                             metadata={"chronolake/watermark": watermark,
                                       "chronolake/partition": "completed"})
        for key in _unrecorded(instance, spec, watermark_ms)
    ]


def unrecorded_source_partitions(instance: DagsterInstance, spec: TableSpec, root: Location
                                 ) -> list[str]:
    """The keys of the partitions of source table `spec` that its current watermark completed
    and Dagster has not recorded."""
    [watermark] = current_watermarks(root, {spec.name: CatalogEntry.of(spec)}).values()
    return [] if watermark.watermark_ms is None else _unrecorded(instance, spec,
                                                                  watermark.watermark_ms)


def _unrecorded(instance: DagsterInstance, spec: TableSpec, watermark_ms: int) -> list[str]:
    partitions = spec.time.partitions
    assert partitions is not None
    recorded = instance.get_materialized_partitions(AssetKey(spec.name))
    return [window.key for window in newly_complete(partitions, None, None, watermark_ms)
            if window.key not in recorded]
