"""Helpers for the browser test: a `dagster dev` server started and stopped by its process id,
runs launched on it as the UI launches them, and a headless Debian Chromium driven by
Playwright.

Nothing here downloads a browser: Playwright launches the system's `/usr/bin/chromium` (which
`./dev test` installs), with the flags that keep it from reaching for the network.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from dagster import DagsterRunStatus
from dagster_graphql import DagsterGraphQLClient
from playwright.sync_api import BrowserContext, sync_playwright

CHROMIUM = Path("/usr/bin/chromium")
# Without these, Chromium on a machine with no network hangs on connection attempts.
CHROMIUM_ARGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass(frozen=True)
class DagsterDevServer:
    """A running `dagster dev`: its process (leader of its own process group) and its URL."""

    process: subprocess.Popen[bytes]
    url: str
    log_path: Path

    @property
    def pid(self) -> int:
        return self.process.pid


FIRST_PARTITION_QUERY = """
query FirstPartition($selector: PipelineSelector!, $assets: [AssetKeyInput!]) {
  pipelineOrError(params: $selector) {
    ... on Pipeline {
      partitionKeysOrError(limit: 1, selectedAssetKeys: $assets) { partitionKeys }
    }
  }
}
"""
RUN_ENDED = (DagsterRunStatus.SUCCESS, DagsterRunStatus.FAILURE, DagsterRunStatus.CANCELED)


def launch_and_wait(
    server: DagsterDevServer, job: str, *, location: str, assets: Sequence[str] = (),
    timeout_s: float = 300.0,
) -> str:
    """Launch `job` (or only its `assets`, with their checks) on `server` through its GraphQL
    API, as the UI's launch and materialize buttons do, and wait until the run succeeded;
    returns its id. Partitioned assets are launched for their first partition: a run brings
    its tables up to date, whichever partition it was launched for."""
    address = urlsplit(server.url)
    client = DagsterGraphQLClient(address.hostname or "127.0.0.1", port_number=address.port)
    selector = {"repositoryLocationName": location, "repositoryName": "__repository__",
                "pipelineName": job}
    keys = [{"path": [name]} for name in assets] or None
    found = _graphql(server, FIRST_PARTITION_QUERY, {"selector": selector, "assets": keys})
    partitions = found["pipelineOrError"].get("partitionKeysOrError", {}).get("partitionKeys")
    run_id = client.submit_job_execution(
        job, repository_location_name=location, asset_selection=list(assets) or None,
        tags={"dagster/partition": partitions[0]} if partitions else None,
    )
    deadline = time.monotonic() + timeout_s
    while (status := client.get_run_status(run_id)) not in RUN_ENDED:
        if time.monotonic() > deadline:
            msg = f"run {run_id} of {job} still {status.value} after {timeout_s:.0f} s"
            raise TimeoutError(msg)
        time.sleep(0.5)
    assert status is DagsterRunStatus.SUCCESS, (
        f"run {run_id} of {job}: {status.value}; see {server.url}/runs/{run_id}"
    )
    return run_id


def _graphql(server: DagsterDevServer, query: str, variables: dict[str, object]
             ) -> dict[str, Any]:
    """The data of a GraphQL query to `server`'s API."""
    body = json.dumps({"query": query, "variables": variables}).encode()
    request = urllib.request.Request(
        f"{server.url}/graphql", data=body, headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=60) as answer:
        reply = json.load(answer)
    assert "errors" not in reply, f"GraphQL errors from {server.url}: {reply['errors']}"
    return dict(reply["data"])


def process_group_alive(pgid: int) -> bool:
    """Whether a process of the group `pgid` still runs."""
    return bool(process_group_members(pgid))


def process_group_members(pgid: int) -> list[int]:
    """The running processes of the group `pgid`, zombies aside (read from /proc).

    Zombies are left out: a container whose init does not reap orphans keeps them forever.
    """
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            # after "pid (command)": state, parent pid, process group id, ...
            state, _, group = stat.read_text().rsplit(")", 1)[1].split()[:3]
        except OSError:  # the process ended while we looked
            continue
        if int(group) == pgid and state != "Z":
            members.append(int(stat.parent.name))
    return members


@contextmanager
def dagster_dev(
    root: Path, *, env: dict[str, str], log_path: Path, startup_timeout_s: float = 180.0
) -> Iterator[DagsterDevServer]:
    """Run `chronolake dev` (`dagster dev -w workspace.yaml` beside a warm Spark Connect
    server), as the README starts it, from `root` on a free port until the block ends.

    It runs in its own session, so the webserver, the daemon and the code server it spawns
    form one process group, which is stopped by its id (SIGTERM, then SIGKILL) on exit; the
    Connect server is stopped by `chronolake dev` once `dagster dev` ends. The output goes to
    `log_path`.
    """
    port = free_port()
    chronolake = Path(sys.executable).with_name("chronolake")  # the venv's, next to this Python
    command = [str(chronolake), "dev", "-p", str(port), "-h", "127.0.0.1"]
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            command, cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
    server = DagsterDevServer(process=process, url=f"http://127.0.0.1:{port}", log_path=log_path)
    try:
        _wait_until_serving(server, timeout_s=startup_timeout_s)
        yield server
    finally:
        stop_process_group(process)


def stop_process_group(process: subprocess.Popen[bytes], *, grace_s: float = 20.0) -> None:
    """Stop the process group led by `process`: SIGTERM, wait up to `grace_s`, then SIGKILL."""
    pgid = process.pid
    if not process_group_alive(pgid):
        process.wait(timeout=5)
        return
    os.killpg(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        process.poll()  # reap the leader so it does not linger as a zombie
        if not process_group_alive(pgid):
            break
        time.sleep(0.2)
    else:
        os.killpg(pgid, signal.SIGKILL)
        # The kernel ends killed processes asynchronously: the group is gone within moments,
        # not at once
        deadline = time.monotonic() + 10
        while process_group_alive(pgid) and time.monotonic() < deadline:
            process.poll()
            time.sleep(0.05)
    process.wait(timeout=10)


def _wait_until_serving(server: DagsterDevServer, *, timeout_s: float) -> None:
    """Poll `/server_info` until the webserver answers; fail early if `dagster dev` exits."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            msg = (
                f"dagster dev exited with code {server.process.returncode} before serving; "
                f"its output ends with:\n{_tail(server.log_path)}"
            )
            raise RuntimeError(msg)
        try:
            with urllib.request.urlopen(f"{server.url}/server_info", timeout=2) as answer:
                if answer.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.5)
    msg = (
        f"dagster dev did not answer on {server.url}/server_info within {timeout_s:.0f} s; "
        f"its output ends with:\n{_tail(server.log_path)}"
    )
    raise TimeoutError(msg)


def _tail(path: Path, *, lines: int = 30) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


@contextmanager
def chromium_context(
    user_data_dir: Path, *, timeout_ms: float = 30_000
) -> Iterator[BrowserContext]:
    """A headless Debian Chromium with a fresh profile in `user_data_dir`, driven by Playwright."""
    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(user_data_dir),
            executable_path=str(CHROMIUM),
            headless=True,
            args=list(CHROMIUM_ARGS),
            viewport={"width": 1920, "height": 2600},  # big enough for the whole asset graph
            timezone_id="UTC",
            locale="en-US",
            timeout=timeout_ms,
        )
        context.set_default_timeout(timeout_ms)
        try:
            yield context
        finally:
            context.close()
