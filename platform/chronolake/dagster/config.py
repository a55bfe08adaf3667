"""A view run's launchpad config."""

from __future__ import annotations

from dagster import Config
from pydantic import Field

from chronolake.runtime.source_checks import OverwritePolicy


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
