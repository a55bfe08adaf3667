"""How rows are stored in chronolake's own Delta tables (state, history, late rows).

Delta reads add their own system columns (`_commit_version`, ...), so the
changelog's system columns are stored renamed: `state_commit_version` in state
and history tables, `source_commit_version` in side tables.
"""

from __future__ import annotations

from pyspark.sql import DataFrame

from chronolake.lake.changelog import SYSTEM_COLUMNS

STATE_PREFIX = "state"
SOURCE_PREFIX = "source"


def stored(frame: DataFrame, *, prefix: str = STATE_PREFIX) -> DataFrame:
    """`frame` with its system columns renamed for storage (`_position` → `state_position`)."""
    return frame.withColumnsRenamed({c: f"{prefix}{c}" for c in SYSTEM_COLUMNS})


def from_stored(frame: DataFrame) -> DataFrame:
    """State or history rows as the changelog they were stored from."""
    return frame.withColumnsRenamed({f"{STATE_PREFIX}{c}": c for c in SYSTEM_COLUMNS})
