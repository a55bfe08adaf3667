"""A Spark standalone cluster for the tests, and the reference platform run on it.

`standalone_cluster` starts a master and workers from the installed pyspark
(`bin/spark-class`), bound to 127.0.0.1, and stops them afterwards. Run as a script
(`python tests/_cluster.py LAKE`), this module is the cluster's driver: it runs the
reference platform's derived tables the way a user would on a cluster
(`CHRONOLAKE_SPARK_MASTER`, the executors' settings and chronolake's code from
`spark-defaults.conf` in `SPARK_CONF_DIR`) and prints what it saw as JSON.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import zipfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pyspark

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from chronolake import Catalog

REPO = Path(__file__).resolve().parents[1]
PLATFORM_SQL = REPO / "assets" / "platform.sql"
SPARK_CLASS = Path(pyspark.__file__).parent / "bin" / "spark-class"
WORKERS = 2
STARTUP_TIMEOUT_S = 120
DRIVER_TIMEOUT_S = 600
CODE_ZIP = "chronolake.zip"


@dataclass(frozen=True)
class Cluster:
    """A running standalone cluster: its master's URL and the master's web UI (its JSON)."""

    url: str
    web_ui: str

    def state(self) -> dict[str, object]:
        """The master's view of the cluster: workers, running and completed applications."""
        with urllib.request.urlopen(f"{self.web_ui}/json", timeout=5) as response:
            return json.load(response)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    return free_ports(1)[0]


def free_ports(count: int) -> list[int]:
    """`count` distinct TCP ports on 127.0.0.1 that nothing listens on now (held together
    while chosen, so that no two daemons are given the same one)."""
    probes = [socket.socket() for _ in range(count)]
    try:
        for probe in probes:
            probe.bind(("127.0.0.1", 0))
        return [probe.getsockname()[1] for probe in probes]
    finally:
        for probe in probes:
            probe.close()


@contextmanager
def standalone_cluster(
    directory: Path, *, workers: int = WORKERS, worker_memory: str = "1g"
) -> Iterator[Cluster]:
    """A master and `workers` workers (1 core and `worker_memory` each) until the block ends;
    their logs and work dirs under `directory`. Each daemon is its own process group, killed
    on exit."""
    directory.mkdir(parents=True, exist_ok=True)
    port, web, *worker_webs = free_ports(2 + workers)
    cluster = Cluster(f"spark://127.0.0.1:{port}", f"http://127.0.0.1:{web}")
    env = os.environ | {"SPARK_LOCAL_IP": "127.0.0.1", "SPARK_LOG_DIR": str(directory)}
    daemons = [_daemon(directory / "master.log", env, "master.Master",
                       "--host", "127.0.0.1", "--port", str(port), "--webui-port", str(web))]
    try:
        for number in range(workers):
            daemons.append(_daemon(
                directory / f"worker-{number}.log", env, "worker.Worker",
                "--host", "127.0.0.1", "--cores", "1", "--memory", worker_memory,
                "--webui-port", str(worker_webs[number]),
                "--work-dir", str(directory / f"work-{number}"),
                cluster.url,
            ))
        _await_workers(cluster, workers, daemons)
        yield cluster
    finally:
        for daemon in daemons:
            _kill_group(daemon)


def _daemon(log: Path, env: Mapping[str, str], name: str, *args: str) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(
            [str(SPARK_CLASS), f"org.apache.spark.deploy.{name}", *args],
            env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )


def _await_workers(cluster: Cluster, workers: int, daemons: list[subprocess.Popen[bytes]]) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        if any(daemon.poll() is not None for daemon in daemons):
            break
        try:
            alive = [w for w in cluster.state()["workers"] if w["state"] == "ALIVE"]
        except (OSError, ValueError):  # the master's UI is not up (or not answering JSON) yet
            alive = []
        if len(alive) == workers:
            return
        time.sleep(0.5)
    msg = f"the standalone cluster did not start with {workers} workers; see the logs"
    raise RuntimeError(msg)


def _kill_group(daemon: subprocess.Popen[bytes]) -> None:
    """Stop a daemon and whatever it started (a worker's executors): TERM, then KILL."""
    for sig, wait_s in ((signal.SIGTERM, 20), (signal.SIGKILL, 10)):
        try:
            os.killpg(daemon.pid, sig)
        except ProcessLookupError:
            return
        try:
            daemon.wait(timeout=wait_s)
            return
        except subprocess.TimeoutExpired:
            continue


def code_zip(directory: Path) -> Path:
    """chronolake's package as a zip, what `spark.submit.pyFiles` ships to executors."""
    package = REPO / "platform" / "chronolake"
    path = directory / CODE_ZIP
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for file in sorted(package.rglob("*")):
            if file.is_file() and "__pycache__" not in file.parts:
                archive.write(file, file.relative_to(package.parent))
    return path


