"""The one interface the rest of chronolake reads and writes Delta tables through.

Two backends implement it: `DeltaRsBackend` (the embedded default, no JVM
jars) and `DeltaSparkBackend` (Delta's own JVM classes). Both answer the log
questions (versions, commits) from the Delta log and read rows with Spark, so
the change data feed, appends and their arrival order come out the same from
either; what differs is how each one finds the log, the table's metadata and
its snapshot, and how it commits a write.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar, Literal

from pyroaring import BitMap, FrozenBitMap
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from chronolake.errors import SourceError, VersionGoneError
from chronolake.lake.changelog import (
    CHANGE_TYPE,
    COMMIT_TIMESTAMP,
    COMMIT_VERSION,
    POSITION,
    RESERVED_COLUMNS,
    ROW_KIND,
    RowKind,
)
from chronolake.lake.deletion_vectors import read_vector
from chronolake.lake.delta_log import (
    CDF_PROPERTY,
    ActionKind,
    FileAction,
    LogCommit,
)
from chronolake.lake.features import check_readable
from chronolake.lake.file_span import FileSpan
from chronolake.lake.files import (
    RowFilter,
    TaggedFile,
    file_name,
    file_uri,
    read_tagged_files,
)
from chronolake.lake.storage import Storage
from chronolake.lake.table_state import rebuildable
from chronolake.location import LocationLike, as_location

BackendKind = Literal["delta-rs", "delta-spark"]

# Delta's `_change_type` values and the Flink row kinds they become.
CHANGE_TYPE_ROW_KINDS: Mapping[str, RowKind] = {
    "insert": RowKind.INSERT,
    "update_preimage": RowKind.UPDATE_BEFORE,
    "update_postimage": RowKind.UPDATE_AFTER,
    "delete": RowKind.DELETE,
}


@dataclass(frozen=True, slots=True)
class CommitInfo:
    """One Delta commit as a reader sees it.

    `timestamp_ms` is the commit timestamp (ms since the epoch) that the
    change data feed reports as `_commit_timestamp`; `is_data_change` is false
    for commits that change no rows (OPTIMIZE, property changes).
    """

    version: int
    timestamp_ms: int
    operation: str
    is_data_change: bool


@dataclass(frozen=True, slots=True)
class TableMetadata:
    """The schema, partition columns and properties of a table at one version."""

    schema: StructType
    partition_columns: tuple[str, ...]
    configuration: Mapping[str, str]
    reader_features: frozenset[str] = frozenset()
    """The table features a reader must support (Delta protocol's `readerFeatures`)."""


class LakeBackend(ABC):
    """Reads Delta tables as snapshots and changelogs, and appends to them exactly once.

    Every read returns a Spark DataFrame; the driver only reads the Delta log
    (metadata-sized). Versions are inclusive on both ends; `end=None` means the
    latest version. Changelogs follow `chronolake.lake.changelog`.

    Example:
        >>> backend = backend_for(spark)
        >>> backend.changes("/lake/rates", 1, None).orderBy("_commit_version", "_position")
    """

    kind: ClassVar[BackendKind]
    stages_output_files: ClassVar[bool]
    """Whether Spark writes an output's files into a staging folder that the backend then
    moves into the table and commits (delta-rs), or Delta's writer writes them into the table
    and commits them itself (delta-spark): only the former passes the `in_staging` fault
    point."""

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark

    @abstractmethod
    def is_delta_table(self, path: LocationLike) -> bool:
        """Whether `path` holds a Delta table (a `_delta_log` with at least one commit)."""

    @abstractmethod
    def latest_version(self, path: LocationLike) -> int:
        """The table's newest version; `SourceError` when `path` is not a Delta table."""

    @abstractmethod
    def table_id(self, path: LocationLike) -> str:
        """The table's id (its metadata's `id`): a table created anew at the same path, whose
        versions count from 0 again, has another."""

    @abstractmethod
    def snapshot(
        self, path: LocationLike, version: int | None = None, *, span: FileSpan | None = None
    ) -> DataFrame:
        """The table's rows at `version` (latest when None), with its Delta schema; with a
        `span`, only the rows of the files that may hold rows in it (`FileSpan`)."""

    @abstractmethod
    def arrival_snapshot(
        self, path: LocationLike, version: int, *, span: FileSpan | None = None
    ) -> DataFrame:
        """The table's rows at `version`, as `snapshot`, plus `_position`: the order the rows
        arrived in (a later arrival has a greater position). Rows are ordered by the commit
        that added their file, then the file's place among that commit's adds
        (`_arrival_ranks`), then the row's place in the file: a key written in several
        commits has its latest write last, whatever order Spark reads the files in. A `span`
        skips files as `snapshot`'s does; the positions stay those of the whole table.
        """

    @abstractmethod
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
        """Append `df` in one commit tagged with the application transaction
        (`app_id`, `app_version`); return the new table version, or None when a
        commit with this `app_id` at `app_version` or later is already in the
        table (a retried run), in which case nothing is written.

        Creates the table (partitioned by `partition_by`, with the change data
        feed when `enable_cdf`) when `path` holds none; `commit_info` goes into
        the commit's `commitInfo`.
        """

    @abstractmethod
    def overwrite_dataframe(
        self,
        df: DataFrame,
        path: LocationLike,
        *,
        partition_by: Sequence[str] = (),
        enable_cdf: bool = False,
        commit_info: Mapping[str, str] | None = None,
    ) -> int:
        """Replace the table's rows and schema with `df` in one commit; return the new
        version. Creates the table (partitioned by `partition_by`, with the change data feed
        when `enable_cdf`) when `path` holds none; `commit_info` goes into the commit's
        `commitInfo`. For tables chronolake derives whole (views), never for changelog
        sources.
        """

    @abstractmethod
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
        """Apply a batch of changes (the table's columns plus `_row_kind` and arrival order)
        to the table keyed by `key`, in one commit with the change data feed on (see
        `chronolake.lake.upserts`) tagged with the application transaction; return the new
        version, or None when that transaction is already in the table. Creates the table
        when `path` holds none. `retracting` says whether the batch holds -U, +U or -D rows
        (the run's figures know it): a batch of inserts only is appended, rewriting nothing.
        A `span` that holds every stored row of the batch's keys limits the stored rows read
        to the files that may hold rows in it (a restatement's region).
        """

    def commit_infos(
        self, path: LocationLike, start: int, end: int
    ) -> dict[int, Mapping[str, object]]:
        """The `commitInfo` of commits `start..end` (inclusive), by version: one ranged read
        of the log (metadata-sized)."""
        return {commit.version: commit.info for commit in self._log_range(path, start, end)}

    def version_at(self, path: LocationLike, timestamp_ms: int) -> int | None:
        """The version current at `timestamp_ms`: the last one committed at or before it
        (Delta's `TIMESTAMP AS OF`); None before the first commit. Log cleanup removes the
        oldest commits: the answer is among those still logged, or `VersionGoneError` when
        it is among the removed ones. Metadata-sized: one read of the log's commits."""
        logged = self._read_log(path, range(self.latest_version(path) + 1))
        committed = [v for v in sorted(logged) if logged[v].timestamp_ms <= timestamp_ms]
        if committed:
            return committed[-1]
        if 0 in logged:
            return None
        msg = (
            f"{path}: versions 0..{min(logged) - 1} are no longer in the Delta log (removed by "
            "log cleanup), and the one current at that time is among them"
        )
        raise VersionGoneError(msg)

    def check_kept(self, path: LocationLike, version: int) -> None:
        """Refuse with `VersionGoneError` to read the table as of `version` when the log can
        no longer rebuild it (log cleanup) or a data file it holds is gone (VACUUM): checked
        up front, as a snapshot's files are only read when a Spark job runs. Metadata-sized:
        a listing of the log, the version's file list, a check per file (a listing per
        folder on an object store)."""
        if not rebuildable(Storage(path), version):
            msg = (
                f"{path}: version {version} can no longer be rebuilt from the Delta log (its "
                "entries, or the checkpoint before it, were removed by log cleanup)"
            )
            raise VersionGoneError(msg)
        gone = self._missing_files(self._active_files(path, version))
        if gone:
            msg = (
                f"{path}: {len(gone)} data file(s) of version {version} are missing (removed "
                f"by VACUUM), e.g. {min(gone)}"
            )
            raise VersionGoneError(msg)

    @abstractmethod
    def _active_files(self, path: LocationLike, version: int) -> list[str]:
        """The URIs of the data files the table holds at `version`, from the log alone."""

    @abstractmethod
    def _table_metadata(self, path: LocationLike, version: int) -> TableMetadata:
        """Schema (with column mapping's physical names in its fields' metadata), partition
        columns, properties and reader features at `version`."""

    @abstractmethod
    def _read_log(self, path: LocationLike, versions: range) -> dict[int, LogCommit]:
        """The parsed commits of `versions` still in the log (absent ones left out)."""

    @abstractmethod
    def _missing_files(self, uris: Sequence[str]) -> set[str]:
        """Which of `uris` no longer exist (vacuumed)."""

    def _table_uri(self, path: LocationLike) -> str:
        """The table root as Spark paths to its files start."""
        return as_location(path).text

    def _arrival_ranks(self, path: LocationLike, version: int, files: Sequence[str]) -> list[int]:
        """Each of the active `files` (paths or URIs, as logged or listed) ranked in arrival
        order: by the commit that added it, then its place among that commit's adds. A file
        whose `add` the log no longer holds (log cleanup) arrived before every logged one;
        those keep their order in `files`. Files are told apart by name, as Delta writers
        name them uniquely. Rows that OPTIMIZE rewrote take the OPTIMIZE commit's place.
        Metadata-sized: one read of the log's commits up to `version`."""
        added: dict[str, tuple[int, int]] = {}
        commits = self._read_log(path, range(version + 1))
        for commit_version in sorted(commits):
            adds = [a for a in commits[commit_version].actions if a.kind is ActionKind.ADD]
            for index, action in enumerate(adds):
                # the first add: a deletion vector re-adds a file under its path, rows unmoved
                added.setdefault(file_name(action.path), (commit_version, index))
        keys = [added.get(file_name(f), (-1, i)) for i, f in enumerate(files)]
        ranks = [0] * len(files)
        for rank, index in enumerate(sorted(range(len(files)), key=keys.__getitem__)):
            ranks[index] = rank
        return ranks

    def commits(self, path: LocationLike, start: int, end: int | None = None) -> list[CommitInfo]:
        """The commits `start..end` (inclusive), oldest first, read from the Delta log."""
        return [
            CommitInfo(c.version, c.timestamp_ms, c.operation, c.is_data_change)
            for c in self._log_range(path, start, end)
        ]

    def changes(
        self, path: LocationLike, start: int, end: int | None = None, *, require_cdf: bool = True
    ) -> DataFrame:
        """The change data feed of versions `start..end` (inclusive) as a changelog.

        Delta's semantics: a commit with `cdc` actions contributes the rows of
        its `_change_data` files (insert -> +I, update_preimage -> -U,
        update_postimage -> +U, delete -> -D); a commit without them
        contributes the rows of the files it removed as -D and the rows of the
        files it added as +I, and a file it re-adds with a new deletion vector
        (Delta's DELETE and UPDATE on such tables write no change data) the
        rows the new vector deletes as -D. Files that only move rows (OPTIMIZE) are
        skipped. Within a commit, retractions (-U, -D) come before additions
        (so a row a commit copies into a new file ends up present, and a -U
        precedes its +U), each in logged file order, then row order.

        Raises `SourceError` when the change data feed is off at any version
        in the range, or the range cannot be read (see `appends`). `require_cdf=False`
        reads versions without the feed the same way (a commit's removed files as -D, its
        added ones as +I): for a reader that nets the changes out, to which rows a
        copy-on-write rewrite removes and adds unchanged are no change (a restatement's
        rewrite check).
        """
        commits = self._log_range(path, start, end)
        metadata = self._changelog_metadata(path, commits[-1].version)
        if require_cdf:
            self._check_cdf(path, commits)
        entries: list[_Entry] = []
        for commit in commits:
            cdc = commit.files(ActionKind.CDC)
            if cdc:
                entries += [_Entry(commit, action, None) for action in cdc]
            else:
                entries += _file_changes(commit)
        return self._changelog(path, metadata, entries)

    def appends(self, path: LocationLike, start: int, end: int | None = None) -> DataFrame:
        """The rows added by versions `start..end` (inclusive) as `+I` rows of a changelog.

        For `'changelog' = 'append'` tables. Raises `SourceError` when a commit
        in the range removes rows (an update, delete or overwrite), when
        `start` is beyond the latest version, when the log no longer holds
        the versions (log cleanup) or their files are gone (VACUUM).
        """
        commits = self._log_range(path, start, end)
        metadata = self._changelog_metadata(path, commits[-1].version)
        entries: list[_Entry] = []
        for commit in commits:
            if commit.files(ActionKind.REMOVE):
                msg = (
                    f"{path}: version {commit.version} ({commit.operation}) removes rows from a "
                    "'changelog' = 'append' table, which must only receive inserts; declare the "
                    "table with 'changelog' = 'cdf' (and the change data feed enabled) to read "
                    "its updates and deletes (tables rewritten by OVERWRITE are not supported yet)"
                )
                raise SourceError(msg)
            entries += [_Entry(commit, a, "insert") for a in commit.files(ActionKind.ADD)]
        return self._changelog(path, metadata, entries)

    def _changelog(
        self, path: LocationLike, metadata: TableMetadata, entries: list[_Entry]
    ) -> DataFrame:
        orders: dict[int, int] = {}
        tagged: list[TaggedFile] = []
        storage = Storage(path)
        for entry in entries:
            commit, action = entry.commit, entry.action
            order = orders[commit.version] = orders.get(commit.version, -1) + 1
            tagged.append(
                TaggedFile(
                    uri=file_uri(self._table_uri(path), action.path),
                    version=commit.version,
                    order=order,
                    timestamp_ms=commit.timestamp_ms,
                    change_type=entry.change_type,
                    partition_values=action.partition_values,
                    row_filter=entry.row_filter(storage),
                )
            )
        self._check_files_exist(path, tagged)
        rows = read_tagged_files(
            self.spark,
            tagged,
            schema=metadata.schema,
            partition_columns=metadata.partition_columns,
            table=str(path),
        )
        kinds = F.create_map(*(F.lit(v) for pair in CHANGE_TYPE_ROW_KINDS.items() for v in pair))
        return rows.select(
            *(F.col(f"`{name}`") for name in metadata.schema.fieldNames()),
            kinds[F.col(CHANGE_TYPE)].alias(ROW_KIND),
            COMMIT_VERSION,
            COMMIT_TIMESTAMP,
            POSITION,
        )

    def _require_table(self, path: LocationLike) -> None:
        if not self.is_delta_table(path):
            raise not_a_delta_table(path)

    def _log_range(self, path: LocationLike, start: int, end: int | None) -> list[LogCommit]:
        """The commits `start..end`, after checking the range exists and is still logged."""
        latest = self.latest_version(path)
        end = latest if end is None else end
        if start > latest:
            msg = (
                f"{path}: start version {start} is beyond the latest version {latest}; expected "
                f"a start version in 0..{latest}; read from at most {latest}, or wait until the "
                "table has new commits"
            )
            raise SourceError(msg)
        if not 0 <= start <= end <= latest:
            msg = (
                f"{path}: version range {start}..{end} is not within the table's versions "
                f"0..{latest}; expected 0 <= start <= end <= {latest}"
            )
            raise SourceError(msg)
        versions = range(start, end + 1)
        commits = self._read_log(path, versions)
        gone = version_spans([v for v in versions if v not in commits])
        if gone:
            msg = (
                f"{path}: version(s) {gone} are no longer in the Delta log (removed by "
                "log cleanup), so their changes cannot be read; run a full refresh from the "
                f"snapshot at version {latest}, and keep delta.logRetentionDuration longer "
                "than the time between runs"
            )
            raise VersionGoneError(msg)
        return [commits[v] for v in versions]

    def _readable_metadata(self, path: LocationLike, version: int) -> TableMetadata:
        """`_table_metadata`, after refusing by name a version chronolake cannot read."""
        metadata = self._table_metadata(path, version)
        check_readable(path, version, metadata.reader_features, metadata.configuration)
        return metadata

    def _changelog_metadata(self, path: LocationLike, version: int) -> TableMetadata:
        """`_readable_metadata`, after refusing columns named as a changelog's own."""
        metadata = self._readable_metadata(path, version)
        reserved = [f.name for f in metadata.schema.fields if f.name.lower() in RESERVED_COLUMNS]
        if reserved:
            msg = (
                f"{path}: version {version} has the column(s) {', '.join(map(repr, reserved))}, "
                "whose names chronolake's changelogs use for themselves "
                f"({', '.join(RESERVED_COLUMNS)}), as Delta's change data feed reserves its own; "
                "nothing was read; rename them (ALTER TABLE ... RENAME COLUMN, with column "
                "mapping by name) or write the table anew under other names"
            )
            raise SourceError(msg)
        return metadata

    def _check_cdf(self, path: LocationLike, commits: list[LogCommit]) -> None:
        configuration = self._table_metadata(path, commits[0].version).configuration
        for commit in commits:
            configuration = commit.configuration or configuration
            if configuration.get(CDF_PROPERTY, "false").lower() != "true":
                msg = (
                    f"{path}: the change data feed is not enabled at version {commit.version} "
                    f"(table property {CDF_PROPERTY} is not true), and a 'changelog' = 'cdf' "
                    "table is read from it; enable it with ALTER TABLE ... SET TBLPROPERTIES "
                    f"({CDF_PROPERTY} = true) or deltalake's DeltaTable(path).alter."
                    f"set_table_properties({{'{CDF_PROPERTY}': 'true'}}); the feed only covers "
                    "versions committed after that, so start after the enabling version or run "
                    "a full refresh"
                )
                raise SourceError(msg)

    def _check_files_exist(self, path: LocationLike, files: list[TaggedFile]) -> None:
        missing = self._missing_files(list(dict.fromkeys(f.uri for f in files)))
        if missing:
            versions = version_spans(sorted({f.version for f in files if f.uri in missing}))
            msg = (
                f"{path}: data files of version(s) {versions} are missing (removed by "
                "VACUUM), so these versions cannot be read; run a full refresh from the latest "
                "snapshot, and keep delta.deletedFileRetentionDuration longer than the time "
                "between runs"
            )
            raise VersionGoneError(msg)


@dataclass(frozen=True, slots=True)
class _Entry:
    """A logged file whose rows a changelog reads, with their change type (None: a change
    data file's rows carry theirs); `previous`, for a file re-added with a new deletion
    vector, is the entry it replaces: only the rows newly deleted are read."""

    commit: LogCommit
    action: FileAction
    change_type: str | None
    previous: FileAction | None = None

    def row_filter(self, table: Storage) -> RowFilter | None:
        """Which rows of the file this entry stands for (None: all of them)."""
        vector = self.action.deletion_vector
        rows = read_vector(table, vector) if vector else BitMap()
        if self.previous is not None:
            before = self.previous.deletion_vector
            return RowFilter(FrozenBitMap(rows - (read_vector(table, before) if before
                                                  else BitMap())), only=True)
        return RowFilter(FrozenBitMap(rows), only=False) if vector else None


def _file_changes(commit: LogCommit) -> list[_Entry]:
    """A commit without change data files: its removed files' rows are deleted, its added
    files' rows inserted, and a file it removes and re-adds under the same path (a new
    deletion vector) contributes the rows the new vector deletes."""
    removed = {a.path: a for a in commit.files(ActionKind.REMOVE)}
    added = commit.files(ActionKind.ADD)
    readded = {a.path for a in added} & set(removed)
    return [
        *(_Entry(commit, a, "delete") for a in removed.values() if a.path not in readded),
        *(_Entry(commit, a, "delete", removed[a.path]) for a in added if a.path in readded),
        *(_Entry(commit, a, "insert") for a in added if a.path not in readded),
    ]


def not_a_delta_table(path: LocationLike) -> SourceError:
    """The error for a table location without a Delta log."""
    msg = (
        f"{path}: not a Delta table (no _delta_log folder with commits); expected the "
        "location of a Delta table; fix the table's 'path' option (relative paths are "
        "resolved against the lake root) or create the table first"
    )
    return SourceError(msg)


def version_spans(versions: Sequence[int]) -> str:
    """`[1, 2, 3, 7]` -> `'1..3, 7'`: version lists stay short in messages."""
    spans: list[list[int]] = []
    for v in versions:
        if spans and v == spans[-1][1] + 1:
            spans[-1][1] = v
        else:
            spans.append([v, v])
    return ", ".join(str(a) if a == b else f"{a}..{b}" for a, b in spans)
