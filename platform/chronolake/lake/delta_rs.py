"""The embedded backend: delta-rs (PyPI `deltalake`) for the log and commits, Spark for rows.

It needs no JVM jars, which is why it is the default: delta-spark's jars come
from Maven, which an offline machine cannot reach. Tables live on the local
file system or on an object store: everything it reads or writes itself goes through
`chronolake.lake.storage`, and Spark reaches the same location by its own configuration.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from deltalake import CommitProperties, DeltaTable, Schema
from deltalake.exceptions import DeltaError
from deltalake.transaction import AddAction
from pyroaring import BitMap
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from chronolake.errors import SourceError, VersionGoneError
from chronolake.lake._commit import CommitConflict, DataFile, write_commit
from chronolake.lake.appends import commit_appended, is_committed, open_or_create
from chronolake.lake.backend import LakeBackend, TableMetadata
from chronolake.lake.changelog import POSITION, SYSTEM_COLUMNS
from chronolake.lake.deletion_vectors import FEATURE, deleted_rows, enabling_actions, write_vectors
from chronolake.lake.delta_log import (
    ActionKind,
    LogCommit,
)
from chronolake.lake.features import check_readable, check_removable, check_writable
from chronolake.lake.file_span import FileSpan
from chronolake.lake.files import (
    DELETED_FILE,
    DELETED_ROW,
    TaggedFile,
    file_uri,
    read_tagged_files,
    without_deleted,
)
from chronolake.lake.in_place import writing_in_place
from chronolake.lake.log_reader import log_names, read_commits
from chronolake.lake.staging import write_staged
from chronolake.lake.storage import Storage, missing
from chronolake.lake.table_state import latest_state
from chronolake.lake.upserts import (
    FILE_NAME,
    ROW_INDEX,
    Upsert,
    additions,
    apply_changes,
    final_rows,
)
from chronolake.location import Location, LocationLike
from chronolake.spark.session import session_settings, without_constraint_propagation

_TIMESTAMP_TYPE = "spark.sql.parquet.outputTimestampType"


class DeltaRsBackend(LakeBackend):
    """Delta tables through delta-rs; rows always read and written by Spark.

    Example:
        >>> backend = DeltaRsBackend(spark)
        >>> backend.append_dataframe(df, "/lake/out", app_id="enrich", app_version=7)
    """

    kind = "delta-rs"
    stages_output_files = True

    def is_delta_table(self, path: LocationLike) -> bool:
        return DeltaTable.is_deltatable(str(path))

    def latest_version(self, path: LocationLike) -> int:
        return self._open(path, with_files=False).version()

    def table_id(self, path: LocationLike) -> str:
        return str(self._open(path, with_files=False).metadata().id)

    def snapshot(
        self, path: LocationLike, version: int | None = None, *, span: FileSpan | None = None
    ) -> DataFrame:
        rows, schema = self._tagged_snapshot(path, version, in_arrival_order=False, span=span)
        return rows.select(*(f"`{name}`" for name in schema.fieldNames()))

    def arrival_snapshot(
        self, path: LocationLike, version: int, *, span: FileSpan | None = None
    ) -> DataFrame:
        rows, schema = self._tagged_snapshot(path, version, in_arrival_order=True, span=span)
        return rows.select(*(f"`{name}`" for name in schema.fieldNames()), POSITION)

    def _tagged_snapshot(
        self, path: LocationLike, version: int | None, *, in_arrival_order: bool,
        span: FileSpan | None,
    ) -> tuple[DataFrame, StructType]:
        """The active files' rows, tagged (`read_tagged_files`); their `_position` follows
        the files' arrival order when `in_arrival_order`, else it is meaningless. A `span`
        leaves out the files whose logged min and max lie outside it."""
        table = self._open(path, version)
        metadata = self._readable_metadata(path, table.version())
        # The active files and their partition values: metadata-sized, read on the driver.
        actions = pa.table(table.get_add_actions(flatten=False))
        logged = actions["path"].to_pylist()
        partitions = (
            actions["partition"].to_pylist()
            if "partition" in actions.column_names
            else [{}] * len(actions)
        )
        orders = (
            self._arrival_ranks(path, table.version(), logged)
            if in_arrival_order else [0] * len(logged)
        )
        files = [
            TaggedFile(
                uri=file_uri(self._table_uri(path), logged_path),
                version=table.version(),
                order=order,
                timestamp_ms=0,
                change_type="insert",
                partition_values={k: None if v is None else str(v) for k, v in values.items()},
            )
            for logged_path, values, order in zip(logged, partitions, orders, strict=True)
        ]
        if span is not None:
            files = [file for file, kept in zip(files, span.overlapping(actions), strict=True)
                     if kept]
        self._check_files_exist(path, files)
        rows = read_tagged_files(
            self.spark,
            files,
            schema=metadata.schema,
            partition_columns=metadata.partition_columns,
            table=str(path),
            deleted=self._deleted(table),
        )
        return rows, metadata.schema

    def append_dataframe(
        self,
        df: DataFrame,
        path: LocationLike,
        *,
        app_id: str,
        app_version: int,
        partition_by: Sequence[str] = (),
        enable_cdf: bool = False,
        commit_info: Mapping[str, str] | None = None,
    ) -> int | None:
        """Spark writes the parquet files into the table folder; delta-rs commits them
        together with the transaction (`app_id`, `app_version`).

        The check for an earlier commit of the same transaction happens before
        writing and again when the commit conflicts, so a retried run that
        races its first attempt still commits at most once.
        """
        files = Storage(path)
        table = _create_if_missing(df, files, partition_by, enable_cdf=enable_cdf)
        if is_committed(table, app_id, app_version):
            return None
        _check_columns(df, table, files.location)
        with writing_in_place(files):
            actions = _write_files(df, files, list(table.metadata().partition_columns))
            return commit_appended(
                table, files.location, actions, app_id=app_id, app_version=app_version,
                commit_info=commit_info,
            )

    def overwrite_dataframe(
        self,
        df: DataFrame,
        path: LocationLike,
        *,
        partition_by: Sequence[str] = (),
        enable_cdf: bool = False,
        commit_info: Mapping[str, str] | None = None,
    ) -> int:
        """Spark writes the files; delta-rs commits them with `mode="overwrite"`, which
        removes every file the table had and takes `df`'s schema."""
        files = Storage(path)
        table = _create_if_missing(df, files, partition_by, enable_cdf=enable_cdf)
        partition_columns = list(table.metadata().partition_columns)
        check_removable(files.location, table.version(), table.metadata().configuration,
                        "replacing its rows")
        with writing_in_place(files):
            table.create_write_transaction(
                # a list of its own: delta-rs takes `list[AddAction | RemoveAction]` (invariant)
                [*_write_files(df, files, partition_columns)],
                mode="overwrite",
                schema=Schema.from_json(df.schema.json()),
                partition_by=partition_columns or None,
                commit_properties=CommitProperties(custom_metadata=dict(commit_info or {})),
            )
        table.update_incremental()
        return table.version()

    def commit_changes(
        self,
        changes: DataFrame,
        path: LocationLike,
        *,
        key: Sequence[str],
        retracting: bool,
        app_id: str,
        app_version: int,
        commit_info: Mapping[str, str] | None = None,
        span: FileSpan | None = None,
    ) -> int | None:
        """Copy-on-write or deletion vectors, per data file (`chronolake.lake.upserts`):
        Spark writes the new rows and the change data files; the commit (remove, add with
        deletion vectors, cdc and txn actions) is written by `_commit`, since delta-rs's
        Python API has neither cdc actions nor deletion vectors. A batch without retractions
        is appended."""
        storage = Storage(path)
        columns = [c for c in changes.columns if c not in SYSTEM_COLUMNS]
        table = _create_if_missing(changes.select(*columns), storage, (), enable_cdf=True)
        if is_committed(table, app_id, app_version):
            return None
        files = _active_files(table, span) if retracting else {}
        if not files:  # nothing to rewrite: an append of what the batch leaves
            rows = final_rows(changes, key) if retracting else additions(changes)
            return self.append_dataframe(
                rows, path, app_id=app_id, app_version=app_version, commit_info=commit_info
            )
        deleted = deleted_rows(table)
        stored = self._stored_rows(table, storage, files, deleted)
        gone = Counter(deleted[DELETED_FILE].to_pylist())
        live = {name: rows - gone[name] for name, (_, rows) in files.items()}
        with without_constraint_propagation(self.spark), writing_in_place(storage):
            upsert = apply_changes(changes, stored, key, live)
            return self._rewrite(table, storage, upsert, files, deleted, app_id, app_version,
                                 commit_info)

    def _rewrite(
        self, table: DeltaTable, root: Storage, upsert: Upsert,
        files: Mapping[str, tuple[int, int]],
        deleted: pa.Table, app_id: str, app_version: int, commit_info: Mapping[str, str] | None,
    ) -> int | None:
        """Write the upsert's files and deletion vectors and commit them: the files it
        rewrites are replaced, those it marks are re-added with their new deletion vectors."""
        if upsert.rewritten_files or upsert.deleted_rows:
            check_removable(root.location, table.version(), table.metadata().configuration,
                            "applying this run's updates and deletes")
        adds = [_data_file(a) for a in _write_files(upsert.rows, root, [])]
        change_data = _write_change_data(upsert.change_data, root)
        marked = sorted(upsert.deleted_rows)
        current = self._current_vectors(root.location, table, [*upsert.rewritten_files, *marked])
        before = _rows_by_file(deleted, marked)
        vectors = write_vectors(root, {
            name: before.get(name, BitMap()) | BitMap(upsert.deleted_rows[name])
            for name in marked
        })
        written = [*adds, *change_data]
        try:
            return write_commit(
                root, table.version() + 1,
                adds=[*adds, *(DataFile(name, *files[name], vectors[name].action())
                               for name in marked)],
                removes=[DataFile(name, *files[name], current[name])
                         for name in (*upsert.rewritten_files, *marked)],
                change_data=change_data,
                app_id=app_id, app_version=app_version, info=dict(commit_info or {}),
                operation="MERGE",
                table_actions=enabling_actions(table) if marked else (),
            )
        except CommitConflict:
            table.update_incremental()
            for name in {*(file.path for file in written),
                         *(v.file_name for v in vectors.values())}:
                root.delete(name)
            if is_committed(table, app_id, app_version):
                return None
            msg = (
                f"{root.location}: another writer committed version {table.version()} while "
                "this run applied its changes; nothing of this run was committed: run it again"
            )
            raise SourceError(msg) from None

    def _stored_rows(
        self, table: DeltaTable, root: Storage, files: Iterable[str], deleted: pa.Table
    ) -> DataFrame:
        """The rows of the table's active `files`, each with its data file's name and its index
        there; the rows `deleted` (by deletion vectors) are left out."""
        schema = StructType.fromJson(json.loads(table.schema().to_json()))
        scan = self.spark.read.schema(schema).parquet(
            *(file_uri(str(root.location), p) for p in files)
        )
        rows = scan.select(
            "*",
            F.col("_metadata.file_name").alias(FILE_NAME),
            F.col("_metadata.row_index").alias(ROW_INDEX),
        )
        if not deleted.num_rows:
            return rows
        return without_deleted(rows, self.spark.createDataFrame(deleted), file_column=FILE_NAME,
                               row_column=ROW_INDEX)

    def _deleted(self, table: DeltaTable) -> DataFrame | None:
        """The rows the table's deletion vectors delete, for Spark (None: there are none); as
        many as the deletes, read from the log's deletion vectors on the driver."""
        deleted = deleted_rows(table)
        return self.spark.createDataFrame(deleted) if deleted.num_rows else None

    def _current_vectors(
        self, root: Location, table: DeltaTable, names: Sequence[str]
    ) -> dict[str, Mapping[str, object] | None]:
        """The deletion vector descriptor each active data file is logged with (a `remove`
        must name it): from the newest commits back to the file's latest `add`, else from the
        last checkpoint. Metadata-sized."""
        found: dict[str, Mapping[str, object] | None] = {}
        if FEATURE not in (table.protocol().reader_features or []):
            return dict.fromkeys(names)
        wanted, log = set(names), Storage(root)
        listed = log_names(log)
        for version in range(table.version(), -1, -1):
            commit = read_commits(log, range(version, version + 1), listed).get(version)
            if commit is None:  # cleaned up: the checkpoint has the rest
                found |= _checkpointed_vectors(log, wanted - set(found))
                break
            for action in reversed(commit.actions):
                name = unquote(action.path).rsplit("/", 1)[-1]
                if action.kind is ActionKind.ADD and name in wanted and name not in found:
                    found[name] = action.deletion_vector
            if set(found) >= wanted:
                break
        return {name: found.get(name) for name in names}

    def _open(
        self, path: LocationLike, version: int | None = None, *, with_files: bool = True
    ) -> DeltaTable:
        """The table at `version`; `with_files=False` skips loading its file list."""
        self._require_table(path)
        try:
            table = DeltaTable(str(path), without_files=not with_files)
        except DeltaError:
            # delta-rs refuses features it lacks in its own words: name them as chronolake does
            state = latest_state(Storage(path))
            check_readable(path, state.version, state.reader_features, state.configuration)
            raise
        latest = table.version()
        if version is None or version == latest:
            return table
        if not 0 <= version <= latest:
            msg = (
                f"{path}: version {version} does not exist; expected a version in 0..{latest}; "
                "read one of those, or None for the latest"
            )
            raise SourceError(msg)
        try:
            table.load_as_version(version)
        except DeltaError as error:
            msg = (
                f"{path}: version {version} can no longer be loaded (its log entries were "
                f"removed by log cleanup): {error}; read a later version, or run a full refresh "
                f"from version {latest}"
            )
            raise VersionGoneError(msg) from None
        return table

    def _active_files(self, path: LocationLike, version: int) -> list[str]:
        logged = pa.table(self._open(path, version).get_add_actions(flatten=False))["path"]
        return [file_uri(self._table_uri(path), p) for p in logged.to_pylist()]

    def _table_metadata(self, path: LocationLike, version: int) -> TableMetadata:
        table = self._open(path, version, with_files=False)
        metadata = table.metadata()
        return TableMetadata(
            schema=StructType.fromJson(json.loads(table.schema().to_json())),
            partition_columns=tuple(metadata.partition_columns),
            configuration=dict(metadata.configuration),
            reader_features=frozenset(table.protocol().reader_features or ()),
        )

    def _read_log(self, path: LocationLike, versions: range) -> dict[int, LogCommit]:
        return read_commits(Storage(path), versions)

    def _missing_files(self, uris: Sequence[str]) -> set[str]:
        return missing(uris)


