"""A batch of changes applied to a keyed table: which rows go, which come, what the feed says.

A derived table's state is unique on its upsert key. A batch of changes (rows
with `_row_kind` and arrival order) is applied per key: the key's last change
decides its row (+I/+U: that row; -U/-D: none). Copy-on-write then rewrites
only the data files holding a touched key, and the change data feed says
exactly what happened to each touched key: the stored row as `update_preimage`
or `delete`, the new row as `update_postimage` or `insert`; unchanged rows
never appear. All of it is lazy Spark work; only the names of the files to
rewrite reach the driver.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from chronolake.lake._files import CHANGE_TYPE
from chronolake.lake.changelog import ARRIVAL_ORDER, ROW_KIND, SYSTEM_COLUMNS, RowKind

FILE_NAME = "__upsert_file"
"""The column naming the data file a stored row was read from."""

_LAST = "__upsert_last"
RETRACTED = "__upsert_retracted"
_ADDITIONS = (RowKind.INSERT.value, RowKind.UPDATE_AFTER.value)
_RETRACTIONS = (RowKind.UPDATE_BEFORE.value, RowKind.DELETE.value)


@dataclass(frozen=True)
class Upsert:
    """What applying a batch writes: the rows of the rewritten files and the new rows, the
    files they replace, and the change data."""

    rows: DataFrame
    rewritten_files: tuple[str, ...]
    change_data: DataFrame


def additions(changes: DataFrame) -> DataFrame:
    """A batch without retractions as the rows it adds (each key's one +I or +U)."""
    columns = [c for c in changes.columns if c not in SYSTEM_COLUMNS]
    return changes.where(F.col(ROW_KIND).isin(*_ADDITIONS)).select(*columns)


def apply_changes(changes: DataFrame, stored: DataFrame, key: Sequence[str]) -> Upsert:
    """`changes` applied to the `stored` rows (tagged with `FILE_NAME`)."""
    columns = [c for c in changes.columns if c not in SYSTEM_COLUMNS]
    final = final_rows(changes, key)
    touched = changes.select(*key).distinct()
    old = stored.join(touched, on=list(key), how="left_semi").localCheckpoint(eager=True)
    # File names of the stored rows of touched keys: metadata-sized.
    files = tuple(sorted(r[FILE_NAME] for r in old.select(FILE_NAME).distinct().collect()))
    kept = stored.where(F.col(FILE_NAME).isin(*files)).join(touched, on=list(key), how="left_anti")
    old = old.select(*columns)
    change_data = _change_data(old, final, key)
    return Upsert(
        rows=kept.select(*columns).unionByName(final), rewritten_files=files,
        change_data=change_data,
    )


def last_changes(changes: DataFrame, key: Sequence[str]) -> DataFrame:
    """Per key, the row its last change leaves, without system columns, and `RETRACTED`: true
    when that change is a -U or -D (the key has no row). An aggregate, not a window: Spark
    4.2's constraint propagation fails on a window over a union of ticks."""
    columns = [c for c in changes.columns if c not in SYSTEM_COLUMNS]
    order = [c for c in ARRIVAL_ORDER if c in changes.columns]
    last = F.max_by(F.struct(ROW_KIND, *columns), F.struct(*order)).alias(_LAST)
    return changes.groupBy(*key).agg(last).select(
        *(F.col(f"{_LAST}.`{c}`").alias(c) for c in columns),
        F.col(f"{_LAST}.{ROW_KIND}").isin(*_RETRACTIONS).alias(RETRACTED),
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
