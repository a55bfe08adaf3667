"""A local Spark Connect server, started from the pyspark package's own Spark.

A run through Spark Connect (`spark.remote`) does its Spark work in a server that outlives
the run, so runs skip the JVM's start and warm-up. `python -m chronolake.spark.connect_server
[PORT [LAKE]]` runs one in the foreground (port 15002 by default; a LAKE on a bucket loads
S3A, and `CHRONOLAKE_BACKEND=delta-spark` Delta's jars); the tests and the run-overhead
benchmark start one on a free port with `running_connect_server`.

The server and every port its JVM opens listen on loopback only
(`chronolake.spark.session.loopback_settings`), and it serves only clients that bring its
token, since any local user reaches loopback: the token goes to the server in its
environment (`TOKEN_ENV`, which `ps` does not show) and to its clients in the URL
(`sc://localhost:PORT/;token=...`) or the same variable. pyspark's client sends a token to a
host other than `localhost` only over TLS, which the server does not offer: a server reached
from other hosts needs a TLS proxy in front of it (README, "A Spark Connect server kept
running").
"""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

import pyspark

from chronolake.location import LocationLike
from chronolake.spark.session import (
    local_spark_conf,
    loopback_settings,
    pass_on_stderr,
    worker_python,
)

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
SERVER_MASTER = "local[*]"
TOKEN_ENV = "SPARK_CONNECT_AUTHENTICATE_TOKEN"
"""Where the server reads the token its clients must bring (Spark Connect's
`spark.connect.authenticate.token` would be on the command line), and where pyspark's client
looks for one when its URL has none."""
DEFAULT_PORT = 15002
START_TIMEOUT_SECONDS = 180.0
UI_WARM_TIMEOUT_SECONDS = 15.0
SPARK_HOME = Path(pyspark.__file__).parent
"""The Spark distribution inside the pyspark package (its jars include Spark Connect's)."""


RELEASE_SETTINGS = {
    "spark.connect.session.manager.defaultSessionTimeout": "15min",
    "spark.cleaner.periodicGC.interval": "10min",
}
"""How soon the server lets go of a finished run's rows. A run holds frames it reads more
than once (`chronolake.runtime.reuse`) as checkpoints in its Connect session, and neither
removing them nor stopping the session frees their blocks: only the session's expiry does,
at the next garbage collection (Spark's defaults: 60 and 30 minutes). A run makes requests
all along (a long Spark job reattaches every 2 minutes), so only ended runs go idle that
long; a full collection of the server's heap takes about 0.4 s."""


def server_command(
    port: int,
    ui_port: int | None = None,
    *,
    settings: Mapping[str, str] | None = None,
    lake: LocationLike | None = None,
) -> list[str]:
    """`spark-submit` for a Connect server on `port` of loopback, with the local session's
    settings, `loopback_settings` and `RELEASE_SETTINGS` (`settings` override them); with
    `ui_port`, its Spark UI is on there, where a run counts each stage's Spark jobs
    (`chronolake.dagster.spark_jobs`). With the delta-spark backend or a `lake` on a bucket
    it loads what they need (`chronolake.spark.stack`). The token is not here: see
    `server_environment`."""
    conf = {**local_spark_conf(lake), **loopback_settings(SERVER_MASTER).conf, **RELEASE_SETTINGS,
            **(settings or {}), "spark.connect.grpc.binding.port": str(port)}
    if ui_port is not None:
        conf |= {"spark.ui.enabled": "true", "spark.ui.port": str(ui_port)}
    command = [str(SPARK_HOME / "bin" / "spark-submit"), "--master", SERVER_MASTER]
    for key, value in conf.items():
        command += ["--conf", f"{key}={value}"]
    return [*command, "--class", SERVER_CLASS, "--name", "chronolake-connect", "spark-internal"]


def server_environment(token: str) -> dict[str, str]:
    """This process's environment, with `SPARK_HOME` at the pyspark package's Spark, the
    Python its workers run (`worker_python`), the loopback address for its Spark UI
    (`loopback_settings`) and the `token` its clients must bring (`TOKEN_ENV`)."""
    return {**os.environ, **worker_python(), **loopback_settings(SERVER_MASTER).environment,
            "SPARK_HOME": str(SPARK_HOME), TOKEN_ENV: token}


def new_token() -> str:
    """A token for one server: 256 random bits, URL-safe (it goes in an `sc://` URL)."""
    return secrets.token_urlsafe(32)


def without_token(url: str) -> str:
    """`url` without its parameters (`/;token=...`): what may be printed or logged."""
    return url.split("/;", 1)[0]


