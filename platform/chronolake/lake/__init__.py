"""Delta I/O: snapshots, change data feeds and exactly-once appends behind one interface."""

from chronolake.lake.backend import BackendKind, CommitInfo, LakeBackend, TableMetadata
from chronolake.lake.changelog import (
    ARRIVAL_ORDER,
    COMMIT_TIMESTAMP,
    COMMIT_VERSION,
    POSITION,
    ROW_KIND,
    SYSTEM_COLUMNS,
    RowKind,
)
from chronolake.lake.delta_rs import DeltaRsBackend
from chronolake.lake.delta_spark import DeltaSparkBackend, delta_spark_available
from chronolake.lake.op_column import OPERATION_ROW_KINDS, op_row_kind
from chronolake.lake.reader import (
    read_changelog,
    read_table_arrivals,
    read_table_state,
)
from chronolake.lake.selector import BackendChoice, backend_for
from chronolake.lake.tables import (
    table_row_count,
    table_version,
)

__all__ = [
    "ARRIVAL_ORDER",
    "COMMIT_TIMESTAMP",
    "COMMIT_VERSION",
    "OPERATION_ROW_KINDS",
    "POSITION",
    "ROW_KIND",
    "SYSTEM_COLUMNS",
    "BackendChoice",
    "BackendKind",
    "CommitInfo",
    "DeltaRsBackend",
    "DeltaSparkBackend",
    "LakeBackend",
    "RowKind",
    "TableMetadata",
    "backend_for",
    "delta_spark_available",
    "op_row_kind",
    "read_changelog",
    "read_table_arrivals",
    "read_table_state",
    "table_row_count",
    "table_version",
]
