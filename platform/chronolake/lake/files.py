"""Read Delta data files with one Spark scan, each row tagged with the commit it came from.

The log says which files a commit added, removed or wrote as change data;
Spark reads those files (never the driver), and each row gets its file's tags
(commit version, file order, commit timestamp, change type, partition values) by
`_metadata.file_name`: from a literal map when the files are few, else from a
small broadcast table joined on the name.
`_metadata.row_index` gives the row's order inside its file.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import overload
from urllib.parse import unquote

import numpy as np
import pyarrow as pa
from pyroaring import FrozenBitMap
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    DataType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from chronolake.errors import SourceError
from chronolake.lake.changelog import CHANGE_TYPE, COMMIT_TIMESTAMP, COMMIT_VERSION, POSITION
from chronolake.spark.session import Row, join_local

PHYSICAL_NAME = "delta.columnMapping.physicalName"
"""Under column mapping, the name a column has in the data files (and partition values)."""
DELETED_FILE, DELETED_ROW = "file_name", "row_index"
"""The columns of a table of rows deleted by deletion vectors."""
# `_position` = file order * stride + row index: ordered like (file order, row index), and a
# file of up to 2^32 rows never reaches the next file's positions. Retractions (Delta's
# `delete` and `update_preimage`) of a commit come before its additions: their positions are
# shifted below zero, because writers do not order a pre-image before its post-image.
POSITION_STRIDE = 1 << 32
RETRACTION_SHIFT = 1 << 62
RETRACTIONS = ("delete", "update_preimage")

DRIVER_LISTING_MAX_FILES = 1000
_LISTING_THRESHOLD = "spark.sql.sources.parallelPartitionDiscovery.threshold"

_FILE = "__chronolake_file"
_ROW = "__chronolake_row"
_ORDER = "__chronolake_order"
_TIMESTAMP_MS = "__chronolake_timestamp_ms"
_FILE_CHANGE = "__chronolake_change"
_ENTRY = "__chronolake_entry"
_FILTER = "__chronolake_filter"
_NAMED = "__chronolake_named"


@dataclass(frozen=True, slots=True)
class RowFilter:
    """The rows of a data file one of its log entries stands for: `rows` only, or every row
    but `rows` (those a deletion vector already deleted)."""

    rows: FrozenBitMap
    only: bool


@dataclass(frozen=True, slots=True)
class TaggedFile:
    """A data or change-data file to read and the commit facts every row of it gets.

    `change_type` is the Delta change type of all its rows (`insert`, `delete`),
    or None for a `_change_data` file, whose rows carry their own `_change_type`.
    """

    uri: str
    version: int
    order: int
    timestamp_ms: int
    change_type: str | None
    partition_values: Mapping[str, str | None]
    row_filter: RowFilter | None = None

    @property
    def name(self) -> str:
        return self.uri.rstrip("/").rsplit("/", 1)[-1]


def file_uri(table_uri: str, logged_path: str) -> str:
    """Where Spark finds a logged file: logged paths are URL-encoded, relative or absolute."""
    path = unquote(logged_path)
    if "://" in logged_path or path.startswith("/"):
        return path
    return f"{table_uri.rstrip('/')}/{path}"


def file_name(path: str) -> str:
    """A data file's name (what `_metadata.file_name` reads) from its logged path or URI."""
    return unquote(path).rstrip("/").rsplit("/", 1)[-1]


def tagged_schema(schema: StructType) -> StructType:
    """The schema `read_tagged_files` returns: the table's columns, change type, commit facts."""
    return StructType(
        [
            *map(_logical, schema.fields),
            StructField(CHANGE_TYPE, StringType()),
            StructField(COMMIT_VERSION, LongType()),
            StructField(COMMIT_TIMESTAMP, TimestampType()),
            StructField(POSITION, LongType()),
        ]
    )


