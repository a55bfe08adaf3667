"""The SCD Type 2 MERGE of Delta Lake's documentation, run on a change stream one batch at a
time: the anchor chronolake's history (`FOR SYSTEM_TIME ALL`) is compared with, by
`tests/test_history_anchors.py` and `benchmarks/history.py`.

Delta's docs ("Upsert into a table using merge", "Slowly changing data (SCD) Type 2
operation into Delta tables": docs.delta.io/latest/delta-update.html, source
delta-io/delta `docs/source/delta-update.md`) stage each batch of updates twice and apply
it with one MERGE on `target.key = mergeKey`: with the key as `mergeKey`, a row matches its
key's current row and closes it (`current = false`, `end_date` = the update's effective
date) or, for a new key, is inserted; with a NULL `mergeKey`, which never matches, the new
value of an existing key is inserted as its current row.

What a change stream (key, values, event time, row kind, arrival) needs beyond the docs'
example, kept as close to it as these allow:

- `-U` rows are no versions; a `-D` closes the current row at its time and inserts nothing.
- A batch may hold several changes of one key, where the docs' MERGE would fail (several
  source rows matching one target row) and their CDC example keeps the latest change only:
  the changes are staged in event-time order, a tie (same key and time) going to the later
  arrival; each is inserted with `end_date` the time of the next (NULL for the last), and
  the first closes the current row.
- The docs' "values differ" test moves into staging, where it compares each change with the
  one before it (the current row, for the batch's first): a change repeating the live value,
  or a delete with no live row, is no change.
- NULL-`mergeKey` rows are staged for every key the table knows, not only for keys with a
  current row as the docs' join does: so a key deleted in one batch and inserted again in a
  later one gets its row (its new `mergeKey` row matches only closed rows, so is never
  inserted).

Staging is DataFrame operations and the MERGE runs in Delta's JVM (delta-spark): nothing is
collected to the driver.
"""

from __future__ import annotations

from dataclasses import dataclass

from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType, StructField, StructType

CURRENT, EFFECTIVE, END = "current", "effective_date", "end_date"
"""The SCD2 table's own columns, after the key and the values (the docs' names)."""
MERGE_KEY = "merge_key"
_VALUES, _LIVE, _NEXT, _FIRST, _KNOWN = "__values", "__live", "__next", "__first", "__known"


@dataclass(frozen=True)
class ChangeStream:
    """Where a change stream keeps its key, values, event time, row kind (`+I`, `+U`, `-U`,
    `-D`) and arrival order (the changelog's system columns by default)."""

    key: str
    values: tuple[str, ...]
    time: str
    kind: str = "_row_kind"
    arrival: tuple[str, ...] = ("_commit_version", "_position")


def create_scd2_table(spark: SparkSession, path: str, changes: DataFrame, stream: ChangeStream
                      ) -> DeltaTable:
    """An empty SCD2 table at `path` for `changes`: the key, the values, `current`,
    `effective_date` and `end_date` (of the event time's type)."""
    fields = {field.name: field for field in changes.schema.fields}
    time_type = fields[stream.time].dataType
    schema = StructType([
        fields[stream.key], *(fields[name] for name in stream.values),
        StructField(CURRENT, BooleanType()), StructField(EFFECTIVE, time_type),
        StructField(END, time_type),
    ])
    spark.createDataFrame([], schema).write.format("delta").save(path)
    return DeltaTable.forPath(spark, path)


def apply_batch(table: DeltaTable, changes: DataFrame, stream: ChangeStream) -> None:
    """One batch of `changes` into the SCD2 `table`, in one MERGE."""
    time = f"s.`{stream.time}`"
    staged = staged_updates(table.toDF(), changes, stream).alias("s")
    (
        table.alias("t")
        .merge(staged, f"t.`{stream.key}` = s.{MERGE_KEY}")
        .whenMatchedUpdate(condition=f"t.{CURRENT} = true",
                           set={CURRENT: "false", END: time})
        .whenNotMatchedInsert(
            condition=f"s.`{stream.kind}` <> '-D'",
            values={
                **{f"`{name}`": f"s.`{name}`" for name in (stream.key, *stream.values)},
                CURRENT: f"s.{_NEXT} IS NULL", EFFECTIVE: time, END: f"s.{_NEXT}",
            },
        )
        .execute()
    )


def staged_updates(target: DataFrame, changes: DataFrame, stream: ChangeStream) -> DataFrame:
    """The batch as the MERGE's source (`s`): a `mergeKey` row for each key's first change
    (it closes the key's current row, or inserts a new key), and a NULL-`mergeKey` row for
    every other change that is a version, and for the first one of a key the table knows."""
    key, time, kind = stream.key, stream.time, stream.kind
    values = F.struct(*[F.col(f"`{name}`") for name in stream.values])
    events = (
        changes.where(F.col(kind) != "-U")
        .groupBy(key, time)  # a tie: the later arrival wins
        .agg(F.max_by(F.struct(values.alias("v"), F.col(kind).alias("k")),
                      F.struct(*[F.col(name) for name in stream.arrival])).alias("e"))
        .select(key, time, F.col("e.v").alias(_VALUES), F.col("e.k").alias(kind))
    )
    known = (  # each key the table holds, with its current row's values (NULL: none)
        target.join(events.select(key).distinct(), key, "left_semi")
        .groupBy(key)
        .agg(F.max(F.when(F.col(CURRENT), values)).alias(_LIVE))
        .withColumn(_KNOWN, F.lit(True))
    )
    by_time = Window.partitionBy(key).orderBy(time)
    live = F.when(F.col(kind) != "-D", F.col(_VALUES))  # NULL: no live row from here on
    before = F.when(F.row_number().over(by_time) == 1, F.col(_LIVE)).otherwise(
        F.lag(live).over(by_time))
    changed = (
        events.join(known, key, "left")
        .withColumn("__unchanged", before.eqNullSafe(live))
        .where(~F.col("__unchanged"))
        .withColumn(_NEXT, F.lead(time).over(by_time))
        .withColumn(_FIRST, F.row_number().over(by_time) == 1)
    )
    columns = [key, *[F.col(f"{_VALUES}.`{name}`").alias(name) for name in stream.values],
               time, kind, _NEXT]
    keyed = changed.where(F.col(_FIRST)).select(F.col(key).alias(MERGE_KEY), *columns)
    unkeyed = changed.where(
        (F.col(kind) != "-D") & (~F.col(_FIRST) | F.col(_KNOWN).isNotNull())
    ).select(F.lit(None).cast(changes.schema[key].dataType).alias(MERGE_KEY), *columns)
    return keyed.unionByName(unkeyed)
