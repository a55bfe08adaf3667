"""A class-data-sharing archive of the classes a local Spark driver loads.

A fresh local Spark JVM spends seconds loading and verifying Spark's classes
from 270 jars before its first job; a run on a trivial input is mostly that.
Java's AppCDS archives the loaded classes once (`-XX:ArchiveClassesAtExit`) and
maps them on later starts (`-XX:SharedArchiveFile`): on this project's 2-core
machine the session starts in ~3.9 s instead of ~5.9 s and the first job takes
~1.5 s instead of ~2.5 s. The archive belongs to one JDK build and one Spark
classpath; a JVM given a stale or foreign one ignores it (CDS logging is
silenced, so it does so quietly) and starts the slow way, never wrongly.

A session that loads more jars (`spark.jars`: Delta's for the delta-spark backend, S3A's)
has an archive of its own, named by a digest of those jars, whose workload also writes and
reads a Delta table, so Delta's classes are archived with Spark's.

`./dev` builds the archives into the virtual environment after installing:
`python -m chronolake.spark.class_archive` (for the backend `CHRONOLAKE_BACKEND` chooses).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from chronolake.spark.stack import stack_settings

ARCHIVE_ENV = "CHRONOLAKE_SPARK_CLASS_ARCHIVE"
"""Overrides the archive's path; set it empty to start Spark without an archive."""

_QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"

# What the archive is built from: a local session doing what a run does (SQL, a shuffle,
# a broadcast join, a window, Parquet out and in), so the classes of those paths get in.
_WORKLOAD = """
import sys
from pyspark import SparkContext
from pyspark.sql import SparkSession, Window, functions as F
from chronolake.spark.session import LOCAL_SPARK_CONF, java_options
from chronolake.spark.stack import stack_settings
builder = SparkSession.builder.master("local[*]")
options = f"{java_options()} {sys.argv[2]}"
stack = stack_settings()
for key, value in {**LOCAL_SPARK_CONF, **stack, "spark.driver.extraJavaOptions": options}.items():
    builder = builder.config(key, value)
spark = builder.getOrCreate()
if "spark.sql.extensions" in stack:  # Delta's write, MERGE, history and change feed
    delta = sys.argv[1] + "-delta"
    spark.range(100).selectExpr("id", "id AS v").write.format("delta").option(
        "delta.enableChangeDataFeed", "true").save(delta)
    spark.sql(f"MERGE INTO delta.`{delta}` t USING (SELECT 1L AS id, 5L AS v) s ON t.id = s.id "
              "WHEN MATCHED THEN UPDATE SET *")
    spark.sql(f"DESCRIBE HISTORY delta.`{delta}` LIMIT 1").collect()  # one row: warms history
    spark.read.format("delta").option("readChangeFeed", "true").option(
        "startingVersion", 0).load(delta).count()
rows = spark.range(2000).select(
    (F.col("id") % 7).alias("k"), F.timestamp_seconds("id").alias("t"), F.col("id").alias("v"))
keys = spark.sql("SELECT * FROM VALUES (0, 'a'), (1, 'b') AS t(k, name)")
joined = rows.join(F.broadcast(keys), "k", "left").withColumn(
    "n", F.row_number().over(Window.partitionBy("k").orderBy("t")))
joined.groupBy("k").agg(F.max("t"), F.count(F.lit(1))).collect()  # 7 rows: warms collect
joined.localCheckpoint().write.parquet(sys.argv[1])
spark.read.parquet(sys.argv[1]).where("v > 10").count()
spark.stop()
jvm = SparkContext._gateway.proc  # the archive is written as the JVM exits: wait for it
jvm.stdin.close()
jvm.wait(timeout=300)
"""


def archive_path(jars: str | None = None) -> Path | None:
    """Where the archive of a session with `jars` (its `spark.jars`, None for Spark's own)
    lives: beside the interpreter's environment (None: disabled)."""
    configured = os.environ.get(ARCHIVE_ENV)
    if configured is not None:
        return Path(configured) if configured else None
    suffix = f"-{hashlib.sha256(jars.encode()).hexdigest()[:12]}" if jars else ""
    return Path(sys.prefix) / f"chronolake-spark-classes{suffix}.jsa"


def driver_java_options(jars: str | None = None) -> str | None:
    """The driver JVM options that map the archive of a session with `jars`, when built."""
    path = archive_path(jars)
    if path is None or not path.is_file():
        return None
    return f"-XX:SharedArchiveFile={path} {_QUIET}"


def build_archive(jars: str | None = None) -> Path:
    """Start a local Spark driver once with `jars` (see `archive_path`), run a small
    workload, and archive its classes.

    Takes one Spark start (~15 s on 2 cores). Written beside and then moved over the
    old archive, so a JVM never maps a half-written file.
    """
    path = archive_path(jars)
    if path is None:
        raise SystemExit(f"{ARCHIVE_ENV} is empty: the class archive is disabled")
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    partial.unlink(missing_ok=True)
    options = f"-XX:ArchiveClassesAtExit={partial} {_QUIET}"
    with tempfile.TemporaryDirectory() as folder:
        subprocess.run(
            [sys.executable, "-c", _WORKLOAD, str(Path(folder) / "rows"), options],
            check=True, capture_output=True,
        )
    if not partial.is_file():
        raise SystemExit(f"the JVM wrote no class archive at {partial}; Spark starts without one")
    partial.replace(path)
    return path


def main(argv: list[str]) -> None:
    """Build the archive of the backend `CHRONOLAKE_BACKEND` chooses; with `--if-missing`,
    only when it has not been built."""
    jars = stack_settings().get("spark.jars")
    path = archive_path(jars)
    if "--if-missing" in argv and (path is None or path.is_file()):
        return
    print(f"chronolake: archiving Spark's classes for faster starts ({path}) ...")
    build_archive(jars)


if __name__ == "__main__":
    main(sys.argv[1:])
