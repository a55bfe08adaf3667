"""The late-rows side table: rows an operator could not use, with why and when.

Sources never drop rows; an operator that cannot use a row (a window row whose
window already fired, a row with a null rowtime) sends it here instead of
dropping it silently. A side-table row is the input row (changelog columns),
`_watermark` (the input's watermark when the row arrived, epoch ms) and
`_late_reason`.
"""

from __future__ import annotations

from enum import StrEnum

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

REASON_COLUMN = "_late_reason"


class LateReason(StrEnum):
    """Why a row went to the late-rows side table."""

    NULL_ROWTIME = "null_rowtime"
    WINDOW_CLOSED = "window_closed"
    RETRACTION_AFTER_EMIT = "retraction_after_emit"
    """A -U/-D for a window already emitted: the emitted result is not revised."""


def side_table_rows(rows: DataFrame, reason: LateReason) -> DataFrame:
    """`rows` (changelog columns and `_watermark`) as side-table rows with `reason`."""
    return rows.withColumn(REASON_COLUMN, F.lit(reason.value))


def count_by_reason(side_table: DataFrame) -> dict[str, int]:
    """Side-table rows per reason, every reason present (one small aggregate job)."""
    # One row per reason read back: metadata-sized.
    found = {
        row[REASON_COLUMN]: int(row["rows"])
        for row in side_table.groupBy(REASON_COLUMN).agg(F.count(F.lit(1)).alias("rows")).collect()
    }
    return {reason.value: found.get(reason.value, 0) for reason in LateReason}
