"""Nothing a local Spark that chronolake starts opens listens beyond loopback, unless asked.

The Connect server's sockets and token are tested in `test_spark_connect.py`, on its server.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from _listening import listening, on_loopback, process_tree

from chronolake.spark import connect_server
from chronolake.spark.connect_server import TOKEN_ENV, free_port
from chronolake.spark.session import LOOPBACK, loopback_settings

_LOCAL_SESSION = """
import os, sys
from pyspark.sql import functions as F
from chronolake.spark.session import local_spark_session

spark = local_spark_session(
    "loopback", settings={"spark.ui.enabled": "true", "spark.ui.port": sys.argv[1]}
)
assert spark.range(3).select(F.udf(lambda x: x + 1, "long")("id")).count() == 3  # Python workers
print("ready", os.environ.get("SPARK_LOCAL_IP"), flush=True)
sys.stdin.readline()
"""


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_local_session_listens_on_loopback_only(tmp_path: Path) -> None:
    """`local_spark_session` in a process of its own (not to disturb the tests' session): its
    driver's RPC, block manager and Spark UI, py4j's gateway and the Python workers' daemon
    listen on 127.0.0.1 only, and `SPARK_LOCAL_IP` reached the JVM alone, not later
    subprocesses of the process."""
    env = {key: value for key, value in os.environ.items()
           if key not in ("SPARK_LOCAL_IP", "CHRONOLAKE_SPARK_MASTER", "SPARK_REMOTE")}
    log = tmp_path / "session.log"
    with log.open("wb") as err:
        session = subprocess.Popen(
            [sys.executable, "-c", _LOCAL_SESSION, str(free_port())], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=err, env=env, text=True,
        )
    try:
        assert session.stdout is not None and session.stdin is not None
        assert session.stdout.readline() == "ready None\n", log.read_text()[-3000:]
        sockets = listening(process_tree(session.pid))
        assert len(sockets) >= 4, sockets  # gateway, RPC, block manager, UI: else proves nothing
        assert all(on_loopback(address) for address, _ in sockets), sorted(sockets)
        session.stdin.close()
        assert session.wait(timeout=120) == 0, log.read_text()[-3000:]
    finally:
        session.kill()
        session.wait()


@pytest.mark.parametrize("master", ["local", "local[*]", "local[4]", " local[4,2] "])
def test_a_local_driver_is_held_to_loopback(master: str) -> None:
    conf, environment = loopback_settings(master)
    assert conf["spark.driver.bindAddress"] == conf["spark.driver.host"] == LOOPBACK
    assert conf["spark.connect.grpc.binding.address"] == LOOPBACK
    assert environment == {"SPARK_LOCAL_IP": LOOPBACK}


@pytest.mark.parametrize(
    "master", ["spark://host:7077", "yarn", "k8s://https://host:6443", "local-cluster[2,1,1024]",
               None]
)
def test_a_clusters_driver_is_not_held_to_loopback(master: str | None) -> None:
    """The executors of a cluster (or of a master left to spark-defaults.conf) must reach
    the driver."""
    assert loopback_settings(master) == ({}, {})


def test_the_connect_server_will_not_start_without_a_token(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    monkeypatch.setattr(sys, "argv", ["chronolake.spark.connect_server", "15999"])
    with pytest.raises(SystemExit, match=f"no token for the server's clients: {TOKEN_ENV} is not"):
        connect_server.main()
