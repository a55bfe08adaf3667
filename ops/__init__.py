"""The reference platform's jobs: observe the sources, then bring every view up to date."""

from __future__ import annotations

from dagster import AssetSelection, define_asset_job

from chronolake.dagster.assets import DERIVED_GROUP, SOURCES_GROUP, VIEWS_GROUP

observe_sources = define_asset_job(
    "observe_sources",
    selection=AssetSelection.groups(SOURCES_GROUP, include_sources=True),
    description="Record each source table's Delta version (its data version).",
)
refresh_views = define_asset_job(
    "refresh_views",
    selection=AssetSelection.groups(VIEWS_GROUP, DERIVED_GROUP),
    description="Run every derived table and view once: new commits in, exactly once out.",
)

JOBS = [observe_sources, refresh_views]
