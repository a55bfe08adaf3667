"""A write's files go into a table through a staging folder inside it, then move in.

Whoever writes them (Spark, in a run), a write's Parquet files first land in a staging
folder of the table (`.chronolake-staging-…`, named by its writer: `chronolake.lake.scratch`),
in Spark's layout (`col=value/` folders for partitions). Once the write is complete they move
into the table and are described as `add` actions, for the one commit that makes them part of
it (`chronolake.lake.appends`, or a MERGE's). A write killed half-way leaves one folder, which
the next write into the table removes (at once from the same host, after a day from another:
`chronolake.lake.scratch`). On an object store a move is a copy and a delete; it
is never the commit point (the Delta commit, a put-if-absent write, is), so it need not be
atomic.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import PurePosixPath
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake.transaction import AddAction

from chronolake.errors import SourceError
from chronolake.lake.file_stats import file_stats
from chronolake.lake.scratch import staging_name
from chronolake.lake.storage import Storage

_HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"
_PARQUET_MAGIC = b"PAR1"
_FOOTER_TAIL = 8
"""A Parquet file ends with its footer's length (4 bytes, little-endian) and `PAR1`."""


def write_staged(table: Storage, write: Callable[[str], None]) -> list[AddAction]:
    """Have `write` write Parquet files into a new staging folder of `table` (it gets the
    folder's path or URI), move them into the table, and describe them as `add` actions.

    What killed writes left in the table (staging folders, temporary commits) goes first;
    the staging folder goes whatever happens.
    """
    for folder in ("", "_delta_log"):
        table.sweep(folder)
    staging = staging_name()
    try:
        write(str(table.path_of(staging)))
        from chronolake.faults import FaultPoint, fault_point  # runtime imports lake

        fault_point(FaultPoint.IN_STAGING)
        return _move_into_table(table, staging)
    finally:
        table.delete_tree(staging)


def _move_into_table(table: Storage, staging: str) -> list[AddAction]:
    """Move the Parquet files in `table`'s folder `staging` into the table, each as an `add`.

    Partition values come from the `col=value` folders; row counts and column bounds from
    each file's footer (metadata-sized, `file_stats`). Empty files are dropped.
    """
    actions: list[AddAction] = []
    for key, size in sorted(table.sizes(staging).items()):
        relative = PurePosixPath(key).relative_to(staging)
        if not key.endswith(".parquet") or any(map(_hidden, relative.parts)):
            continue  # `_SUCCESS`, checksums, a committer's `_temporary/` or `__magic/`
        footer = _parquet_footer(table, key, size)
        if footer.num_rows == 0:
            continue
        table.move(key, relative.as_posix())
        partition_values = {
            column: None if value == _HIVE_NULL else unquote(value)
            for column, value in (part.split("=", 1) for part in relative.parts[:-1])
        }
        actions.append(
            AddAction(
                path=relative.as_posix(),  # delta-rs URL-encodes it for the log
                size=size,
                partition_values=partition_values,
                modification_time=int(time.time() * 1000),
                data_change=True,
                stats=json.dumps(file_stats(footer)),
            )
        )
    return actions


def _hidden(part: str) -> bool:
    """Whether Spark's reader skips a path part: `.x`, or `_x` unless a partition's `_x=v`."""
    return part.startswith(".") or (part.startswith("_") and "=" not in part)


def _parquet_footer(table: Storage, key: str, size: int) -> pq.FileMetaData:
    """The footer of the Parquet file at `key` (its row count and bounds): two small range
    reads (the footer's length, then the footer), never the file."""
    tail = table.read_range(key, size - _FOOTER_TAIL, size) if size >= 12 else b""
    footer_length = int.from_bytes(tail[:4], "little")
    if tail[4:] != _PARQUET_MAGIC or footer_length > size - 12:
        msg = (
            f"{table.path_of(key)}: not a readable Parquet file ({size} bytes, no plain "
            "Parquet footer); the write that made it did not finish or wrote another format: "
            "run again"
        )
        raise SourceError(msg)
    footer = table.read_range(key, size - _FOOTER_TAIL - footer_length, size)
    return pq.read_metadata(pa.BufferReader(_PARQUET_MAGIC + footer))
