"""The JVM backend: Delta's own Spark classes (delta-spark), for clusters that have them.

Used where `io.delta.sql.DeltaSparkSessionExtension` is on the Spark classpath
(a cluster, Databricks, `--packages io.delta:delta-spark_2.13:<version>`).
Snapshots and writes go through Delta's data source (so deletion vectors and
remote storage work); the log is read through Spark too, so changelogs come
out exactly as with delta-rs.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType

from chronolake.errors import SourceError
from chronolake.lake.backend import LakeBackend, TableMetadata
from chronolake.lake.changelog import POSITION
from chronolake.lake.deletion_vectors import ENABLE_PROPERTY
from chronolake.lake.delta_log import CDF_PROPERTY, LogCommit, log_file_name, parse_commit
from chronolake.lake.files import POSITION_STRIDE, file_name
from chronolake.lake.upserts import RETRACTED, last_changes
from chronolake.spark_session import join_local, session_settings

DELTA_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"
_FILE, _ROW, _RANK = "__chronolake_file", "__chronolake_row", "__chronolake_rank"


def delta_spark_available(spark: SparkSession) -> bool:
    """Whether the session runs Delta's extension and its classes load in the JVM."""
    if DELTA_EXTENSION not in (spark.conf.get("spark.sql.extensions", "") or ""):
        return False
    try:
        loader = spark._jvm.java.lang.Thread.currentThread().getContextClassLoader()  # type: ignore[union-attr]
        loader.loadClass(DELTA_EXTENSION)
    except Exception:  # py4j surfaces ClassNotFoundException as a generic error
        return False
    return True


