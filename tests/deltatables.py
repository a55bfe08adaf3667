"""Write real Delta tables (delta-rs) for tests: changelogs in a line or two.

Every helper makes exactly one Delta commit per commit it is given and
returns the table's version after it, so a test knows each row's
`_commit_version`. Rows are pyarrow tables or lists of dicts (naive datetimes
become TIMESTAMP_NTZ, Flink's TIMESTAMP(3)).

Example:
    >>> path = tmp_path / "rates"
    >>> eur, usd = {"currency": "EUR", "rate": 1.1}, {"currency": "USD", "rate": 1.0}
    >>> write_commits(path, [[eur], [usd]])                      # +I at versions 0 and 1
    1
    >>> update_rows(path, "currency = 'EUR'", {"rate": "1.2"})   # -U/+U at version 2
    2
    >>> delete_rows(path, "currency = 'USD'")                    # -D at version 3
    3
    >>> write_commits(path, one_commit_per_row(rows))            # fixes the interleaving
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import unquote
from uuid import uuid4

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable, write_deltalake
from deltalake.transaction import AddAction, RemoveAction

from chronolake.lake.deletion_vectors import vector_file
from chronolake.lake.log_reader import LOG, latest_version, read_commits
from chronolake.lake.storage import Storage
from chronolake.location import LocationLike

Rows = pa.Table | Sequence[Mapping[str, Any]]


def as_table(rows: Rows, schema: pa.Schema | None = None) -> pa.Table:
    """A pyarrow table from rows (a list of dicts) or a table, optionally cast to `schema`."""
    if isinstance(rows, pa.Table):
        return rows.cast(schema) if schema is not None else rows
    return pa.Table.from_pylist(list(rows), schema=schema)


def write_commits(
    path: LocationLike,
    commits: Sequence[Rows],
    *,
    cdf: bool = True,
    partition_by: Sequence[str] = (),
    schema: pa.Schema | None = None,
) -> int:
    """Append each entry of `commits` as one commit (the first creates the table, with the
    change data feed when `cdf`); returns the last version written."""
    for rows in commits:
        exists = DeltaTable.is_deltatable(str(path))
        write_deltalake(
            str(path),
            as_table(rows, schema),
            mode="append",
            partition_by=None if exists else list(partition_by) or None,
            configuration=None if exists or not cdf else {"delta.enableChangeDataFeed": "true"},
        )
    return DeltaTable(str(path)).version()


def one_commit_per_row(rows: Sequence[Mapping[str, Any]]) -> list[list[Mapping[str, Any]]]:
    """`rows` as single-row commits, for `write_commits`, when a test fixes arrival order."""
    return [[row] for row in rows]


def update_rows(path: LocationLike, predicate: str, updates: Mapping[str, str]) -> int:
    """One UPDATE commit: `updates` maps columns to SQL expressions, e.g. {"rate": "rate * 2"}."""
    DeltaTable(str(path)).update(updates=dict(updates), predicate=predicate)
    return DeltaTable(str(path)).version()


def delete_rows(path: LocationLike, predicate: str) -> int:
    """One DELETE commit of the rows matching the SQL `predicate`."""
    DeltaTable(str(path)).delete(predicate)
    return DeltaTable(str(path)).version()


def commit_files(
    path: LocationLike, files: Sequence[Rows], *, schema: pa.Schema | None = None
) -> int:
    """One append commit of several parquet files, logged in the order given (an unpartitioned
    table; created from the first file's schema when missing)."""
    tables = [as_table(rows, schema) for rows in files]
    if not DeltaTable.is_deltatable(str(path)):
        DeltaTable.create(str(path), schema=tables[0].schema)
    delta = DeltaTable(str(path))
    actions = [_add_file(path, table) for table in tables]
    delta.create_write_transaction(actions, mode="append", schema=delta.schema())
    return DeltaTable(str(path)).version()


def rewrite_files(path: LocationLike, rows: Rows) -> int:
    """One commit that removes every active file and adds one file of `rows`, without
    change data files: what a rewrite by a writer that does not produce them logs (the
    change data feed then reads the removed rows as -D and the added ones as +I)."""
    delta = DeltaTable(str(path))
    now = int(time.time() * 1000)
    removes = [
        RemoveAction(path=logged, data_change=True, deletion_timestamp=now)
        for logged in pa.table(delta.get_add_actions()).column("path").to_pylist()
    ]
    add = _add_file(path, as_table(rows, pa.schema(delta.schema().to_arrow())))
    delta.create_write_transaction([*removes, add], mode="append", schema=delta.schema())
    return DeltaTable(str(path)).version()


def _add_file(path: LocationLike, table: pa.Table) -> AddAction:
    name = f"part-{uuid4()}.parquet"
    pq.write_table(table, Path(str(path)) / name)
    return AddAction(
        path=name,
        size=(Path(str(path)) / name).stat().st_size,
        partition_values={},
        modification_time=int(time.time() * 1000),
        data_change=True,
        stats=json.dumps({"numRecords": table.num_rows}),
    )


def enable_cdf(path: LocationLike) -> int:
    """One commit turning the change data feed on (later commits get `_change_data` files)."""
    DeltaTable(str(path)).alter.set_table_properties({"delta.enableChangeDataFeed": "true"})
    return DeltaTable(str(path)).version()


def require_features(
    path: Path, protocol: dict[str, object], configuration: dict[str, str]
) -> None:
    """Commit one more version to the table at `path` that changes its protocol (and
    properties): what another engine that enables a table feature writes."""
    table = DeltaTable(str(path))
    metadata = table.metadata()
    entries = [
        {"commitInfo": {"timestamp": 1, "operation": "SET TBLPROPERTIES"}},
        {"protocol": protocol},
        {"metaData": {
            "id": metadata.id, "format": {"provider": "parquet", "options": {}},
            "schemaString": table.schema().to_json(), "partitionColumns": [],
            "configuration": {**metadata.configuration, **configuration},
            "createdTime": metadata.created_time,
        }},
    ]
    log = path / "_delta_log" / f"{table.version() + 1:020d}.json"
    log.write_text("".join(json.dumps(e) + "\n" for e in entries))


def table_rows(location: LocationLike) -> pa.Table:
    """The latest rows of the Delta table at `location`, by delta-rs's own engine, which
    honours deletion vectors (Delta's MERGE writes them under the delta-spark backend)."""
    rows = pa.RecordBatchReader.from_stream(DeltaTable(str(location)).scan()).read_all()
    # The scan gives string and binary views, which some pyarrow kernels (sort, take) lack.
    plain = {pa.string_view(): pa.string(), pa.binary_view(): pa.binary()}
    return rows.cast(pa.schema([f.with_type(plain.get(f.type, f.type)) for f in rows.schema]))


def unreferenced_files(location: LocationLike) -> list[str]:
    """The files of the Delta table at `location` that no commit of its log names (`add`,
    `remove`, `cdc`, deletion vector files): what a write left that no reader will ever see.
    The log, and hidden names (scratch, Hadoop's `.crc` checksums), are not the table's."""
    table = Storage(location)
    named: set[str] = set()
    for commit in read_commits(table, range((latest_version(table) or 0) + 1)).values():
        for action in commit.actions:
            named.add(unquote(action.path))
            if action.deletion_vector and (dv := vector_file(action.deletion_vector)):
                named.add(dv)
    return sorted(
        o.key for o in table.objects() if not o.key.startswith(f"{LOG}/")
        and not any(part.startswith(".") for part in PurePosixPath(o.key).parts)
        and o.key not in named
    )
