"""The local Spark session chronolake runs on when no session is given."""

from __future__ import annotations

import getpass
import os
import re
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, suppress
from pathlib import Path
from typing import IO, NamedTuple

from pyspark import SparkConf, SparkContext
from pyspark.java_gateway import launch_gateway
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructField, StructType

from chronolake.location import LocationLike
from chronolake.spark.class_archive import driver_java_options
from chronolake.spark.stack import stack_settings


def worker_python() -> dict[str, str]:
    """`PYSPARK_PYTHON` and `PYSPARK_DRIVER_PYTHON` as the environment sets them, else this
    interpreter (the project's .venv): Spark's Python workers must run it, not the system one.

    pyspark reads them from the environment when its context starts (it ignores
    `spark.pyspark.python` in local mode), so `start_spark_driver` sets them then, and a
    Connect server gets them in its environment; importing chronolake changes nothing.
    """
    return {
        name: os.environ.get(name, sys.executable)
        for name in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")
    }


LOCAL_SPARK_CONF: dict[str, str] = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.shuffle.partitions": "4",
    "spark.default.parallelism": "4",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.parquet.inferTimestampNTZ.enabled": "true",
    "spark.driver.memory": "4g",
    "spark.sql.ansi.enabled": "false",
}


LOOPBACK = "127.0.0.1"


class LoopbackSettings(NamedTuple):
    """The Spark settings and the environment that keep a local JVM's ports on `LOOPBACK`."""

    conf: dict[str, str]
    environment: dict[str, str]


def loopback_settings(master: str | None) -> LoopbackSettings:
    """What keeps every port a JVM on `master` opens on `LOOPBACK`, when `master` is local
    (`local`, `local[*]`, `local[4]`); nothing otherwise (`spark://host:7077`, a master left
    to spark-defaults.conf), since a cluster's executors must reach the driver.

    Spark listens beyond loopback by default: the driver's RPC and block manager on the
    host's address, a Connect server's gRPC port and the Spark UI on every interface, so
    anyone who reaches the host could run code as the user. `spark.driver.bindAddress` and
    `spark.driver.host` hold the first two, `spark.connect.grpc.binding.address` the third
    (only a Connect server reads it), and the UI reads only `SPARK_LOCAL_IP` from the JVM's
    environment. Settings given explicitly go after these, so they win.
    """
    if master is None or not re.fullmatch(r"local(\[[^\]]*\])?", master.strip()):
        return LoopbackSettings({}, {})
    conf = {
        "spark.driver.bindAddress": LOOPBACK,
        "spark.driver.host": LOOPBACK,
        "spark.connect.grpc.binding.address": LOOPBACK,
    }
    return LoopbackSettings(conf, {"SPARK_LOCAL_IP": LOOPBACK})


JAVA_OPTIONS_ENV = "CHRONOLAKE_SPARK_JAVA_OPTIONS"
"""Overrides `LOCAL_JAVA_OPTIONS`; set it empty for the JVM's own defaults."""

JIT_DIRECTIVES = Path(__file__).with_name("jit_directives.json")
"""HotSpot compiler directives: the packages whose methods C2 may compile, those that touch
rows (generated code, expressions, execution, Spark's collections, shuffle, storage, Parquet,
codecs, Arrow, the pickling of rows for Python UDFs, JSON parsing, delta-spark). Everything
else (Catalyst's analyzer and optimizer, Janino, ASM, ANTLR, reflection, class loading) stays
C1-compiled; C2 still inlines what the data plane calls."""

