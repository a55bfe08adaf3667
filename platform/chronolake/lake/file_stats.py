"""The statistics an `add` action logs for a data file, read from its Parquet footer.

Delta's writers log each file's row count and, per column, its min, max and null count;
readers skip a file whose bounds lie outside a filter (Delta's data skipping, and
`FileSpan`). The embedded backend's files are written by Spark's Parquet writer, whose
footer already holds per row group bounds: combining them costs no read of the data.
Only columns whose bounds mean the same in Parquet and in Delta are logged: integers,
dates and timestamps (strings are truncated by Delta's rules, floats have NaN, decimals
and nested columns are left out). A column left out is read as unknown, never skipped.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pyarrow as pa
import pyarrow.parquet as pq

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_PER_SECOND = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}


def file_stats(metadata: pq.FileMetaData) -> dict[str, object]:
    """`numRecords` and, for the top-level integer, date and timestamp columns whose every
    row group has bounds, `minValues`, `maxValues` and `nullCount` in Delta's JSON forms
    (timestamps to the millisecond, as Delta logs them)."""
    schema = metadata.schema.to_arrow_schema()
    mins: dict[str, object] = {}
    maxes: dict[str, object] = {}
    nulls: dict[str, int] = {}
    for index in range(metadata.num_columns):
        name = metadata.schema.column(index).path
        if "." in name or not _logged(schema.field(name).type):
            continue
        chunks = [metadata.row_group(group).column(index).statistics
                  for group in range(metadata.num_row_groups)]
        if not chunks or any(s is None or not s.has_min_max or s.null_count is None
                             for s in chunks):
            continue
        data_type = schema.field(name).type
        mins[name] = _json(min(s.min_raw for s in chunks), data_type)
        maxes[name] = _json(max(s.max_raw for s in chunks), data_type)
        nulls[name] = sum(s.null_count for s in chunks)
    stats: dict[str, object] = {"numRecords": metadata.num_rows}
    if mins:
        stats |= {"minValues": mins, "maxValues": maxes, "nullCount": nulls}
    return stats


def _logged(data_type: pa.DataType) -> bool:
    return (pa.types.is_integer(data_type) or pa.types.is_date32(data_type)
            or pa.types.is_timestamp(data_type))


def _json(raw: int, data_type: pa.DataType) -> object:
    """A physical Parquet bound as Delta logs the column's value."""
    if pa.types.is_date32(data_type):
        return (date(1970, 1, 1) + timedelta(days=raw)).isoformat()
    if pa.types.is_timestamp(data_type):
        moment = utc_moment(floor_millis(raw, data_type.unit))
        text = moment.replace(tzinfo=None).isoformat(timespec="milliseconds")
        return text if data_type.tz is None else f"{text}Z"
    return raw


def floor_millis(count: int, unit: str) -> int:
    """A count of Arrow timestamp `unit`s as epoch milliseconds, floored: Delta logs
    timestamps truncated to the millisecond."""
    return count * 1_000 // _PER_SECOND[unit]


def utc_moment(millis: int) -> datetime:
    """Epoch milliseconds as a UTC datetime, exactly (no float)."""
    return _EPOCH + timedelta(milliseconds=millis)