def free_port() -> int:
    """A TCP port nothing listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def running_connect_server(
    log: Path,
    *,
    settings: Mapping[str, str] | None = None,
    lake: LocationLike | None = None,
) -> Iterator[str]:
    """A Connect server on a free port of loopback (`settings`, `lake` as in `server_command`), its
    output in `log`; yields its URL with a token of its own (`sc://localhost:PORT/;token=...`:
    print `without_token(url)`) once it accepts connections, and stops it (its whole process
    group) on exit."""
    port, ui_port, token = free_port(), free_port(), new_token()
    with log.open("wb") as out:
        server = subprocess.Popen(
            server_command(port, ui_port=ui_port, settings=settings, lake=lake), stdout=out,
            stderr=subprocess.STDOUT,
            env=server_environment(token), start_new_session=True,
        )
    try:
        _wait_for(server, port, log)
        _warm_ui(ui_port)
        yield f"sc://localhost:{port}/;token={token}"
    finally:
        stop_process_group(server)


def _wait_for(server: subprocess.Popen[bytes], port: int, log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        if server.poll() is not None:
            tail = log.read_text(errors="replace")[-2000:]
            raise RuntimeError(f"the Spark Connect server exited with {server.returncode}:\n{tail}")
        try:
            with socket.create_connection(("localhost", port), timeout=1):
                return
        except OSError:
            time.sleep(0.5)
    raise RuntimeError(
        f"the Spark Connect server did not listen on port {port} within "
        f"{START_TIMEOUT_SECONDS:.0f} s; see {log}"
    )


def ui_applications(host: str, port: int | str) -> str:
    """The Spark UI's REST endpoint that lists its application."""
    return f"http://{host}:{port}/api/v1/applications"


def _warm_ui(ui_port: int) -> None:
    """Ask the server's Spark UI once, so its REST API (which starts on its first request,
    ~2 s) is up before the first run counts its stages' jobs there. A UI that does not answer
    within `UI_WARM_TIMEOUT_SECONDS` only leaves those counts out."""
    try:
        with urllib.request.urlopen(ui_applications("localhost", ui_port),
                                    timeout=UI_WARM_TIMEOUT_SECONDS):
            pass
    except OSError:
        pass


def stop_process_group(server: subprocess.Popen[bytes]) -> None:
    """Stop the process group `server` leads (it was started in a session of its own):
    SIGTERM, then SIGKILL after 30 s."""
    if server.poll() is not None:
        return
    os.killpg(server.pid, signal.SIGTERM)
    try:
        server.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()


REMOTE_ENV = "CHRONOLAKE_SPARK_REMOTE"
"""The Spark Connect address a run's Spark session connects to (`resources/`)."""


def run_beside_a_server(
    command: Sequence[str], log: Path, *, lake: LocationLike | None = None
) -> int:
    """Run `command` (`dagster dev`) with a warm engine: a local Connect server started first,
    its URL and token in `CHRONOLAKE_SPARK_REMOTE` for every run the command starts (the
    address printed has no token), and stopped once the command ends. Ctrl-C reaches the
    command, which stops; then the server goes. Returns the command's exit code."""
    with running_connect_server(log, lake=lake) as url:
        print(f"chronolake: Spark Connect server at {without_token(url)}, shared by the runs "
              f"(log: {log})", file=sys.stderr, flush=True)
        process = subprocess.Popen(list(command), env={**os.environ, REMOTE_ENV: url})
        signal.signal(signal.SIGINT, lambda *_: None)  # the terminal sends it to the command
        signal.signal(signal.SIGTERM, lambda *_: process.terminate())
        return process.wait()


def main() -> None:
    """Run a server in the foreground on the port given (else `DEFAULT_PORT`) for the lake
    given (its location decides whether S3A is loaded), serving the
    clients that bring the token in `TOKEN_ENV`, its stderr passed on without the JVM's
    notices (`chronolake.spark.session.JVM_NOTICES`).

    The token comes from the environment, not made here: printed, it would stay in the
    terminal or the service's journal; its clients read it from the same variable.
    """
    port = int(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_PORT
    lake = sys.argv[2] if len(sys.argv) > 2 else None
    token = os.environ.get(TOKEN_ENV, "")
    if not token:
        msg = (
            f"chronolake.spark.connect_server: no token for the server's clients: {TOKEN_ENV} is "
            "not set. Export one in this shell and in its clients' (pyspark reads it there "
            "when the sc:// URL has none), e.g.\n"
            f"  export {TOKEN_ENV}=\"$(python -c 'import secrets; "
            "print(secrets.token_urlsafe(32))')\""
        )
        sys.exit(msg)
    server = subprocess.Popen(
        server_command(port, ui_port=free_port(), lake=lake), stderr=subprocess.PIPE,
        env=server_environment(token),
    )
    # Ctrl-C reaches the server from the terminal; a TERM sent to this process is passed on.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, lambda *_: server.terminate())
    assert server.stderr is not None, "opened with stderr=PIPE"
    pass_on_stderr(server.stderr)
    code = server.wait()
    sys.exit(128 - code if code < 0 else code)


if __name__ == "__main__":
    main()
