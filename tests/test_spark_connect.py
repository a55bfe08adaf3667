"""The reference platform on Spark Connect: a real server, reached by configuration alone."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from _browser import dagster_dev
from _listening import listener_of, listening, on_loopback, process_tree
from dagster import AssetKey, DagsterInstance, DagsterRunStatus, serialize_value
from dagster_graphql import DagsterGraphQLClient
from deltatables import table_rows
from pyspark.errors.exceptions.connect import SparkConnectGrpcException
from pyspark.sql import SparkSession

from chronolake import Catalog, materialize_view
from chronolake.dagster.home import write_instance_settings
from chronolake.demo.lake import build_demo_lake, feed_demo_lake
from chronolake.lake.layout import output_path
from chronolake.spark.connect_server import (
    TOKEN_ENV,
    running_connect_server,
    ui_applications,
    without_token,
)

ROOT = Path(__file__).resolve().parent.parent
VIEWS = ("latest_rates", "orders_enriched_latest")

pytestmark = pytest.mark.own_processes  # the platform runs in the Connect server's process


@pytest.fixture(scope="module")
def connect_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    log = tmp_path_factory.mktemp("connect") / "server.log"
    with running_connect_server(log) as url:
        yield url


def _server_processes(url: str) -> set[int]:
    """The Connect server's JVM (the process listening on `url`'s port) and its children."""
    return process_tree(listener_of(int(without_token(url).rsplit(":", 1)[1])))


def test_nothing_the_connect_server_opens_listens_beyond_loopback(connect_url: str) -> None:
    """The server's gRPC port, its driver's RPC and block manager and its Spark UI are all on
    127.0.0.1: anyone who reached them from another host could run code as the user."""
    sockets = listening(_server_processes(connect_url))
    assert len(sockets) >= 4, sockets  # gRPC, UI, RPC, block manager: else this proves nothing
    assert all(on_loopback(address) for address, _ in sockets), sorted(sockets)


def _count_through(url: str) -> int:
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    session = ConnectSession.builder.remote(url).create()
    try:
        return session.range(3).count()
    finally:
        session.stop()


def test_the_connect_server_serves_only_clients_with_its_token(
    connect_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every local user reaches 127.0.0.1, so the server asks for the token it was started
    with, which reached it through its environment, not on a command line `ps` shows."""
    monkeypatch.delenv(TOKEN_ENV, raising=False)  # pyspark's client would send that one
    address, token = without_token(connect_url), connect_url.split(";token=", 1)[1]
    with pytest.raises(SparkConnectGrpcException, match="No authentication token provided"):
        _count_through(address)
    with pytest.raises(SparkConnectGrpcException, match="Invalid authentication token"):
        _count_through(f"{address}/;token=not-{token}")
    assert _count_through(connect_url) == 3
    for pid in _server_processes(connect_url):
        assert token not in Path(f"/proc/{pid}/cmdline").read_text(errors="replace")


def _demo_lake(root: Path, spark: SparkSession) -> Path:
    build_demo_lake(root)
    list(Catalog(root, spark).run_script((ROOT / "assets" / "platform.sql").read_text()))
    return root