LOCAL_JAVA_OPTIONS = (
    "-XX:+UseParallelGC -XX:+UnlockDiagnosticVMOptions "
    f"-XX:CompilerDirectivesFile={JIT_DIRECTIVES} -XX:+DisplayVMOutputToStderr"
)
"""The local driver's JVM: the throughput collector, and planning code left to C1.

On a small machine G1's concurrent threads take a core from the run. And on a run of a
few rows the C2 compiler spends more CPU-seconds than the run itself, mostly on code
that plans; `JIT_DIRECTIVES` keeps C2 for the code that touches rows.
Measured here on 2 cores (`benchmarks/README.md`, Run overhead): a trivial run is about
4 s faster and a 5M-row temporal join takes the same time. C1 only (`-XX:TieredStopAtLevel=1`)
would cut the trivial run more but made the hot-key join 3.5x slower, so it is not the
default; set `CHRONOLAKE_SPARK_JAVA_OPTIONS` to choose. The JVM's own messages (it counts
the directives it loaded) go to stderr, so that stdout stays the program's, and
`start_spark_driver` drops the count there.
"""


def java_options() -> str:
    """The local driver's JVM options: `LOCAL_JAVA_OPTIONS` unless the environment says
    otherwise."""
    return os.environ.get(JAVA_OPTIONS_ENV, LOCAL_JAVA_OPTIONS)


LOG_CONFIG = Path(__file__).with_name("log4j2.properties")
"""The driver's log4j configuration: errors on the console, warnings too in `spark_log_path`."""

SPARK_LOG_ENV = "CHRONOLAKE_SPARK_LOG"
"""Overrides `spark_log_path`."""

CONSOLE_LOG_ENV = "CHRONOLAKE_SPARK_CONSOLE_LOG"
"""The lowest level of Spark's log lines on the console: `error` unless set (`off`, `warn`,
`info`, ...)."""


def spark_log_path() -> Path:
    """Where the driver logs Spark's warnings and errors: one file per user in the temp dir."""
    configured = os.environ.get(SPARK_LOG_ENV)
    if configured:
        return Path(configured)
    return Path(tempfile.gettempdir()) / f"chronolake-{_user()}" / "spark.log"


def _user() -> str:
    """The user's name, or uid in a container whose uid has no name."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return str(os.getuid())


def logging_java_options() -> str:
    """The driver's JVM options that load `LOG_CONFIG`: a successful command prints only its
    result, while Spark's warnings stay in `spark_log_path` for when something looks wrong."""
    options = f"-Dlog4j2.configurationFile={LOG_CONFIG} -Dchronolake.spark.log={spark_log_path()}"
    if level := os.environ.get(CONSOLE_LOG_ENV):
        options += f" -Dchronolake.spark.console={level}"
    return options


def local_spark_conf(
    lake: LocationLike | None = None, *, backend: str | None = None
) -> dict[str, str]:
    """`LOCAL_SPARK_CONF`, what the lake backend and a lake at `lake` need
    (`chronolake.spark.stack.stack_settings`: Delta's jars and extension for delta-spark, S3A for a
    bucket), plus the driver's JVM options: `java_options`, the logging's
    (`logging_java_options`) and those that map the class archive of that set of jars once
    `./dev` has built it (`chronolake.spark.class_archive`)."""
    stack = stack_settings(lake, backend=backend)
    archive = driver_java_options(stack.get("spark.jars"))
    options = " ".join(o for o in (java_options(), logging_java_options(), archive) if o)
    return LOCAL_SPARK_CONF | stack | {"spark.driver.extraJavaOptions": options}


def local_spark_session(
    app_name: str = "chronolake",
    *,
    settings: Mapping[str, str] | None = None,
    lake: LocationLike | None = None,
    backend: str | None = None,
) -> SparkSession:
    """The process's Spark session: an active one if any, else a local one on all cores
    with chronolake's settings for `lake` and `backend` (`local_spark_conf`), `settings`
    added."""
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    conf = {
        "spark.master": os.environ.get("CHRONOLAKE_SPARK_MASTER", "local[*]"),
        "spark.app.name": app_name,
        **local_spark_conf(lake, backend=backend),
        **(settings or {}),
    }
    start_spark_driver(conf)
    # A copy: `config` takes its own dict type (invariant), not a `dict[str, str]`.
    return SparkSession.builder.config(map={**conf}).getOrCreate()


