"""Every table and view of a lake's catalog as a Dagster asset.

Source tables are observable source assets whose data version is the Delta
table version; views are assets whose materialization evaluates the view on
Spark and stores the result as a Delta table under `_chronolake/views/`.
"""

from __future__ import annotations

import os
from pathlib import Path

from dagster import (
    AssetExecutionContext,
    AssetKey,
    AssetsDefinition,
    DataVersion,
    MaterializeResult,
    MetadataValue,
    ObserveResult,
    SourceAsset,
    asset,
    observable_source_asset,
)
from dagster_pyspark import PySparkResource

from chronolake.catalog import CatalogEntry, load_entries
from chronolake.dagster.metadata import table_definition_metadata
from chronolake.dagster.preview import markdown_preview
from chronolake.dagster.resources import LakeResource
from chronolake.lake import table_row_count, table_version, view_path, write_snapshot
from chronolake.schema import TableSpec, ViewSpec
from chronolake.sql.query import referenced_tables

SOURCES_GROUP = "sources"
VIEWS_GROUP = "views"


def chronolake_assets(lake_root: str | os.PathLike[str]) -> list[AssetsDefinition | SourceAsset]:
    """One asset per catalog entry of the lake at `lake_root` (read without Spark)."""
    root = Path(lake_root).resolve()
    definitions: list[AssetsDefinition | SourceAsset] = []
    for entry in load_entries(root).values():
        spec = entry.spec
        if isinstance(spec, TableSpec):
            definitions.append(_source_table_asset(spec, (root / spec.options.path).resolve()))
        else:
            definitions.append(_view_asset(spec, entry, view_path(root, spec.name)))
    return definitions


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


def _view_asset(spec: ViewSpec, entry: CatalogEntry, path: Path) -> AssetsDefinition:
    @asset(
        name=spec.name,
        group_name=VIEWS_GROUP,
        deps=[AssetKey(name.lower()) for name in referenced_tables(spec.query)],
        description=f"View ({spec.kind.value}):\n\n```sql\n{entry.statement or spec.query}\n```",
        metadata=table_definition_metadata(spec, path),
        kinds={"spark", "delta"},
    )
    def _materialize(
        context: AssetExecutionContext, pyspark: PySparkResource, lake: LakeResource
    ) -> MaterializeResult:
        catalog = lake.catalog(pyspark.spark_session)
        frame = catalog.table(spec.name)
        version = write_snapshot(frame, path)
        context.log.info(f"view {spec.name} written to {path} at Delta version {version}")
        return MaterializeResult(
            metadata={
                "dagster/row_count": table_row_count(path),
                "chronolake/delta_version": version,
                "preview": MetadataValue.md(markdown_preview(catalog.spark, path)),
            }
        )

    return _materialize
