"""A span of a stored timestamp column: what lets a read of a few hours of a long table skip
the data files that hold none of them, by the min and max Delta logs for each file.

A restatement reads the rows of a range, and the stored rows of the region it changes; a
table written in time order keeps each hour in a few files, so listing only those makes the
read grow with the range rather than with the table (docs/design.md, "Restatement").
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import StructType, TimestampNTZType, TimestampType

from chronolake.lake.file_stats import floor_millis, utc_moment


@dataclass(frozen=True)
class FileSpan:
    """The rows whose stored TIMESTAMP or TIMESTAMP_NTZ `column` lies in [`start_ms`,
    `end_ms`). A read given one may skip every file whose statistics show none of them; it
    may still return rows outside, which the reader filters."""

    column: str
    start_ms: int
    end_ms: int

    def predicate(self, schema: StructType) -> Column | None:
        """The rows' filter over a frame of `schema`; None when `schema` has no such
        timestamp column (nothing is skipped)."""
        condition = self.sql(schema)
        return None if condition is None else F.expr(condition)

    def sql(self, schema: StructType, alias: str | None = None) -> str | None:
        """The rows' filter as SQL over a table of `schema` (its columns qualified by
        `alias`): comparisons with constant timestamps, the form Delta's data skipping prunes
        by, NTZ read as UTC as Flink does; None when `schema` has no such timestamp column."""
        if self.column not in schema.fieldNames():
            return None
        data_type = schema[self.column].dataType
        if not isinstance(data_type, TimestampType | TimestampNTZType):
            return None
        quoted = "`" + self.column.replace("`", "``") + "`"
        column = quoted if alias is None else f"{alias}.{quoted}"
        start, end = (_literal(ms, data_type) for ms in (self.start_ms, self.end_ms))
        return f"({column} >= {start} AND {column} < {end})"

    def overlapping(self, actions: pa.Table) -> list[bool]:
        """Per add action (delta-rs's `get_add_actions(flatten=False)`), whether its file may
        hold rows of the span: a file without a logged min and max for the column may.
        Metadata-sized: one value per file."""
        bounds = [self._logged_millis(actions, name) for name in ("min", "max")]
        if bounds[0] is None or bounds[1] is None:
            return [True] * actions.num_rows
        return [low is None or high is None or (high >= self.start_ms and low < self.end_ms)
                for low, high in zip(*bounds, strict=True)]

    def _logged_millis(self, actions: pa.Table, statistic: str) -> list[int | None] | None:
        """The files' logged `statistic` of the column as epoch millis, floored (Delta logs
        timestamps to the millisecond); None when the log has none for it."""
        if statistic not in actions.column_names:
            return None
        values = actions[statistic].combine_chunks()
        if not isinstance(values.type, pa.StructType) or values.type.get_field_index(
                self.column) < 0:
            return None
        logged = values.field(self.column)
        if not pa.types.is_timestamp(logged.type):
            return None
        counts = pc.cast(logged, pa.int64()).to_pylist()
        return [None if count is None else floor_millis(count, logged.type.unit)
                for count in counts]


def _literal(millis: int, data_type: TimestampType | TimestampNTZType) -> str:
    """Epoch millis as a SQL timestamp constant of `data_type` (NTZ: the UTC wall clock)."""
    moment = utc_moment(millis)
    if isinstance(data_type, TimestampNTZType):
        return f"TIMESTAMP_NTZ '{moment.replace(tzinfo=None).isoformat(sep=' ')}'"
    return f"TIMESTAMP '{moment.isoformat(sep=' ')}'"