def read_tagged_files(
    spark: SparkSession,
    files: Sequence[TaggedFile],
    *,
    schema: StructType,
    partition_columns: Sequence[str],
    table: str,
    deleted: DataFrame | None = None,
) -> DataFrame:
    """One Spark read of `files`: the table's columns (partition columns restored from the
    log and cast to their Delta types) plus `_change_type`, `_commit_version`,
    `_commit_timestamp` and `_position`.

    A file listed several times (removed, then restored) is read once and
    joined to each of its entries. `deleted` (`file_name`, `row_index`) names rows that
    deletion vectors delete: they are left out.
    """
    if not files:
        return spark.createDataFrame([], tagged_schema(schema))
    _check_unique_names(files, table)
    partitioned = [f for f in schema.fields if f.name in partition_columns]
    stored = [f for f in schema.fields if f.name not in partition_columns]
    read_schema = StructType(
        [_physical(f) for f in stored] + [StructField(CHANGE_TYPE, StringType())]
    )
    uris = list(dict.fromkeys(f.uri for f in files))
    with _listed_on_the_driver(spark, len(uris)):
        scan = spark.read.schema(read_schema).parquet(*uris)
    data = scan.select(
        "*",
        F.col("_metadata.file_name").alias(_FILE),
        F.col("_metadata.row_index").alias(_ROW),
    )
    if deleted is not None:
        data = without_deleted(data, deleted, file_column=_FILE, row_column=_ROW)
    tags = StructType(_tag_fields(len(partitioned)))
    joined = _filtered(spark, join_local(data, tags, _tag_rows(files, partitioned), [_FILE]),
                       files)
    columns: list[Column] = [
        _partition_value(partitioned.index(f), f.dataType.simpleString()).alias(f.name)
        if f in partitioned
        else _logical_column(f)
        for f in schema.fields
    ]
    change = F.coalesce(F.col(_FILE_CHANGE), F.col(CHANGE_TYPE))
    shift = F.when(change.isin(*RETRACTIONS), F.lit(RETRACTION_SHIFT)).otherwise(F.lit(0))
    return joined.select(
        *columns,
        change.alias(CHANGE_TYPE),
        F.col(COMMIT_VERSION),
        F.timestamp_millis(F.col(_TIMESTAMP_MS)).alias(COMMIT_TIMESTAMP),
        (F.col(_ORDER) * F.lit(POSITION_STRIDE) + F.col(_ROW) - shift).alias(POSITION),
    )


def _filtered(spark: SparkSession, joined: DataFrame, files: Sequence[TaggedFile]) -> DataFrame:
    """`joined` (each file's rows, tagged by entry) with every entry's `row_filter` applied:
    one broadcast join with the filters' rows, as many as the deletion vectors name."""
    filtered = [(index, f.row_filter) for index, f in enumerate(files) if f.row_filter]
    if not filtered:
        return joined
    entries = np.concatenate([np.full(len(r.rows), i, dtype=np.int64) for i, r in filtered])
    rows = np.concatenate([np.asarray(r.rows.to_array(), dtype=np.int64) for _, r in filtered])
    named = spark.createDataFrame(pa.table({_ENTRY: entries, _ROW: rows})).withColumn(
        _NAMED, F.lit(True))
    mode = F.col(_FILTER)
    keep = (mode.isNull() | ((mode == "except") & F.col(_NAMED).isNull())
            | ((mode == "only") & F.col(_NAMED).isNotNull()))
    return joined.join(F.broadcast(named), on=[_ENTRY, _ROW], how="left").where(keep)


def _physical(field: StructField) -> StructField:
    """`field` as the data files hold it: its physical name under column mapping, nested
    fields too; without column mapping, `field` itself."""
    name = field.metadata.get(PHYSICAL_NAME, field.name)
    return StructField(name, _with_fields(field.dataType, _physical), field.nullable)


def _logical(field: StructField) -> StructField:
    return StructField(field.name, _with_fields(field.dataType, _logical), field.nullable)


@overload
def logical_type(data_type: StructType) -> StructType: ...


@overload
def logical_type(data_type: DataType) -> DataType: ...


def logical_type(data_type: DataType) -> DataType:
    """`data_type` with its nested fields' Delta metadata dropped: a table chronolake writes
    from these rows maps no columns."""
    return _with_fields(data_type, _logical)


@overload
def _with_fields(data_type: StructType, change: Callable[[StructField], StructField]
                 ) -> StructType: ...


@overload
def _with_fields(data_type: DataType, change: Callable[[StructField], StructField]
                 ) -> DataType: ...


