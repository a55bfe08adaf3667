"""The JVM backend: Delta Lake's own Spark classes (delta-spark), for sessions that have them.

Used where `io.delta.sql.DeltaSparkSessionExtension` runs in the session: a cluster,
Databricks, or a session chronolake started with `CHRONOLAKE_BACKEND=delta-spark`
(`chronolake.spark.stack` loads the pinned jars). Snapshots and writes go through Delta's data
source and Delta's SQL (`MERGE INTO`, `DESCRIBE HISTORY`), never through the JVM gateway, so
the backend works through Spark Connect too; the log is read by the one log reader
(`chronolake.lake.log_reader`), so changelogs come out exactly as with delta-rs.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType

from chronolake.errors import SourceError
from chronolake.lake.backend import LakeBackend, TableMetadata
from chronolake.lake.changelog import POSITION
from chronolake.lake.deletion_vectors import ENABLE_PROPERTY
from chronolake.lake.delta_log import CDF_PROPERTY, LogCommit
from chronolake.lake.file_span import FileSpan
from chronolake.lake.files import POSITION_STRIDE, file_name
from chronolake.lake.in_place import writing_in_place
from chronolake.lake.log_reader import latest_version, read_commits
from chronolake.lake.storage import Storage, missing
from chronolake.lake.table_state import table_state
from chronolake.lake.upserts import RETRACTED, last_changes
from chronolake.location import LocationLike, as_location
from chronolake.spark.session import join_local, session_settings
from chronolake.spark.stack import DELTA_EXTENSION

_FILE, _ROW, _RANK = "__chronolake_file", "__chronolake_row", "__chronolake_rank"


def delta_spark_available(spark: SparkSession) -> bool:
    """Whether the session runs Delta's extension: its settings name it and, in a classic
    session, its class loads in the JVM (a Connect server that names it has loaded it)."""
    if DELTA_EXTENSION not in (spark.conf.get("spark.sql.extensions", "") or ""):
        return False
    jvm = getattr(spark, "_jvm", None)
    if jvm is None:  # Spark Connect: the server started with the extension
        return True
    try:
        jvm.java.lang.Thread.currentThread().getContextClassLoader().loadClass(DELTA_EXTENSION)
    except Exception:  # py4j surfaces ClassNotFoundException as a generic error
        return False
    return True


class DeltaSparkBackend(LakeBackend):
    """Delta tables through delta-spark's data source and `DeltaTable` API.

    Example:
        >>> spark = (SparkSession.builder
        ...     .config("spark.jars.packages", "io.delta:delta-spark_4.2_2.13:4.4.0")
        ...     .config("spark.sql.extensions", DELTA_EXTENSION)
        ...     .config("spark.sql.catalog.spark_catalog",
        ...             "org.apache.spark.sql.delta.catalog.DeltaCatalog")
        ...     .getOrCreate())
        >>> DeltaSparkBackend(spark).snapshot("s3a://lake/rates", 3)
    """

    kind = "delta-spark"
    stages_output_files = False

    def __init__(self, spark: SparkSession) -> None:
        if not delta_spark_available(spark):
            msg = (
                f"the delta-spark backend needs {DELTA_EXTENSION} on the Spark classpath and in "
                "spark.sql.extensions, and this session has neither; let chronolake start the "
                "session with CHRONOLAKE_BACKEND=delta-spark (it loads Delta's pinned jars), "
                "or start Spark with --packages io.delta:delta-spark_4.2_2.13:4.4.0 and "
                f"spark.sql.extensions={DELTA_EXTENSION}, or use the 'delta-rs' backend "
                "(no JVM jars needed)"
            )
            raise SourceError(msg)
        super().__init__(spark)

    def is_delta_table(self, path: LocationLike) -> bool:
        # A commit or a checkpoint in the log: what Delta's own check looks for.
        return any(name.endswith((".json", ".parquet"))
                   for name in Storage(path).names("_delta_log"))

    def latest_version(self, path: LocationLike) -> int:
        self._require_table(path)
        return latest_version(Storage(path)) or 0

    def table_id(self, path: LocationLike) -> str:
        self._require_table(path)
        row = self.spark.sql(f"DESCRIBE DETAIL {_sql_table(path)}").first()
        assert row is not None, "DESCRIBE DETAIL has one row"
        return str(row["id"])

    def snapshot(
        self, path: LocationLike, version: int | None = None, *, span: FileSpan | None = None
    ) -> DataFrame:
        """Delta's own read; a `span`'s filter lets Delta's data skipping leave out files."""
        self._require_table(path)
        reader = self.spark.read.format("delta")
        if version is not None:
            reader = reader.option("versionAsOf", version)
        rows = reader.load(str(path))
        condition = None if span is None else span.predicate(rows.schema)
        return rows if condition is None else rows.where(condition)

    def arrival_snapshot(
        self, path: LocationLike, version: int, *, span: FileSpan | None = None
    ) -> DataFrame:
        whole = self.snapshot(path, version)
        files = whole.inputFiles()  # the snapshot's active files: metadata-sized
        ranks = self._arrival_ranks(path, version, files)
        schema = StructType([
            StructField(_FILE, StringType(), False), StructField(_RANK, LongType(), False),
        ])
        names = [(file_name(uri), rank) for uri, rank in zip(files, ranks, strict=True)]
        snapshot = whole if span is None else self.snapshot(path, version, span=span)
        source = snapshot
        if "row_index" not in snapshot.select("_metadata.*").columns:
            # Delta shows a row's index in its file only for tables with deletion vectors or
            # row tracking; without either, every row of the active files is live, and Spark's
            # Parquet reader gives the index (of the files the span keeps: Delta's skipping).
            source = (self.spark.read.schema(snapshot.schema).option("basePath", str(path))
                      .parquet(*snapshot.inputFiles()))
        rows = source.select(
            "*",
            F.col("_metadata.file_name").alias(_FILE),
            F.col("_metadata.row_index").alias(_ROW),
        )
        ranked = join_local(rows, schema, names, [_FILE])
        position = F.col(_RANK) * F.lit(POSITION_STRIDE) + F.col(_ROW)
        return ranked.select(*(f"`{n}`" for n in snapshot.columns), position.alias(POSITION))

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
        """Delta's idempotent write (`txnAppId`/`txnVersion`): Delta itself skips a
        transaction it has seen; the commit that records this attempt's transaction says the
        write committed (`_committed_version`)."""
        self._create_if_missing(df.schema, path, partition_by, enable_cdf=enable_cdf)
        before = self.latest_version(path)
        with _writing(path):
            (
                df.write.format("delta")
                .mode("append")
                .option("txnAppId", app_id)
                .option("txnVersion", app_version)
                .option("userMetadata", json.dumps(dict(commit_info or {})))
                .save(str(path))
            )
        return self._committed_version(path, before, app_id, app_version)

    def overwrite_dataframe(
        self,
        df: DataFrame,
        path: LocationLike,
        *,
        partition_by: Sequence[str] = (),
        enable_cdf: bool = False,
        commit_info: Mapping[str, str] | None = None,
    ) -> int:
        self._create_if_missing(df.schema, path, partition_by, enable_cdf=enable_cdf)
        writer = df.write.format("delta").mode("overwrite").option("overwriteSchema", "true")
        writer = writer.option("userMetadata", json.dumps(dict(commit_info or {})))
        with _writing(path):
            writer.partitionBy(*partition_by).save(str(path))
        return self.latest_version(path)

    def _committed_version(
        self, path: LocationLike, before: int, app_id: str, app_version: int
    ) -> int | None:
        """The version of the commit after `before` that records the application transaction
        (`app_id`, `app_version`): this attempt's token. None when no commit does, as when
        Delta skipped a transaction it had seen, whatever else moved the table meanwhile."""
        after = self.latest_version(path)
        commits = read_commits(Storage(path), range(before + 1, after + 1))
        return next((version for version, commit in sorted(commits.items())
                     if commit.transactions.get(app_id) == app_version), None)

    def _create_if_missing(
        self, schema: StructType, path: LocationLike, partition_by: Sequence[str], *,
        enable_cdf: bool, deletion_vectors: bool = False,
    ) -> None:
        if self.is_delta_table(path):
            return
        columns = ", ".join(f"{_quoted(f.name)} {f.dataType.simpleString()}" for f in schema)
        properties = {CDF_PROPERTY: enable_cdf, ENABLE_PROPERTY: deletion_vectors}
        # Deletion vectors: MERGE marks updated rows deleted instead of rewriting files.
        listed = ", ".join(f"'{name}' = 'true'" for name, on in properties.items() if on)
        partitioned = (f" PARTITIONED BY ({', '.join(map(_quoted, partition_by))})"
                       if partition_by else "")
        self.spark.sql(
            f"CREATE TABLE IF NOT EXISTS {_sql_table(path)} ({columns}) USING delta"
            f"{partitioned}{f' TBLPROPERTIES ({listed})' if listed else ''}"
        )

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
        """Delta's MERGE applies each key's last change (delete, update or insert) and, with
        the change data feed on, writes the change data itself; the application transaction
        and the commit info ride on Delta's SQL settings for idempotent DML. MERGE in SQL over
        the frame, so a Connect session needs no Delta plugin. A `span` joins the match
        condition on the stored rows, which Delta prunes the table's files by."""
        last = last_changes(changes, key)
        columns = [c for c in last.columns if c != RETRACTED]
        self._create_if_missing(
            last.select(*columns).schema, path, (), enable_cdf=True, deletion_vectors=True
        )
        before = self.latest_version(path)
        matched = " AND ".join(f"t.{_quoted(k)} <=> s.{_quoted(k)}" for k in key)
        within = None if span is None else span.sql(last.schema, alias="t")  # the table's
        if within is not None:
            matched = f"{within} AND {matched}"
        names = ", ".join(map(_quoted, columns))
        assigned = ", ".join(f"{_quoted(c)} = s.{_quoted(c)}" for c in columns)
        values = ", ".join(f"s.{_quoted(c)}" for c in columns)
        retracted = f"s.{_quoted(RETRACTED)}"
        merge = (
            f"MERGE INTO {_sql_table(path)} AS t USING {{changes}} AS s ON {matched} "
            f"WHEN MATCHED AND {retracted} THEN DELETE "
            f"WHEN MATCHED THEN UPDATE SET {assigned} "
            f"WHEN NOT MATCHED AND NOT {retracted} THEN INSERT ({names}) VALUES ({values})"
        )
        with _writing(path), session_settings(self.spark, {
            "spark.databricks.delta.write.txnAppId": app_id,
            "spark.databricks.delta.write.txnVersion": str(app_version),
            "spark.databricks.delta.commitInfo.userMetadata": json.dumps(dict(commit_info or {})),
        }):
            self.spark.sql(merge.replace("{", "{{").replace("}", "}}").replace(
                "{{changes}}", "{changes}"), changes=last)
        return self._committed_version(path, before, app_id, app_version)

    def _table_metadata(self, path: LocationLike, version: int) -> TableMetadata:
        # From the log: Delta's frames drop column mapping's physical names from the schema,
        # and DESCRIBE DETAIL knows only the latest version. Delta checkpoints every ten
        # commits, so this is a few small reads.
        state = table_state(Storage(path), version)
        return TableMetadata(state.schema, state.partition_columns, state.configuration,
                             state.reader_features)

    def _active_files(self, path: LocationLike, version: int) -> list[str]:
        return list(self.snapshot(path, version).inputFiles())  # Delta's file list: the log's

    def _read_log(self, path: LocationLike, versions: range) -> dict[int, LogCommit]:
        return read_commits(Storage(path), versions)

    def _missing_files(self, uris: Sequence[str]) -> set[str]:
        return missing(uris)


def _writing(path: LocationLike) -> AbstractContextManager[None]:
    """A write of Delta's into the table at `path`: its files land in place, and Spark's first
    task writes one even without rows, which Delta does not commit (`chronolake.lake.in_place`
    removes what the write leaves uncommitted)."""
    return writing_in_place(Storage(path), leaves_uncommitted=True)


def _sql_table(path: LocationLike) -> str:
    """The table at `path` as Delta's SQL names it: delta.`<location>`."""
    return f"delta.{_quoted(str(as_location(path)))}"


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"

