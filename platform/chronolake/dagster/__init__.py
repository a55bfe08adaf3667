"""Dagster building blocks: every chronolake table as an asset, with its time metadata."""

from chronolake.dagster.assets import chronolake_asset_checks, chronolake_assets
from chronolake.dagster.completeness import on_complete_partitions
from chronolake.dagster.declaring import declare_job, script_specs
from chronolake.dagster.metadata import ChronolakeMetadataSet, table_definition_metadata
from chronolake.dagster.resources import LakeResource, local_pyspark_resource
from chronolake.dagster.restating import restate_job

__all__ = [
    "ChronolakeMetadataSet",
    "LakeResource",
    "chronolake_asset_checks",
    "chronolake_assets",
    "declare_job",
    "local_pyspark_resource",
    "on_complete_partitions",
    "restate_job",
    "script_specs",
    "table_definition_metadata",
]