JVM_NOTICES = re.compile(
    rb"\d+ compiler directives added"  # HotSpot, on loading JIT_DIRECTIVES
    rb"|WARNING: Using incubator modules: jdk\.incubator\.vector"  # Spark's launcher adds it
    rb"|Warning: Java versions > Java 11 can only operate in restricted mode .*"  # DataSketches
)
"""Lines the driver's JVM prints on stderr whatever its settings, for nobody to act on:
`start_spark_driver` drops them (HotSpot's count would go with all of its own output, thread
dumps included, and the other two are printed by Java code that no flag silences)."""


def start_spark_driver(conf: Mapping[str, str]) -> None:
    """Start this process's Spark driver with `conf` unless it runs (or `conf` asks for Spark
    Connect), on loopback when its `spark.master` is local (`loopback_settings`), its stderr
    passed on without `JVM_NOTICES`.

    Where pyspark would start the JVM with the process's stderr, this starts it with a pipe
    that a thread copies to file descriptor 2, so that errors and Python workers' output
    still show. `local_spark_session` and the Dagster resource both start Spark here.
    """
    # pyspark's gateway to its JVM: set once per process, by the first SparkContext.
    if SparkContext._gateway is not None or _spark_connect(conf):
        return
    os.environ.update(worker_python())
    loopback = loopback_settings(conf.get("spark.master"))
    spark_conf = SparkConf().setAll(list({**loopback.conf, **conf}.items()))
    with environment_set(loopback.environment):
        gateway = launch_gateway(spark_conf, popen_kwargs={"stderr": subprocess.PIPE})
    if gateway.proc is not None:  # None: a JVM given by PYSPARK_GATEWAY_PORT, not started here
        threading.Thread(
            target=pass_on_stderr, args=(gateway.proc.stderr,), name="spark-driver-stderr",
            daemon=True,
        ).start()
    SparkContext(conf=spark_conf, gateway=gateway)


@contextmanager
def environment_set(variables: Mapping[str, str]) -> Iterator[None]:
    """`variables` in this process's environment meanwhile (for a JVM started then), then as
    they were: kept, they would reach every later subprocess, a cluster's too."""
    previous = {name: os.environ.get(name) for name in variables}
    os.environ.update(variables)
    try:
        yield
    finally:
        for name, value in previous.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def pass_on_stderr(stream: IO[bytes]) -> None:
    """Copy `stream` to file descriptor 2 line by line, less `JVM_NOTICES`, until it ends.

    Keeps reading when stderr is gone, so the JVM never blocks on a full pipe.
    """
    for line in stream:
        if JVM_NOTICES.fullmatch(line.rstrip(b"\r\n")):
            continue
        with suppress(OSError):
            while line:
                line = line[os.write(2, line):]


def _spark_connect(conf: Mapping[str, str]) -> bool:
    """Whether pyspark's session builder makes a Spark Connect session of `conf`."""
    api_mode = conf.get("spark.api.mode", os.environ.get("SPARK_API_MODE", "")).lower()
    return (
        "spark.remote" in conf or api_mode == "connect"
        or "SPARK_REMOTE" in os.environ or "SPARK_CONNECT_MODE_ENABLED" in os.environ
    )


_PAGE_ROWS = "parquet.page.row.count.limit"


def parquet_pages_of(spark: SparkSession, rows: int) -> AbstractContextManager[None]:
    """Parquet files this session writes meanwhile hold at most `rows` rows a page.

    parquet-mr takes the limit from the Hadoop configuration, which Spark builds for each
    write from the session's settings; a writer option would reach only plain Parquet
    writes, not a Delta writer's.
    """
    return session_settings(spark, {_PAGE_ROWS: str(rows)})


def without_constraint_propagation(spark: SparkSession) -> AbstractContextManager[None]:
    """Plans optimized meanwhile infer no constraints: Spark 4.2's constraint propagation
    fails on a union below a join or aggregate (`key not found` in
    `UnionBase.rewriteConstraints`), which applying a batch of changes builds."""
    return session_settings(spark, {"spark.sql.constraintPropagation.enabled": "false"})