def _create_if_missing(
    df: DataFrame, root: Storage, partition_by: Sequence[str], *, enable_cdf: bool
) -> DeltaTable:
    try:
        table = open_or_create(
            root.location, Schema.from_json(df.schema.json()), partition_by,
            enable_cdf=enable_cdf,
        )
    except DeltaError:
        # delta-rs refuses features it lacks in its own words: name them as chronolake does
        state = latest_state(root)
        check_writable(root.location, state.version, state.reader_features | state.writer_features)
        raise
    protocol = table.protocol()
    check_writable(root.location, table.version(),
                   [*(protocol.reader_features or []), *(protocol.writer_features or [])])
    return table


def _write_files(df: DataFrame, root: Storage, partition_columns: list[str]) -> list[AddAction]:
    """Spark writes `df` as Parquet into the table through a staging folder (`write_staged`),
    timestamps as INT64 microseconds, whose footers hold bounds (not INT96, Spark's default,
    which has none), as Delta's own writer does."""
    with session_settings(df.sparkSession, {_TIMESTAMP_TYPE: "TIMESTAMP_MICROS"}):
        return write_staged(root, df.write.partitionBy(*partition_columns).parquet)


def _data_file(added: AddAction) -> DataFile:
    """A written file as its commit logs it, with the bounds its footer gave."""
    stats = json.loads(added.stats or "{}")
    rows = stats.pop("numRecords")
    return DataFile(added.path, added.size, rows, bounds=stats)


