"""The reference platform's ops and jobs."""

from __future__ import annotations

from dagster import AssetSelection, define_asset_job

refresh_views = define_asset_job(
    "refresh_views", selection=AssetSelection.groups("views"), description="Re-evaluate every view."
)

JOBS = [refresh_views]
