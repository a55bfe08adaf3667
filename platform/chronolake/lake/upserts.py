"""A batch of changes applied to a keyed table: which rows go, which come, what the feed says.

A derived table's state is unique on its upsert key. A batch of changes (rows
with `_row_kind` and arrival order) is applied per key: the key's last change
decides its row (+I/+U: that row; -U/-D: none). The stored rows of touched keys
leave the table in one of two ways, chosen per data file so that a run writes
in proportion to its change: a small file, or one where a large share of rows
changes, is rewritten without them (copy-on-write); in any other file they are
marked deleted by a deletion vector and the file stays as it is. The change
data feed says exactly what happened to each touched key: the stored row as
`update_preimage` or `delete`, the new row as `update_postimage` or `insert`;
unchanged rows never appear. All of it is lazy Spark work; only the touched
files' names and the row indexes of the touched rows (as many as the change)
reach the driver.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from chronolake.lake.changelog import (
    ADDITIONS,
    ARRIVAL_ORDER,
    CHANGE_TYPE,
    ROW_KIND,
    SYSTEM_COLUMNS,
    RowKind,
)

FILE_NAME = "__upsert_file"
"""The column naming the data file a stored row was read from."""
ROW_INDEX = "__upsert_row"
"""The column holding a stored row's index in its data file."""

REWRITE_BELOW_ROWS = 10_000
"""A data file with fewer live rows is rewritten rather than given a deletion vector: cheap,
and it keeps small tables readable by Delta readers without deletion vector support."""
REWRITE_SHARE = 0.25
"""A data file where at least this share of the live rows changes is rewritten."""

_LAST = "__upsert_last"
_FIRST = "__upsert_first"
RETRACTED = "__upsert_retracted"
_RETRACTIONS = (RowKind.UPDATE_BEFORE.value, RowKind.DELETE.value)


@dataclass(frozen=True)
class Upsert:
    """What applying a batch writes: the rows of the rewritten files and the new rows, the
    files they replace, the rows deletion vectors delete (row indexes per file), and the
    change data."""

    rows: DataFrame
    rewritten_files: tuple[str, ...]
    deleted_rows: Mapping[str, tuple[int, ...]]
    change_data: DataFrame


def additions(changes: DataFrame) -> DataFrame:
    """A batch without retractions as the rows it adds (each key's one +I or +U)."""
    columns = [c for c in changes.columns if c not in SYSTEM_COLUMNS]
    return changes.where(F.col(ROW_KIND).isin(*ADDITIONS)).select(*columns)


def apply_changes(
    changes: DataFrame, stored: DataFrame, key: Sequence[str], live_rows: Mapping[str, int]
) -> Upsert:
    """`changes` applied to the `stored` rows (tagged with `FILE_NAME` and `ROW_INDEX`);
    `live_rows` counts each data file's rows not deleted yet."""
    columns = [c for c in changes.columns if c not in SYSTEM_COLUMNS]
    last = last_changes(changes, key).localCheckpoint(eager=False)
    final = last.where(~F.col(RETRACTED)).drop(RETRACTED)
    touched = last.select(*key)
    old = stored.join(touched, on=list(key), how="left_semi").localCheckpoint(eager=True)
    # The touched rows' files and row indexes, for the deletion vectors the driver writes:
    # as many as the rows the batch changes, never the table's.
    touched_rows = {
        row[FILE_NAME]: tuple(row[ROW_INDEX])
        for row in old.groupBy(FILE_NAME).agg(F.collect_list(ROW_INDEX).alias(ROW_INDEX))
        .collect()
    }
    files = tuple(sorted(
        name for name, rows in touched_rows.items() if _rewritten(len(rows), live_rows[name])
    ))
    kept = stored.where(F.col(FILE_NAME).isin(*files)).join(touched, on=list(key), how="left_anti")
    old = old.select(*columns)
    return Upsert(
        rows=kept.select(*columns).unionByName(final), rewritten_files=files,
        deleted_rows={name: rows for name, rows in touched_rows.items() if name not in files},
        change_data=_change_data(old, final, key),
    )


def _rewritten(touched: int, live: int) -> bool:
    """Whether a data file is rewritten (else its touched rows get a deletion vector)."""
    return live < REWRITE_BELOW_ROWS or touched >= REWRITE_SHARE * live


def last_changes(changes: DataFrame, key: Sequence[str]) -> DataFrame:
    """Per key the batch changes, the row its last change leaves, without system columns, and
    `RETRACTED`: true when that change is a -U or -D (the key has no row).

    A key's changes alternate additions and retractions, each retraction taking back the
    addition before it. When the batch's first change for a key is an addition and its last
    a retraction, they take back each other and everything between: the key keeps the row
    it had, and is left out (an operator emits a row and its retraction together when both
    waited for the watermark, after a later version of the row came out). An aggregate, not
    a window: Spark 4.2's constraint propagation fails on a window over a union of ticks."""
    columns = [c for c in changes.columns if c not in SYSTEM_COLUMNS]
    order = F.struct(*(c for c in ARRIVAL_ORDER if c in changes.columns))
    last = F.max_by(F.struct(ROW_KIND, *columns), order).alias(_LAST)
    first = F.min_by(ROW_KIND, order).alias(_FIRST)
    retracted = F.col(f"{_LAST}.{ROW_KIND}").isin(*_RETRACTIONS)
    return changes.groupBy(*key).agg(last, first).where(
        ~(retracted & F.col(_FIRST).isin(*ADDITIONS))
    ).select(
        *(F.col(f"{_LAST}.`{c}`").alias(c) for c in columns), retracted.alias(RETRACTED)
    )


def final_rows(changes: DataFrame, key: Sequence[str]) -> DataFrame:
    """Per key, the row its last change leaves (none after a -U or -D)."""
    return last_changes(changes, key).where(~F.col(RETRACTED)).drop(RETRACTED)


def _change_data(old: DataFrame, new: DataFrame, key: Sequence[str]) -> DataFrame:
    """Per touched key, what happened: pre- and post-image, delete or insert."""
    present = list(key)
    updated_keys = new.select(*present).join(old.select(*present), on=present, how="left_semi")
    return (
        old.join(updated_keys, on=present, how="left_semi")
        .withColumn(CHANGE_TYPE, F.lit("update_preimage"))
        .unionByName(
            new.join(updated_keys, on=present, how="left_semi")
            .withColumn(CHANGE_TYPE, F.lit("update_postimage"))
        )
        .unionByName(
            old.join(new.select(*present), on=present, how="left_anti")
            .withColumn(CHANGE_TYPE, F.lit("delete"))
        )
        .unionByName(
            new.join(old.select(*present), on=present, how="left_anti")
            .withColumn(CHANGE_TYPE, F.lit("insert"))
        )
    )
