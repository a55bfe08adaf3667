"""Timestamps as the watermark domain: long milliseconds since the epoch.

Flink's watermark strategy may return a nullable TIMESTAMP(3), TIMESTAMP_LTZ(3)
or BIGINT (epoch millis); this module turns any of them into a long column and
refuses everything else at definition time, before a Spark job runs.
"""

from __future__ import annotations

from datetime import UTC, datetime

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ByteType,
    DataType,
    IntegerType,
    LongType,
    ShortType,
    TimestampNTZType,
    TimestampType,
)

from chronolake.errors import DefinitionError

_EPOCH_NTZ = "1970-01-01 00:00:00"
_INTEGRAL = (ByteType, ShortType, IntegerType, LongType)


def is_timestamp(data_type: DataType) -> bool:
    """True for Spark's TIMESTAMP (Flink TIMESTAMP_LTZ) and TIMESTAMP_NTZ (Flink TIMESTAMP)."""
    return isinstance(data_type, TimestampType | TimestampNTZType)


def timestamp_millis(column: Column, data_type: DataType) -> Column:
    """A TIMESTAMP or TIMESTAMP_NTZ column as epoch millis (NTZ read as UTC, as Flink does).

    NTZ goes through `timestamp_diff` rather than a cast to TIMESTAMP, which
    would depend on the session time zone.
    """
    if isinstance(data_type, TimestampNTZType):
        return F.timestamp_diff(
            "MILLISECOND", F.lit(_EPOCH_NTZ).cast(TimestampNTZType()), column
        )
    return F.unix_millis(column)


def millis_timestamp(millis: Column, data_type: DataType) -> Column:
    """Epoch millis as a TIMESTAMP or TIMESTAMP_NTZ (NTZ as the UTC wall clock, as Flink does)."""
    if isinstance(data_type, TimestampNTZType):
        return F.timestamp_add("MILLISECOND", millis, F.lit(_EPOCH_NTZ).cast(TimestampNTZType()))
    return F.timestamp_millis(millis)


def utc_millis(moment: datetime) -> int:
    """Epoch milliseconds of `moment`, read as UTC when it has no zone (as watermarks are)."""
    zoned = moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
    return round(zoned.timestamp() * 1000)


def utc_text(millis: int) -> str:
    """Epoch milliseconds as the UTC instant stamps use: `2026-11-02T09:00:00.000Z`."""
    moment = datetime.fromtimestamp(millis / 1000, tz=UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def within(column: Column, data_type: DataType, start_ms: int, end_ms: int) -> Column:
    """Whether a TIMESTAMP or TIMESTAMP_NTZ `column` lies in [`start_ms`, `end_ms`): compared
    with constant timestamps, so Delta's file statistics skip the files outside."""
    start, end = (millis_timestamp(F.lit(ms).cast("long"), data_type) for ms in (start_ms, end_ms))
    return (column >= start) & (column < end)


def check_watermark_type(data_type: DataType, *, what: str) -> None:
    """Refuse a strategy type that is neither a timestamp nor integral epoch millis."""
    if is_timestamp(data_type) or isinstance(data_type, _INTEGRAL):
        return
    msg = (
        f"{what} returns {data_type.simpleString().upper()}; a watermark strategy must "
        "return a nullable TIMESTAMP(3), TIMESTAMP_LTZ(3) or BIGINT (epoch millis); "
        "cast the expression, e.g. CAST(... AS TIMESTAMP(3))"
    )
    raise DefinitionError(msg)


def watermark_millis(column: Column, data_type: DataType) -> Column:
    """A generated watermark (TIMESTAMP, TIMESTAMP_NTZ or integral epoch millis) as a long."""
    check_watermark_type(data_type, what="watermark strategy")
    if is_timestamp(data_type):
        return timestamp_millis(column, data_type)
    return column.cast(LongType())
