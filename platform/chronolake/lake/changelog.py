"""The changelog contract every lake backend produces and every operator consumes.

A changelog DataFrame holds the table's own columns plus these system columns:

- `_row_kind`: Flink's row kind, one of `+I`, `-U`, `+U`, `-D`.
- `_commit_version`: the Delta version of the commit that carried the row (long).
- `_commit_timestamp`: that commit's timestamp (TIMESTAMP, UTC instant).
- `_position`: the row's position within its commit (long): file order within
  the commit's actions, then row order within the file. A commit's retractions
  (`-U`, `-D`) come before its additions (`+I`, `+U`), so every `-U` precedes
  its `+U` (retractions have negative positions). Positions order rows; they
  are not dense (a file's rows start at file order * 2^32).

Arrival order within a table is `(_commit_version, _position)`; lateness is
judged against it, so every operator orders by it.
"""

from __future__ import annotations

from enum import StrEnum

ROW_KIND = "_row_kind"
COMMIT_VERSION = "_commit_version"
COMMIT_TIMESTAMP = "_commit_timestamp"
POSITION = "_position"

SYSTEM_COLUMNS: tuple[str, ...] = (ROW_KIND, COMMIT_VERSION, COMMIT_TIMESTAMP, POSITION)
CHANGE_TYPE = "_change_type"
"""Delta's change data files' column: the kind of each change."""
RESERVED_COLUMNS: tuple[str, ...] = (*SYSTEM_COLUMNS, CHANGE_TYPE)
"""Names a table read as a changelog cannot use for its own columns (Delta's change data feed
reserves its own likewise)."""
ARRIVAL_ORDER: tuple[str, ...] = (COMMIT_VERSION, POSITION)


class RowKind(StrEnum):
    """Flink's RowKind short strings."""

    INSERT = "+I"
    UPDATE_BEFORE = "-U"
    UPDATE_AFTER = "+U"
    DELETE = "-D"


ADDITIONS: tuple[str, ...] = (RowKind.INSERT.value, RowKind.UPDATE_AFTER.value)
"""The row kinds whose row is added to the table, Flink's accumulate messages
(`RowDataUtil.isAccumulateMsg`); the others (`-U`, `-D`) retract a row."""