@contextmanager
def session_settings(spark: SparkSession, settings: Mapping[str, str]) -> Iterator[None]:
    """`settings` on the session meanwhile, then as they were."""
    previous = {name: spark.conf.get(name, None) for name in settings}
    for name, value in settings.items():
        spark.conf.set(name, value)
    try:
        yield
    finally:
        for name, before in previous.items():
            if before is None:
                spark.conf.unset(name)
            else:
                spark.conf.set(name, before)


Row = Sequence[str | int | None]
"""One driver-side row of a small table (ticks, splits, offsets, file tags)."""


def local_table(
    spark: SparkSession, schema: StructType, rows: Sequence[Row]
) -> DataFrame:
    """A few driver-side rows (ticks, splits, offsets) as a Spark relation.

    Built as SQL `VALUES`: a local relation, where `createDataFrame` from Python rows
    would go through an RDD and Python workers. (Broadcasting it still runs a Spark job
    each time a plan runs: `join_local` avoids that for a few rows.)
    """
    if not rows:
        return spark.createDataFrame([], schema)
    values = ", ".join("(" + ", ".join(_sql_literal(v) for v in row) + ")" for row in rows)
    aliases = ", ".join(f"c{i}" for i in range(len(schema.fields)))
    typed = ", ".join(
        f"CAST(c{i} AS {field.dataType.simpleString().upper()}) AS `{field.name}`"
        for i, field in enumerate(schema.fields)
    )
    return spark.sql(f"SELECT {typed} FROM VALUES {values} AS t({aliases})")


LITERAL_LOOKUP_MAX_ROWS = 64
"""Up to this many driver-side rows, `join_local` looks them up in a literal map."""


def join_local(
    base: DataFrame, schema: StructType, rows: Sequence[Row], on: Sequence[str]
) -> DataFrame:
    """`base` inner-joined on `on` with a few driver-side rows (`schema`: keys and values).

    A broadcast join costs a Spark job each time its plan runs, which is most of a run on
    a few rows; so up to `LITERAL_LOOKUP_MAX_ROWS` rows with unique, non-null keys are a
    literal map looked up per row instead (no job). Otherwise: a broadcast `local_table`.
    The keys come out once, as from a join on column names; column order is not kept.
    """
    key_at = [schema.names.index(name) for name in on]
    value_at = [i for i in range(len(schema.fields)) if i not in key_at]
    keys = [tuple(row[i] for i in key_at) for row in rows]
    literal = (
        0 < len(rows) <= LITERAL_LOOKUP_MAX_ROWS
        and len(set(keys)) == len(keys)
        and all(v is not None for key in keys for v in key)
    )
    if not literal:
        return base.join(F.broadcast(local_table(base.sparkSession, schema, rows)), list(on))
    fields = schema.fields
    entries: list[Column] = []
    for row in rows:
        entries.append(_literal_key([(row[i], fields[i]) for i in key_at]))
        entries.append(F.struct(*[_literal(row[i], fields[i]) for i in value_at]))
    probe = F.col(on[0]) if len(on) == 1 else F.struct(*[F.col(name) for name in on])
    found = F.create_map(*entries)[probe]
    values = [found[fields[i].name].alias(fields[i].name) for i in value_at]
    return base.where(found.isNotNull()).select("*", *values)


def _literal_key(parts: Sequence[tuple[str | int | None, StructField]]) -> Column:
    if len(parts) == 1:
        return F.lit(parts[0][0]).cast(parts[0][1].dataType)
    return F.struct(*[_literal(value, field) for value, field in parts])


def _literal(value: str | int | None, field: StructField) -> Column:
    # Cast to the declared type: a bare literal is an INT, and a map keyed by INT would
    # cast a BIGINT probe down to it.
    return F.lit(value).cast(field.dataType).alias(field.name)


def _sql_literal(value: str | int | None) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, str):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    return str(int(value))
