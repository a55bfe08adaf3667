"""chronolake: Flink-grade time semantics for PySpark + Delta Lake pipelines run by Dagster.

Declare a table once (Flink SQL DDL or a pydantic spec) with its time
attributes, primary key and Delta source; query it with Flink SQL; run it as a
Dagster asset.
"""

from __future__ import annotations

from importlib import import_module
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

from chronolake.errors import (
    ChronolakeError,
    DefinitionError,
    NameTakenError,
    RunError,
    RunLockedError,
    SourceError,
    SourceRewrittenError,
    UnknownNameError,
    VersionGoneError,
)
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
    from chronolake.runtime.refresh import full_refresh
    from chronolake.runtime.result import RunResult
    from chronolake.runtime.views import materialize_view

try:
    __version__ = version("chronolake")
except PackageNotFoundError:  # a source tree on the path, not installed
    __version__ = "0+unknown"

_LAZY = {
    "Catalog": "chronolake.catalog",
    "RunResult": "chronolake.runtime.result",
    "full_refresh": "chronolake.runtime.refresh",
    "materialize_view": "chronolake.runtime.views",
}
"""What loads on first use, by the module that owns it: the Spark-backed parts, so that specs
and errors load without starting Spark."""


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'chronolake' has no attribute {name!r}")


__all__ = [
    "Catalog",
    "ChronolakeError",
    "ComputedColumn",
    "DefinitionError",
    "DeltaOptions",
    "MetadataColumn",
    "NameTakenError",
    "PhysicalColumn",
    "RunError",
    "RunLockedError",
    "RunResult",
    "SourceError",
    "SourceRewrittenError",
    "TableKind",
    "TableSpec",
    "UnknownNameError",
    "VersionGoneError",
    "ViewSpec",
    "WatermarkSpec",
    "__version__",
    "full_refresh",
    "materialize_view",
]
