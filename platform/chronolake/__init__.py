"""chronolake: Flink-grade time semantics for PySpark + Delta Lake pipelines run by Dagster.

Declare a table once (Flink SQL DDL or a pydantic spec) with its time
attributes, primary key and Delta source; query it with Flink SQL; run it as a
Dagster asset.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from chronolake.errors import ChronolakeError, DefinitionError, RunError, SourceError
from chronolake.schema import (
    ComputedColumn,
    DeltaOptions,
    MetadataColumn,
    PhysicalColumn,
    TableKind,
    TableSpec,
    ViewSpec,
    WatermarkSpec,
)

if TYPE_CHECKING:
    from chronolake.catalog import Catalog


def __getattr__(name: str) -> Any:
    """Import the Spark-backed `Catalog` on first use, so specs and errors load without Spark."""
    if name == "Catalog":
        from chronolake.catalog import Catalog

        return Catalog
    raise AttributeError(f"module 'chronolake' has no attribute {name!r}")


__all__ = [
    "Catalog",
    "ChronolakeError",
    "ComputedColumn",
    "DefinitionError",
    "DeltaOptions",
    "MetadataColumn",
    "PhysicalColumn",
    "RunError",
    "SourceError",
    "TableKind",
    "TableSpec",
    "ViewSpec",
    "WatermarkSpec",
]