class DeltaSparkBackend(LakeBackend):
    """Delta tables through delta-spark's data source and `DeltaTable` API.

    Example:
        >>> spark = (SparkSession.builder
        ...     .config("spark.jars.packages", "io.delta:delta-spark_2.13:4.0.0")
        ...     .config("spark.sql.extensions", DELTA_EXTENSION)
        ...     .config("spark.sql.catalog.spark_catalog",
        ...             "org.apache.spark.sql.delta.catalog.DeltaCatalog")
        ...     .getOrCreate())
        >>> DeltaSparkBackend(spark).snapshot("s3://lake/rates", 3)
    """

    kind = "delta-spark"

    def __init__(self, spark: SparkSession) -> None:
        if not delta_spark_available(spark):
            msg = (
                f"the delta-spark backend needs {DELTA_EXTENSION} on the Spark classpath and in "
                "spark.sql.extensions, and this session has neither; start Spark with "
                "--packages io.delta:delta-spark_2.13:<version> and spark.sql.extensions="
                f"{DELTA_EXTENSION}, or use the 'delta-rs' backend (no JVM jars needed)"
            )
            raise SourceError(msg)
        super().__init__(spark)

    def is_delta_table(self, path: str | Path) -> bool:
        return DeltaTable.isDeltaTable(self.spark, str(path))

    def latest_version(self, path: str | Path) -> int:
        self._require_table(path)
        # One history row: metadata-sized.
        row = DeltaTable.forPath(self.spark, str(path)).history(1).select("version").first()
        return int(row[0]) if row else 0

    def table_id(self, path: str | Path) -> str:
        self._require_table(path)
        row = DeltaTable.forPath(self.spark, str(path)).detail().select("id").first()
        assert row is not None, "DESCRIBE DETAIL has one row"
        return str(row[0])

    def snapshot(self, path: str | Path, version: int | None = None) -> DataFrame:
        self._require_table(path)
        reader = self.spark.read.format("delta")
        if version is not None:
            reader = reader.option("versionAsOf", version)
        return reader.load(str(path))

    def arrival_snapshot(self, path: str | Path, version: int) -> DataFrame:
        snapshot = self.snapshot(path, version)
        files = snapshot.inputFiles()  # the snapshot's active files: metadata-sized
        ranks = self._arrival_ranks(path, version, files)
        schema = StructType([
            StructField(_FILE, StringType(), False), StructField(_RANK, LongType(), False),
        ])
        names = [(file_name(uri), rank) for uri, rank in zip(files, ranks, strict=True)]
        rows = snapshot.select(
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
        path: str | Path,
        *,
        app_id: str,
        app_version: int,
        partition_by: Sequence[str] = (),
        enable_cdf: bool = False,
        commit_info: Mapping[str, str] | None = None,
    ) -> int | None:
        """Delta's idempotent write (`txnAppId`/`txnVersion`): Delta itself skips a
        transaction it has seen, which shows as an unchanged latest version."""
        self._create_if_missing(df.schema, path, partition_by, enable_cdf=enable_cdf)
        before = self.latest_version(path)
        (
            df.write.format("delta")
            .mode("append")
            .option("txnAppId", app_id)
            .option("txnVersion", app_version)
            .option("userMetadata", json.dumps(dict(commit_info or {})))
            .save(str(path))
        )
        after = self.latest_version(path)
        return None if after == before else after

    def overwrite_dataframe(
        self,
        df: DataFrame,
        path: str | Path,
        *,
        partition_by: Sequence[str] = (),
        enable_cdf: bool = False,
        commit_info: Mapping[str, str] | None = None,
    ) -> int:
        self._create_if_missing(df.schema, path, partition_by, enable_cdf=enable_cdf)
        writer = df.write.format("delta").mode("overwrite").option("overwriteSchema", "true")
        writer = writer.option("userMetadata", json.dumps(dict(commit_info or {})))
        writer.partitionBy(*partition_by).save(str(path))
        return self.latest_version(path)

    def _create_if_missing(
        self, schema: StructType, path: str | Path, partition_by: Sequence[str], *,
        enable_cdf: bool, deletion_vectors: bool = False,
    ) -> None:
        builder = DeltaTable.createIfNotExists(self.spark).location(str(path))
        builder = builder.addColumns(schema).partitionedBy(*partition_by)
        if enable_cdf:
            builder = builder.property(CDF_PROPERTY, "true")
        if deletion_vectors:  # MERGE marks updated rows deleted instead of rewriting files
            builder = builder.property(ENABLE_PROPERTY, "true")
        builder.execute()

    def commit_changes(
        self,
        changes: DataFrame,
        path: str | Path,
        *,
        key: Sequence[str],
        retracting: bool,
        app_id: str,
        app_version: int,
        commit_info: Mapping[str, str] | None = None,
    ) -> int | None:
        """Delta's MERGE applies each key's last change (delete, update or insert) and, with
        the change data feed on, writes the change data itself; the application transaction
        and the commit info ride on Delta's SQL settings for idempotent DML."""
        last = last_changes(changes, key)
        columns = [c for c in last.columns if c != RETRACTED]
        self._create_if_missing(
            last.select(*columns).schema, path, (), enable_cdf=True, deletion_vectors=True
        )
        before = self.latest_version(path)
        matched = " AND ".join(f"t.`{k}` <=> s.`{k}`" for k in key)
        with session_settings(self.spark, {
            "spark.databricks.delta.write.txnAppId": app_id,
            "spark.databricks.delta.write.txnVersion": str(app_version),
            "spark.databricks.delta.commitInfo.userMetadata": json.dumps(dict(commit_info or {})),
        }):
            (
                DeltaTable.forPath(self.spark, str(path)).alias("t")
                .merge(last.alias("s"), matched)
                .whenMatchedDelete(condition=f"s.`{RETRACTED}`")
                .whenMatchedUpdate(set={f"`{c}`": f"s.`{c}`" for c in columns})
                .whenNotMatchedInsert(
                    condition=f"NOT s.`{RETRACTED}`",
                    values={f"`{c}`": f"s.`{c}`" for c in columns},
                )
                .execute()
            )
        after = self.latest_version(path)
        return None if after == before else after

    def _table_metadata(self, path: str | Path, version: int) -> TableMetadata:
        schema = self.snapshot(path, version).schema
        # DESCRIBE DETAIL knows only the latest version's partitioning and properties;
        # metadata changes inside a read range still come from the log (see `changes`).
        detail = DeltaTable.forPath(self.spark, str(path)).detail()
        # DESCRIBE DETAIL is one row of table metadata.
        (row,) = detail.select("partitionColumns", "properties").collect()
        return TableMetadata(
            schema=schema,
            partition_columns=tuple(row["partitionColumns"]),
            configuration=dict(row["properties"]),
        )

    def _read_log(self, path: str | Path, versions: range) -> dict[int, LogCommit]:
        uris = {f"{self._table_uri(path)}/_delta_log/{log_file_name(v)}": v for v in versions}
        missing = self._missing_files(list(uris))
        present = [uri for uri in uris if uri not in missing]
        if not present:
            return {}
        # The Delta log's JSON lines, not table data: metadata-sized, parsed on the driver.
        rows = (
            self.spark.read.text(present)
            .select(
                F.col("_metadata.file_name").alias("name"),
                F.col("_metadata.file_modification_time").alias("mtime"),
                "value",
            )
            .collect()
        )
        by_name = {uri.rsplit("/", 1)[-1]: v for uri, v in uris.items()}
        lines: dict[int, list[str]] = {}
        mtimes: dict[int, int] = {}
        for row in rows:
            version = by_name[row["name"]]
            lines.setdefault(version, []).append(row["value"])
            mtimes[version] = int(row["mtime"].timestamp() * 1000)
        return {
            v: parse_commit(v, lines[v], fallback_timestamp_ms=mtimes[v]) for v in sorted(lines)
        }

    def _missing_files(self, uris: Sequence[str]) -> set[str]:
        # One existence check per file through Hadoop's FileSystem: metadata-sized.
        jvm = self.spark._jvm  # type: ignore[attr-defined]
        conf = self.spark._jsc.hadoopConfiguration()  # type: ignore[attr-defined]
        missing = set()
        for uri in uris:
            hadoop_path = jvm.org.apache.hadoop.fs.Path(uri)
            if not hadoop_path.getFileSystem(conf).exists(hadoop_path):
                missing.add(uri)
        return missing

    def _table_uri(self, path: str | Path) -> str:
        return str(path).rstrip("/")

