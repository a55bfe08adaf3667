"""Changelogs that CDC tools land as ordinary rows with an operation column.

`'changelog' = 'op-column'` with `'changelog.op-column' = 'op'`: the column holds
Flink's row kinds (`+I`, `-U`, `+U`, `-D`) or Debezium's operations (`c` create
and `r` snapshot read -> `+I`, `u` -> `+U`, `d` -> `-D`).
"""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import Column
from pyspark.sql import functions as F

from chronolake.lake.changelog import RowKind

OPERATION_ROW_KINDS: Mapping[str, RowKind] = {
    **{kind.value: kind for kind in RowKind},
    "c": RowKind.INSERT,
    "r": RowKind.INSERT,
    "u": RowKind.UPDATE_AFTER,
    "d": RowKind.DELETE,
}


def op_row_kind(op_column: str, *, table: str) -> Column:
    """The row kind of each row, from its operation column, as one Spark expression.

    An unknown or null operation fails the Spark job that meets it (Spark's
    `raise_error`), naming the table, the column and the value: checking up
    front would cost a second pass over the data, and a wrong value must not
    turn into a silently dropped row.
    """
    op = F.col(f"`{op_column}`")
    known = F.create_map(*(F.lit(v) for pair in OPERATION_ROW_KINDS.items() for v in pair))
    message = F.concat(
        F.lit(f"table {table!r}: operation column {op_column!r} holds "),
        F.coalesce(F.concat(F.lit("'"), op.cast("string"), F.lit("'")), F.lit("NULL")),
        F.lit(
            f", expected one of {', '.join(OPERATION_ROW_KINDS)}; fix the CDC feed, or filter "
            "those rows out before they land in the table"
        ),
    )
    return F.when(op.isNotNull() & known[op].isNotNull(), known[op]).otherwise(
        F.raise_error(message).cast("string")
    )
