"""The changes that turn one set of keyed rows into another: what a recompute writes.

A restatement recomputes a region of a derived table and writes only what differs from the
stored rows of that region (docs/design.md, "Restatement"), as Flink's window operator
emits a late firing: `-U`/`+U` for a key whose row changed, `-D` for a key that vanished,
`+I` for a new key, nothing for an equal row (`AggregateWindowOperator.emitWindowResult`).
Rows are compared whole, NULLs equal (Spark's set operations); keys compare NULL-safe too.
Lazy: no Spark job.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import reduce

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from chronolake.lake.changelog import COMMIT_VERSION, POSITION, ROW_KIND, RowKind

_KEY = "__diff_key_"


def row_diff(old: DataFrame, new: DataFrame, key: Sequence[str]) -> DataFrame:
    """The changes from `old` to `new` (the same columns, each unique on `key`): the columns
    plus `_row_kind`, `_commit_version` (null) and `_position` (a key's -U before its +U)."""
    columns = new.columns
    old = old.select(*(F.col(f"`{c}`") for c in columns))
    changed = new.exceptAll(old)  # new rows, and rows whose values moved
    gone = old.exceptAll(new)  # old rows, and the old values of rows that moved
    updated = with_key_of(changed, gone, key, "left_semi")
    before = with_key_of(gone, changed, key, "left_semi")
    deleted = with_key_of(gone, changed, key, "left_anti")
    inserted = with_key_of(changed, gone, key, "left_anti")
    parts = [
        (before, RowKind.UPDATE_BEFORE, 0),
        (updated, RowKind.UPDATE_AFTER, 1),
        (deleted, RowKind.DELETE, 0),
        (inserted, RowKind.INSERT, 1),
    ]
    return reduce(DataFrame.unionByName, [
        rows.select(
            *(F.col(f"`{c}`") for c in columns),
            F.lit(kind.value).alias(ROW_KIND),
            F.lit(None).cast("long").alias(COMMIT_VERSION),
            F.lit(position).cast("long").alias(POSITION),
        )
        for rows, kind, position in parts
    ])


def with_key_of(rows: DataFrame, other: DataFrame, key: Sequence[str], how: str) -> DataFrame:
    """`rows` whose key `other` holds (`left_semi`) or does not (`left_anti`), NULL equal to
    NULL (a window's group key may be NULL)."""
    keys = [f"{_KEY}{i}" for i in range(len(key))]
    held = other.select(*(F.col(f"`{c}`").alias(k) for c, k in zip(key, keys, strict=True)))
    same = reduce(Column.__and__, [
        F.col(f"`{c}`").eqNullSafe(F.col(k)) for c, k in zip(key, keys, strict=True)
    ])
    return rows.join(held, same, how)