def _write_change_data(rows: DataFrame, root: Storage) -> list[DataFile]:
    """Spark writes the change rows (with `_change_type`) under `_change_data/`."""
    folder = Storage(root.path_of("_change_data"))
    return [replace(_data_file(a), path=f"_change_data/{a.path}")
            for a in _write_files(rows, folder, [])]


def _active_files(table: DeltaTable, span: FileSpan | None) -> dict[str, tuple[int, int]]:
    """(size in bytes, physical rows) of each active data file that may hold rows in `span`
    (every one without it): metadata-sized."""
    actions = pa.table(table.get_add_actions(flatten=False))
    kept = span.overlapping(actions) if span is not None else [True] * actions.num_rows
    return {
        path: (size, rows or 0) for path, size, rows, keep in zip(
            *(actions[c].to_pylist() for c in ("path", "size_bytes", "num_records")), kept,
            strict=True,
        ) if keep
    }


def _rows_by_file(deleted: pa.Table, names: Sequence[str]) -> dict[str, BitMap]:
    """The row indexes deletion vectors already delete in each of `names`."""
    wanted = deleted.filter(pc.is_in(deleted[DELETED_FILE], pa.array(list(names), pa.string())))
    grouped = wanted.group_by(DELETED_FILE).aggregate([(DELETED_ROW, "list")])
    return {
        name: BitMap(rows) for name, rows in zip(
            grouped[DELETED_FILE].to_pylist(), grouped[f"{DELETED_ROW}_list"].to_pylist(),
            strict=True,
        )
    }