def _with_fields(data_type: DataType, change: Callable[[StructField], StructField]) -> DataType:
    """`data_type` with `change` applied to its fields, and to those of its elements."""
    if isinstance(data_type, StructType):
        return StructType([change(f) for f in data_type.fields])
    if isinstance(data_type, ArrayType):
        return ArrayType(_with_fields(data_type.elementType, change), data_type.containsNull)
    if isinstance(data_type, MapType):
        return MapType(_with_fields(data_type.keyType, change),
                       _with_fields(data_type.valueType, change), data_type.valueContainsNull)
    return data_type


def _logical_column(field: StructField) -> Column:
    """A stored column read by its physical name, under its logical name (a nested type is
    cast: Spark casts structs field by field, in order)."""
    physical = _physical(field)
    column = F.col(f"`{physical.name}`")
    if physical.dataType != field.dataType:
        column = column.cast(logical_type(field.dataType))
    return column.alias(field.name)


def without_deleted(
    data: DataFrame, deleted: DataFrame, *, file_column: str, row_column: str
) -> DataFrame:
    """`data` without the rows `deleted` (`file_name`, `row_index`) names: those deletion
    vectors delete (a broadcast anti-join: deleted rows are as many as the deletes)."""
    gone = deleted.select(
        F.col(DELETED_FILE).alias(file_column), F.col(DELETED_ROW).alias(row_column)
    )
    return data.join(F.broadcast(gone), on=[file_column, row_column], how="left_anti")


@contextmanager
def _listed_on_the_driver(spark: SparkSession, count: int) -> Iterator[None]:
    """Spark lists more than 32 paths with a distributed job (seconds); the paths here are
    known files, so up to `DRIVER_LISTING_MAX_FILES` are stat-ed on the driver instead.
    (A read elsewhere on the session meanwhile lists on the driver too: only where, not what.)
    """
    previous = spark.conf.get(_LISTING_THRESHOLD, "32") or "32"
    if count > DRIVER_LISTING_MAX_FILES or count <= int(previous):
        yield
        return
    spark.conf.set(_LISTING_THRESHOLD, str(DRIVER_LISTING_MAX_FILES))
    try:
        yield
    finally:
        spark.conf.set(_LISTING_THRESHOLD, previous)


def _partition_value(index: int, spark_type: str) -> Column:
    # Delta logs partition values as strings; a Spark CAST reads its serialisation back.
    return F.col(f"__chronolake_pv_{index}").cast(spark_type)


def _tag_fields(partition_count: int) -> list[StructField]:
    fields = [
        StructField(_FILE, StringType(), False),
        StructField(_ENTRY, LongType(), False),
        StructField(_FILTER, StringType()),
        StructField(COMMIT_VERSION, LongType(), False),
        StructField(_ORDER, LongType(), False),
        StructField(_TIMESTAMP_MS, LongType(), False),
        StructField(_FILE_CHANGE, StringType()),
    ]
    return fields + [StructField(f"__chronolake_pv_{i}", StringType())
                     for i in range(partition_count)]


def _tag_rows(files: Sequence[TaggedFile], partitioned: list[StructField]) -> list[Row]:
    # Under column mapping the log keys partition values by physical name.
    keys = [(_physical(f).name, f.name) for f in partitioned]
    return [
        (f.name, index, _filter_mode(f.row_filter), f.version, f.order, f.timestamp_ms,
         f.change_type,
         *(f.partition_values.get(physical, f.partition_values.get(name))
           for physical, name in keys))
        for index, f in enumerate(files)
    ]


def _filter_mode(row_filter: RowFilter | None) -> str | None:
    if row_filter is None:
        return None
    return "only" if row_filter.only else "except"


def _check_unique_names(files: Sequence[TaggedFile], table: str) -> None:
    uris_by_name: dict[str, set[str]] = {}
    for f in files:
        uris_by_name.setdefault(f.name, set()).add(f.uri)
    clashes = sorted(name for name, uris in uris_by_name.items() if len(uris) > 1)
    if clashes:
        msg = (
            f"table {table!r}: data files in different folders share the name {clashes[0]!r}; "
            "chronolake tells files apart by name, as Delta writers name them uniquely; "
            "rewrite the table with a Delta writer (e.g. OPTIMIZE or a full copy)"
        )
        raise SourceError(msg)
