"""moto's S3 server with its request log kept, and the requests counted by kind between marks.

moto's server (`python -m moto.server`) logs every request it answers through werkzeug, one
line each on stderr: `127.0.0.1 - - [date] "GET /lake/x?list-type=2&prefix=y HTTP/1.1" 200 -`.
`counted_moto_s3` starts it with stderr to a file, creates `BUCKET`, sets the environment a
user sets for an S3-compatible store (which obstore and delta-rs read, and which
`chronolake.spark.stack` turns into S3A's settings for Spark); `RequestLog.take()` counts the lines
written since the last call.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qs

from chronolake.spark.session import environment_set

BUCKET = "lake"
KINDS = ("GET", "LIST", "PUT", "HEAD", "DELETE", "POST")
"""Request kinds counted: LIST is a GET with `list-type` or `prefix` in its query (or of the
bucket itself); PUT includes copies (S3A's rename) and conditional puts (put-if-absent);
POST is a multi-object delete (`?delete`) or a multipart upload's start or end."""
_LINE = re.compile(r'"(?P<verb>[A-Z]+) (?P<target>.*) HTTP/[\d.]+" (?P<status>\d{3})')
_ANSI = re.compile(r"\x1b\[[0-9;]*m")  # werkzeug colours 4xx lines
_SETTLE_S = 0.3
"""Time left for requests in flight to be logged before a count (werkzeug logs a request as
it sends the response's status, so a client that has its answer has been logged)."""


_LIST_PARAMS = {"list-type", "prefix", "delimiter", "max-keys", "marker", "continuation-token",
                "start-after", "encoding-type", "fetch-owner"}


def request_kind(verb: str, target: str) -> str:
    """The kind of one logged request (`KINDS`), from its verb and its path and query."""
    path, _, query = target.partition("?")
    params = set(parse_qs(query, keep_blank_values=True))
    of_bucket = "/" not in path.strip("/")
    if verb == "GET" and ("list-type" in params or "prefix" in params
                          or (of_bucket and params <= _LIST_PARAMS)):
        return "LIST"
    return verb


_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def request_target(kind: str, target: str) -> str:
    """What one request was for, with names made generic (numbers and UUIDs as `N`): a
    LIST by its prefix's last two parts, any other by its object's, e.g. `GET
    _delta_log/N.json`, `HEAD state/part-N-N-cN.snappy.parquet`, `LIST _delta_log/`."""
    path, _, query = target.partition("?")
    if kind == "LIST":
        prefixes = parse_qs(query).get("prefix", [""])
        path = prefixes[0] or path
    parts = [part for part in path.split("/") if part][-2:]
    return f"{kind} " + re.sub(r"\d+", "N", _UUID.sub("N", "/".join(parts)))


@dataclass
class RequestLog:
    """The server's log file and how far it has been counted."""

    path: Path
    endpoint: str
    offset: int = 0
    details: Counter[str] = field(default_factory=Counter)
    targets: Counter[str] = field(default_factory=Counter)
    """Requests by `request_target` since the last `take`, which moves them to its
    `by_target` (the 20 most frequent)."""

    def take(self) -> dict[str, int]:
        """Requests logged since the last `take` (or the start), by kind, with `total`, and
        `not_found` (404s: a HEAD or GET of an absent object) and `precondition_failed` (412:
        a put-if-absent that lost), and `by_target`: the most frequent `request_target`s."""
        time.sleep(_SETTLE_S)
        with self.path.open("rb") as log:
            log.seek(self.offset)
            text = log.read()
        complete = text[: text.rfind(b"\n") + 1]
        self.offset += len(complete)
        counts = Counter({kind: 0 for kind in KINDS})
        statuses: Counter[str] = Counter()
        for line in _ANSI.sub("", complete.decode("utf-8", "replace")).splitlines():
            found = _LINE.search(line)
            if found is None or found["target"].startswith("/moto-api"):
                continue
            kind = request_kind(found["verb"], found["target"])
            counts[kind] += 1
            self.targets[request_target(kind, found["target"])] += 1
            statuses[found["status"]] += 1
            if kind == "POST":
                self.details[f"POST ?{found['target'].partition('?')[2]}"] += 1
        targets, self.targets = self.targets, Counter()
        return {**counts, "total": sum(counts.values()), "not_found": statuses["404"],
                "precondition_failed": statuses["412"],
                "by_target": dict(targets.most_common(20))}


@contextmanager
def counted_moto_s3(folder: Path) -> Iterator[RequestLog]:
    """moto's S3 server on a free port of loopback, its request log in `folder`, `BUCKET`
    created, and the AWS environment pointing at it in `os.environ` meanwhile; yields the
    log, counted from after the bucket's creation."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    endpoint = f"http://127.0.0.1:{port}"
    log_path = folder / "moto.log"
    with log_path.open("wb") as stderr:
        server = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
            stdout=subprocess.DEVNULL, stderr=stderr, env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    settings = {"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "test",
                "AWS_SECRET_ACCESS_KEY": "test", "AWS_REGION": "us-east-1",
                "AWS_ALLOW_HTTP": "true"}
    try:
        _wait_for(endpoint, server)
        urllib.request.urlopen(
            urllib.request.Request(f"{endpoint}/{BUCKET}", method="PUT"), timeout=30
        ).read()
        with environment_set(settings):
            log = RequestLog(log_path, endpoint)
            log.take()  # the start's own requests
            yield log
    finally:
        server.terminate()
        server.wait(30)


def _wait_for(endpoint: str, server: subprocess.Popen) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            urllib.request.urlopen(f"{endpoint}/moto-api/data.json", timeout=5).read()
            return
        except OSError:
            if time.monotonic() > deadline or server.poll() is not None:
                raise
            time.sleep(0.2)
