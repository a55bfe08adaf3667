"""Table and view specs: what a table is, independent of SQL and of the lake."""

from chronolake.schema.options import (
    ChangelogMode,
    DeltaOptions,
    EmitStrategy,
    StartupMode,
)
from chronolake.schema.spec import (
    Column,
    ComputedColumn,
    MetadataColumn,
    MetadataKey,
    PhysicalColumn,
    TableKind,
    TableSpec,
    ViewKind,
    ViewSpec,
    WatermarkSpec,
)
from chronolake.schema.time_options import Freshness, TimeOptions, TimePartitions

__all__ = [
    "ChangelogMode",
    "Column",
    "ComputedColumn",
    "DeltaOptions",
    "EmitStrategy",
    "Freshness",
    "MetadataColumn",
    "MetadataKey",
    "PhysicalColumn",
    "StartupMode",
    "TableKind",
    "TableSpec",
    "TimeOptions",
    "TimePartitions",
    "ViewKind",
    "ViewSpec",
    "WatermarkSpec",
]
