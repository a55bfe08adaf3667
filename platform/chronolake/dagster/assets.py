"""Every table and view of a lake's catalog as a Dagster asset.

Source tables are observable source assets whose data version is the Delta
table version; views are assets whose materialization brings their Delta table
under `_chronolake/views/` up to date: incrementally, exactly once, for views
run by an operator (a temporal join, a window aggregate or Top-N, a
deduplication, an interval join: graph-backed assets whose ops are the run's
stages, see `derived_assets`), by recomputing for the others (one op).
"""

# No `from __future__ import annotations` here: Dagster reads the `context` annotation at
# definition time and refuses a string.

import time
import warnings
from collections.abc import Iterable

from dagster import (
    AssetChecksDefinition,
    AssetExecutionContext,
    AssetKey,
    AssetsDefinition,
    BetaWarning,
    DataVersion,
    DataVersionsByPartition,
    MaterializeResult,
    ObserveResult,
    OpExecutionContext,
    SourceAsset,
    asset,
    observable_source_asset,
)
from dagster_pyspark import PySparkResource

from chronolake.dagster.checks import primary_key_check
from chronolake.dagster.declaring import served_specs
from chronolake.dagster.derived_assets import commit_check_specs, derived_asset
from chronolake.dagster.freshness import freshness_checks
from chronolake.dagster.metadata import run_metadata, table_definition_metadata
from chronolake.dagster.partitions import asset_partitions, unrecorded_source_partitions
from chronolake.dagster.resources import LakeResource
from chronolake.lake.layout import output_path, table_location
from chronolake.lake.tables import table_row_count, table_version
from chronolake.location import Location, LocationLike, as_location
from chronolake.runtime.views import materialize_view
from chronolake.schema import TableSpec, ViewSpec
from chronolake.sql.query import referenced_tables
from chronolake.sql.view_kinds import is_derived

SOURCES_GROUP = "sources"
VIEWS_GROUP = "views"
DERIVED_GROUP = "derived"


def chronolake_assets(
    lake_root: LocationLike, specs: Iterable[TableSpec | ViewSpec] | None = None
) -> list[AssetsDefinition | SourceAsset]:
    """One asset per table and view: `specs` (the code location's DDL, `script_specs`), or
    else every catalog entry of the lake at `lake_root` (read without Spark, never written).

    The derived tables' ops hand Spark DataFrames to each other in memory, so the
    Definitions holding them need `executor=in_process_executor` (one process, one
    Spark session per run).

    Example:
        >>> Definitions(assets=chronolake_assets("lake"), executor=in_process_executor,
        ...             resources={"lake": LakeResource(root="lake"),
        ...                        "pyspark": local_pyspark_resource()})
    """
    root = as_location(lake_root)
    definitions: list[AssetsDefinition | SourceAsset] = []
    for spec in served_specs(root, specs):
        if isinstance(spec, TableSpec):
            definitions.append(_source_table_asset(spec, root))
        else:
            definitions.append(_view_asset(spec, output_path(root, spec.name)))
    return definitions


def chronolake_asset_checks(
    lake_root: LocationLike, specs: Iterable[TableSpec | ViewSpec] | None = None
) -> list[AssetChecksDefinition]:
    """`primary_key_unique` for every keyed table and view (`specs`, or the lake's catalog),
    and `watermark_freshness` for every one that declares `freshness.*` (`freshness`)."""
    root = as_location(lake_root)
    served = served_specs(root, specs)
    checks = []
    for spec in served:
        if spec.primary_key and not (isinstance(spec, ViewSpec) and commit_check_specs(spec)):
            path = None if isinstance(spec, TableSpec) else output_path(root, spec.name)
            checks.append(primary_key_check(spec, path))
    freshness = freshness_checks(root, served)
    return checks if freshness is None else [*checks, freshness]


def _source_table_asset(spec: TableSpec, root: Location) -> SourceAsset:
    path = table_location(root, spec.options.path)

    def _observe() -> ObserveResult:
        version = table_version(path)
        return ObserveResult(
            data_version=DataVersion(str(version)),
            metadata={
                "chronolake/delta_version": version,
                "dagster/row_count": table_row_count(path),
            },
        )

    def _observe_partitions(context: OpExecutionContext) -> DataVersionsByPartition:
        """A partitioned source: the data version (its Delta version) of each partition its
        watermark completed that Dagster has not recorded yet (`reconcile_sensor` records
        them as materialized)."""
        version = table_version(path)
        return DataVersionsByPartition({
            key: DataVersion(str(version))
            for key in unrecorded_source_partitions(context.instance, spec, root)
        })

    # A source's data version is its Delta version: what observable source assets (beta) are for.
    with warnings.catch_warnings(action="ignore", category=BetaWarning):
        return observable_source_asset(
            name=spec.name,
            group_name=SOURCES_GROUP,
            description=f"Delta table `{spec.options.path}` ({spec.kind.value}, "
            f"changelog: {spec.options.changelog.value}).",
            metadata=table_definition_metadata(spec, path),
            required_resource_keys={"lake"},
            partitions_def=asset_partitions(spec),
        )(_observe if spec.time.partitions is None else _observe_partitions)


def _view_asset(spec: ViewSpec, path: Location) -> AssetsDefinition:
    incremental = is_derived(spec)
    how = "incremental runs" if incremental else "recomputed on each run"
    description = f"View ({spec.kind.value}, {how}):\n\n```sql\n{spec.query}\n```"
    upstream = [name.lower() for name in referenced_tables(spec.query)]
    if incremental:
        return derived_asset(
            spec, upstream=upstream, group_name=DERIVED_GROUP, description=description,
            metadata=table_definition_metadata(spec, path),
        )

    @asset(
        name=spec.name,
        group_name=VIEWS_GROUP,
        deps=[AssetKey(name) for name in upstream],
        description=description,
        metadata=table_definition_metadata(spec, path),
        kinds={"spark", "delta"},
    )
    def _recompute(
        context: AssetExecutionContext, pyspark: PySparkResource, lake: LakeResource
    ) -> MaterializeResult:
        catalog = lake.catalog(pyspark.spark_session, serving=spec.name)
        started = time.monotonic()
        result = materialize_view(catalog, spec.name)
        seconds = time.monotonic() - started
        context.log.info(f"{spec.name}: {result.message} in {seconds:.1f} s")
        metadata = run_metadata(result, path)
        metadata["run_seconds"] = round(seconds, 3)
        return MaterializeResult(metadata=metadata)

    return _recompute