def _materialize_views(lake: Path, home: Path, connect_url: str) -> None:
    """`dagster asset materialize` of `VIEWS` over `lake`, its Spark work in the server at
    `connect_url`, its runs recorded in a new instance at `home`."""
    home.mkdir()
    env = {**os.environ, "CHRONOLAKE_LAKE": str(lake), "DAGSTER_HOME": str(home),
           "CHRONOLAKE_SPARK_REMOTE": connect_url}
    env.pop(TOKEN_ENV, None)  # the URL's token must be enough
    dagster = Path(sys.executable).with_name("dagster")
    result = subprocess.run(
        [str(dagster), "asset", "materialize", "-m", "assets.definitions", "-d", ".",
         "--select", ",".join(VIEWS)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]


def _rows(lake: Path, view: str) -> list[tuple[str, ...]]:
    rows = table_rows(output_path(lake, view)).to_pylist()
    return sorted(tuple(str(row[column]) for column in sorted(row)) for row in rows)


def test_the_platform_runs_on_spark_connect_by_configuration_alone(
    connect_url: str, spark: SparkSession, tmp_path: Path
) -> None:
    """`CHRONOLAKE_SPARK_REMOTE` is all it takes: the run's Spark work happens in the server
    (whose UI lists each stage's jobs by the stage's tag), and every view holds the rows a
    local run writes from the same lake. The URL's token is nowhere in what Dagster stores
    (the run's job snapshot holds the resource's configuration), nor in the run's logs."""
    remote, local = _demo_lake(tmp_path / "remote", spark), _demo_lake(tmp_path / "local", spark)
    home = tmp_path / "dagster-home"
    _materialize_views(remote, home, connect_url)
    instance = DagsterInstance.from_config(str(home))
    token = connect_url.split(";token=", 1)[1]
    runs = instance.get_runs()
    stored = [serialize_value(record) for run in runs
              for record in (run, instance.get_job_snapshot(run.job_snapshot_id))]
    assert runs and not [record for record in stored if token in record]
    files = [path for path in home.rglob("*")  # logs; the snapshots above are compressed
             if path.is_file() and token.encode() in path.read_bytes()]
    assert not files, files

    event = instance.get_latest_materialization_event(AssetKey("orders_enriched_latest"))
    assert event is not None and event.asset_materialization is not None
    metadata = {k: v.value for k, v in event.asset_materialization.metadata.items()}
    stages = metadata["chronolake/stages"]
    assert set(stages) >= {"read_changelog", "assign_watermarks", "temporal_join", "commit"}
    assert stages["read_changelog"]["spark_jobs"] == 0, stages  # the Delta log, not Spark
    assert stages["temporal_join"]["spark_jobs"] > 0 and stages["commit"]["spark_jobs"] > 0
    assert metadata["spark_jobs"] == sum(stage["spark_jobs"] for stage in stages.values())
    assert metadata["rows_out"] > 0

    for view in VIEWS:
        materialize_view(Catalog(local, spark), view)
    for view in VIEWS:
        assert _rows(remote, view) == _rows(local, view), view


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_finished_runs_rows_leave_the_shared_server(spark: SparkSession, tmp_path: Path) -> None:
    """A run holds the frames it reads more than once in its Connect session; once the run has
    ended and its session has been idle for the server's timeout, the server's storage holds
    none of them (`RELEASE_SETTINGS`, minutes in `chronolake dev`, seconds here)."""
    lake = _demo_lake(tmp_path / "lake", spark)
    short = {"spark.connect.session.manager.defaultSessionTimeout": "5s",
             "spark.connect.session.manager.maintenanceInterval": "1s",
             "spark.cleaner.periodicGC.interval": "2s"}
    with running_connect_server(tmp_path / "server.log", settings=short) as url:
        _materialize_views(lake, tmp_path / "dagster-home", url)
        storage = _storage_of(url)
        assert _held_blocks(storage), "the run held nothing: this test would prove nothing"
        deadline = time.monotonic() + 120
        while _held_blocks(storage) and time.monotonic() < deadline:
            time.sleep(1)
        assert not _held_blocks(storage), _held_blocks(storage)


def _storage_of(url: str) -> str:
    """The storage page of the Connect server's Spark UI, found through a session of its own
    (which holds nothing)."""
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    session = ConnectSession.builder.remote(url).create()
    try:
        port = session.conf.get("spark.ui.port")
    finally:
        session.stop()
    with urllib.request.urlopen(ui_applications("localhost", port), timeout=30) as answer:
        application = json.load(answer)[0]["id"]
    return f"{ui_applications('localhost', port)}/{application}/storage/rdd"


_DELTA_LOG_STATE = "Delta Table State #"
"""How Delta's JVM names a table's log state that it caches: the table's file list (a few
KB), kept by Delta's own `DeltaLog` cache for up to an hour after its last use
(`spark.databricks.delta.delta.log.cacheRetentionMinutes`), whoever read the table. No run's
rows are in it."""


def _held_blocks(storage: str) -> list[tuple[int, str, int]]:
    """(RDD id, name, bytes) of every RDD with blocks in the server's storage, but Delta's
    cached log states."""
    with urllib.request.urlopen(storage, timeout=30) as answer:
        return [(rdd["id"], rdd["name"], rdd["memoryUsed"] + rdd["diskUsed"])
                for rdd in json.load(answer) if not rdd["name"].startswith(_DELTA_LOG_STATE)]


def _finished(client: DagsterGraphQLClient, run_id: str,
              statuses: tuple[DagsterRunStatus, ...] = (
                  DagsterRunStatus.SUCCESS, DagsterRunStatus.FAILURE, DagsterRunStatus.CANCELED)
              ) -> DagsterRunStatus:
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        status = client.get_run_status(run_id)
        if status in statuses:
            return status
        time.sleep(0.1)
    pytest.fail(f"run {run_id} did not reach {statuses} in 600 s")


def _run_pids(instance: DagsterInstance, run_id: str) -> tuple[str, str]:
    """The pid the launcher handed the run to (and how it started), and the pid the run
    reported executing in."""
    messages = [entry.message for entry in instance.all_logs(run_id)]
    launched = next(re.search(r"Launched in a process (.+) \(pid: (\d+)\)", message)
                    for message in messages if "Launched in a process" in message)
    executed = next(re.search(r"pid: (\d+)", message)
                    for message in messages if "Started process for run" in message)
    assert launched is not None and executed is not None, messages
    assert launched.group(2) == executed.group(1), messages
    return launched.group(1), executed.group(1)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_chronolake_dev_runs_share_a_warm_connect_server_that_stops_with_it(
    spark: SparkSession, tmp_path: Path
) -> None:
    """`chronolake dev`, as the README starts it with the instance `./dev` writes: the runs it
    launches (through the run launcher, as the UI does) execute in processes forked from one
    that warmed up once, and do their Spark work in one Connect server, which counts each
    stage's jobs.
    Terminate in the UI cancels a run; a run whose process is killed is failed, not left
    running; the next run succeeds. The server stops when `dagster dev` does; its token was
    printed nowhere."""
    lake = _demo_lake(tmp_path / "lake", spark)
    home = tmp_path / "dagster-home"
    write_instance_settings(home)
    env = {key: value for key, value in os.environ.items() if key != "CHRONOLAKE_SPARK_REMOTE"}
    env |= {"CHRONOLAKE_LAKE": str(lake), "DAGSTER_HOME": str(home)}
    instance = DagsterInstance.from_config(str(home))
    with dagster_dev(ROOT, env=env, log_path=tmp_path / "dev.log") as server:
        found = re.search(r"Spark Connect server at sc://localhost:(\d+)",
                          server.log_path.read_text())
        assert found is not None, server.log_path.read_text()[-3000:]
        client = DagsterGraphQLClient("127.0.0.1", port_number=int(server.url.rsplit(":", 1)[1]))

        def launched(view: str) -> str:
            return client.submit_job_execution("__ASSET_JOB", asset_selection=[[view]])

        started = []
        for view in VIEWS:  # two runs on the same warm server
            run_id = launched(view)
            assert _finished(client, run_id) is DagsterRunStatus.SUCCESS, (
                server.log_path.read_text()[-5000:]
            )
            started.append(_run_pids(instance, run_id))
        assert started[0][0] == "forked from a process started for it"
        assert started[1][0] == "forked from a warm process" and started[1][1] != started[0][1]

        feed_demo_lake(lake, seed=1)
        canceled = launched("orders_enriched_latest")
        _finished(client, canceled, (DagsterRunStatus.STARTED,))
        client.terminate_run(canceled)
        assert _finished(client, canceled) is DagsterRunStatus.CANCELED

        killed = launched("orders_enriched_latest")
        _finished(client, killed, (DagsterRunStatus.STARTED,))
        os.kill(int(_run_pids(instance, killed)[1]), signal.SIGKILL)
        assert _finished(client, killed) is DagsterRunStatus.FAILURE
        failure = instance.get_run_by_id(killed)
        assert "was killed by SIGKILL before the run finished" in str(
            [entry.message for entry in instance.all_logs(killed)]), failure

        after = launched("orders_enriched_latest")
        assert _finished(client, after) is DagsterRunStatus.SUCCESS, (
            server.log_path.read_text()[-5000:]
        )
    with pytest.raises(OSError):  # the server went with it
        socket.create_connection(("localhost", int(found.group(1))), timeout=2).close()
    assert "token=" not in server.log_path.read_text()  # it printed the server's address only
    event = instance.get_latest_materialization_event(AssetKey("orders_enriched_latest"))
    assert event is not None and event.asset_materialization is not None
    assert event.run_id == after
    stages = event.asset_materialization.metadata["chronolake/stages"].value
    assert stages["temporal_join"]["spark_jobs"] > 0, stages
