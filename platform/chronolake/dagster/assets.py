"""Every table and view of a lake's catalog as a Dagster asset.

Source tables are observable source assets whose data version is the Delta
table version; views are assets whose materialization brings their Delta table
under `_chronolake/views/` up to date: incrementally, exactly once, for views
with a temporal join, by recomputing for the others.
"""

# No `from __future__ import annotations` here: Dagster reads the `context` annotation at
# definition time and refuses a string.

import os
import time
from pathlib import Path

from dagster import (
    AssetChecksDefinition,
    AssetExecutionContext,
    AssetKey,
    AssetsDefinition,
    Config,
    DataVersion,
    MaterializeResult,
    ObserveResult,
    SourceAsset,
    asset,
    observable_source_asset,
)
from dagster_pyspark import PySparkResource
from pydantic import Field

from chronolake.catalog import load_entries
from chronolake.dagster.checks import primary_key_check, run_check_results, run_check_specs
from chronolake.dagster.metadata import run_metadata, table_definition_metadata
from chronolake.dagster.resources import LakeResource
from chronolake.lake.tables import table_row_count, table_version
from chronolake.runtime.derived import output_path
from chronolake.runtime.source_checks import OverwritePolicy
from chronolake.runtime.views import is_incremental, materialize_view
from chronolake.schema import TableSpec, ViewSpec
from chronolake.sql.query import referenced_tables

SOURCES_GROUP = "sources"
VIEWS_GROUP = "views"
DERIVED_GROUP = "derived"


def chronolake_assets(lake_root: str | os.PathLike[str]) -> list[AssetsDefinition | SourceAsset]:
    """One asset per catalog entry of the lake at `lake_root` (read without Spark)."""
    root = Path(lake_root).resolve()
    definitions: list[AssetsDefinition | SourceAsset] = []
    for entry in load_entries(root).values():
        spec = entry.spec
        if isinstance(spec, TableSpec):
            definitions.append(_source_table_asset(spec, (root / spec.options.path).resolve()))
        else:
            definitions.append(_view_asset(spec, output_path(root, spec.name)))
    return definitions


class RunConfig(Config):
    """A view run's launchpad config: `ops: {orders_enriched: {config: {full_refresh: true}}}`."""

    full_refresh: bool = Field(
        False, description="Rebuild from scratch, replacing the output, late rows and state."
    )
    on_source_overwrite: OverwritePolicy = Field(
        OverwritePolicy.FAIL,
        description="When a source was rewritten by OVERWRITE since the last run: fail, or "
        "full-refresh.",
    )


def chronolake_asset_checks(lake_root: str | os.PathLike[str]) -> list[AssetChecksDefinition]:
    """`primary_key_unique` for every keyed table and view of the lake's catalog."""
    root = Path(lake_root).resolve()
    checks = []
    for entry in load_entries(root).values():
        spec = entry.spec
        if spec.primary_key:
            path = None if isinstance(spec, TableSpec) else output_path(root, spec.name)
            checks.append(primary_key_check(spec, path))
    return checks


def _source_table_asset(spec: TableSpec, path: Path) -> SourceAsset:
    @observable_source_asset(
        name=spec.name,
        group_name=SOURCES_GROUP,
        description=f"Delta table `{spec.options.path}` ({spec.kind.value}, "
        f"changelog: {spec.options.changelog.value}).",
        metadata=table_definition_metadata(spec, path),
        required_resource_keys={"lake"},
    )
    def _observe() -> ObserveResult:
        version = table_version(path)
        return ObserveResult(
            data_version=DataVersion(str(version)),
            metadata={
                "chronolake/delta_version": version,
                "dagster/row_count": table_row_count(path),
            },
        )

    return _observe


def _view_asset(spec: ViewSpec, path: Path) -> AssetsDefinition:
    incremental = is_incremental(spec)
    how = "incremental runs (temporal join)" if incremental else "recomputed on each run"
    @asset(
        name=spec.name,
        check_specs=run_check_specs(spec.name) if incremental else None,
        group_name=DERIVED_GROUP if incremental else VIEWS_GROUP,
        deps=[AssetKey(name.lower()) for name in referenced_tables(spec.query)],
        description=f"View ({spec.kind.value}, {how}):\n\n```sql\n{spec.query}\n```",
        metadata=table_definition_metadata(spec, path),
        kinds={"spark", "delta"},
    )
    def _materialize(
        context: AssetExecutionContext,
        config: RunConfig,
        pyspark: PySparkResource,
        lake: LakeResource,
    ) -> MaterializeResult:
        catalog = lake.catalog(pyspark.spark_session)
        started = time.monotonic()
        result = materialize_view(
            catalog, spec.name, full_refresh=config.full_refresh,
            on_source_overwrite=config.on_source_overwrite,
        )
        seconds = time.monotonic() - started
        context.log.info(f"{spec.name}: {result.message} in {seconds:.1f} s")
        checks = (
            run_check_results(context.instance, catalog, lake, result) if incremental else None
        )
        metadata = run_metadata(catalog.spark, result, path)
        metadata["run_seconds"] = round(seconds, 3)
        metadata["rows_per_second"] = round(result.figures.get("rows_in", 0) / seconds, 1)
        return MaterializeResult(metadata=metadata, check_results=checks)

    return _materialize