def cluster_settings(zip_path: Path) -> dict[str, str]:
    """What a user puts in `spark-defaults.conf` to run chronolake on a standalone cluster.

    The executors get the local driver's JVM options (the throughput collector, C2 kept for
    code that touches rows): on a small machine most of a short run's CPU is the JIT's.
    """
    from chronolake.spark.session import java_options

    return {
        "spark.executor.cores": "1",
        "spark.cores.max": str(WORKERS),
        "spark.executor.memory": "1g",
        "spark.pyspark.python": sys.executable,
        "spark.submit.pyFiles": str(zip_path),
        "spark.executor.extraJavaOptions": java_options(),
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
    }


def start_driver(cluster: Cluster, lake: str | Path, directory: Path) -> subprocess.Popen[bytes]:
    """Start a driver of its own (this file as a script, with no PYTHONPATH) that runs the
    platform's derived tables on `cluster` over `lake` (a folder or a bucket's URI);
    `driver_output` waits for what it saw."""
    conf_dir = directory / "conf"
    conf_dir.mkdir(parents=True, exist_ok=True)
    settings = cluster_settings(code_zip(directory))
    (conf_dir / "spark-defaults.conf").write_text(
        "".join(f"{name} {value}\n" for name, value in settings.items())
    )
    env = {name: value for name, value in os.environ.items() if name != "PYTHONPATH"}
    env |= {"CHRONOLAKE_SPARK_MASTER": cluster.url, "SPARK_CONF_DIR": str(conf_dir),
            "SPARK_LOCAL_IP": "127.0.0.1"}
    # Files, not pipes: the driver never blocks on output nobody reads while the test runs.
    with (directory / "driver.out").open("w") as out, (directory / "driver.err").open("w") as err:
        return subprocess.Popen(
            [sys.executable, __file__, str(lake)], env=env, cwd=directory, stdout=out, stderr=err,
        )


def driver_output(driver: subprocess.Popen[bytes], directory: Path) -> dict[str, object]:
    """What the driver started in `directory` printed as JSON once it ends; its stderr in
    the error if it failed."""
    try:
        driver.wait(timeout=DRIVER_TIMEOUT_S)
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
    if driver.returncode != 0:
        stderr = (directory / "driver.err").read_text()
        raise AssertionError(f"the cluster's driver failed:\n{stderr[-6000:]}")
    return json.loads((directory / "driver.out").read_text().strip().splitlines()[-1])


PROCESSING_TIME_MS = 1_793_613_600_000
"""The runs' processing time (a `ManualClock`): the demo's orders are an hour old by then."""


def derived_tables(catalog: Catalog) -> list[str]:
    """The reference platform's derived tables, declared in `catalog`, in dependency order."""
    from chronolake.sql.view_kinds import is_derived

    return [spec.name for spec in catalog.declare(PLATFORM_SQL.read_text()) if is_derived(spec)]


def run_platform(catalog: Catalog) -> dict[str, dict[str, object]]:
    """One run of each derived table at `PROCESSING_TIME_MS`: its result as JSON values."""
    from chronolake import materialize_view
    from chronolake.clock import ManualClock

    clock = ManualClock(PROCESSING_TIME_MS)
    return {
        name: materialize_view(catalog, name, clock=clock).model_dump(mode="json")
        for name in derived_tables(catalog)
    }


def _where_code_runs(_: int) -> tuple[str, str]:
    """On an executor: where its Python found chronolake, and which Python it is."""
    import chronolake

    return chronolake.__file__, sys.executable


def executor_tasks(spark: SparkSession) -> dict[str, int]:
    """Completed tasks per executor id ("driver" included), from the driver's status store."""
    summaries = spark.sparkContext._jsc.sc().statusStore().executorList(False)
    return {
        summaries.apply(i).id(): summaries.apply(i).completedTasks()
        for i in range(summaries.size())
    }


def main(lake: str) -> None:
    """The cluster's driver: the platform's runs, where tasks ran, where executors found
    chronolake; as one JSON line on stdout. For a lake in a bucket, chronolake's session
    brings S3A's jars (which the executors fetch from the driver) and settings."""
    from chronolake import Catalog
    from chronolake.spark.session import local_spark_session

    spark = local_spark_session("chronolake-cluster-test", lake=lake)
    results = run_platform(Catalog(lake, spark))
    tasks = executor_tasks(spark)
    code = spark.sparkContext.parallelize(range(4), 4).map(_where_code_runs).distinct().collect()
    print(json.dumps({
        "master": spark.sparkContext.master, "app_id": spark.sparkContext.applicationId,
        "results": results, "executor_tasks": tasks, "executor_code": sorted(code),
    }))
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1])