def _checkpointed_vectors(
    root: Storage, names: set[str]
) -> dict[str, Mapping[str, object] | None]:
    """The deletion vector descriptors the last checkpoint logs for `names`' `add` actions."""
    pointer = root.read_text("_delta_log/_last_checkpoint")
    if not names or pointer is None:
        return {}
    version = json.loads(pointer)["version"]
    parts = [name for name in root.names("_delta_log")
             if name.startswith(f"{version:020d}.checkpoint") and name.endswith(".parquet")]
    found: dict[str, Mapping[str, object] | None] = {}
    for part in sorted(parts):
        data = pa.BufferReader(root.read_bytes(f"_delta_log/{part}") or b"")
        for add in pq.read_table(data, columns=["add"])["add"].to_pylist():
            name = unquote(add["path"]).rsplit("/", 1)[-1] if add else None
            if name in names:
                found[name] = add.get("deletionVector")
    return found


def _check_columns(df: DataFrame, table: DeltaTable, root: Location) -> None:
    expected = [field.name for field in table.schema().fields]
    if sorted(df.columns) != sorted(expected):
        msg = (
            f"{root}: cannot append columns {df.columns} to a table with columns {expected}; "
            "expected the same column names; select the table's columns before appending"
        )
        raise SourceError(msg)
