"""Which windows complete a partitioned view's partitions, read from its query (no Spark).

A window aggregate partitioned by `window_start` emits a window once the watermark passes the
window's end, so the ends of its windows, not the partition's, complete a partition
(`chronolake.watermarks.partitions.completed_at`); any other table is complete up to its
watermark.
"""

from __future__ import annotations

from collections.abc import Mapping

from chronolake.schema import TableSpec, ViewSpec
from chronolake.schema.spec import ViewKind
from chronolake.schema.windows import WINDOW_START, Windows
from chronolake.sql.view_kinds import view_kind
from chronolake.sql.window import plan_window_aggregate


def partition_windows(spec: TableSpec | ViewSpec,
                      specs: Mapping[str, TableSpec | ViewSpec]) -> Windows | None:
    """The windows of a window aggregate partitioned by `window_start`, else None; `specs`
    the lake's tables and views by lower-case name (the query's inputs among them)."""
    partitions = spec.time.partitions
    if (not isinstance(spec, ViewSpec) or partitions is None or partitions.column is None
            or partitions.column.lower() != WINDOW_START
            or view_kind(spec) is not ViewKind.WINDOW_AGGREGATE):
        return None
    return plan_window_aggregate(spec.query, specs).windows
