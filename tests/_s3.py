"""An S3 emulator for tests: moto's server on loopback, and the standard AWS environment that
points obstore, delta-rs and S3A (through `chronolake.spark.stack`) at it."""

from __future__ import annotations

import socket
import ssl
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from chronolake.spark.session import environment_set

BUCKET = "lake"
"""The bucket the emulator starts with."""
TEST_LAKE_ENV = "CHRONOLAKE_TEST_LAKE"
"""A lake URI (a bucket) that a pytest process's tests use: its Spark session can reach it
(`conftest.spark` loads S3A for it)."""


@contextmanager
def moto_server(*, tls: bool = False, folder: Path | None = None) -> Iterator[str]:
    """moto's server (S3, DynamoDB, ...) on a free port of loopback, over TLS with a
    certificate of its own making when `tls` (run in `folder`, where it writes it); yields its
    endpoint once it answers."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port),
         *(["--ssl"] if tls else [])],
        cwd=folder, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    endpoint = f"{'https' if tls else 'http'}://127.0.0.1:{port}"
    unverified = ssl.create_default_context()
    unverified.check_hostname = False
    unverified.verify_mode = ssl.CERT_NONE
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{endpoint}/moto-api/data.json", timeout=5,
                                       context=unverified if tls else None).read()
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise
                time.sleep(0.2)
        yield endpoint
    finally:
        server.terminate()
        server.wait(30)


@contextmanager
def moto_s3() -> Iterator[str]:
    """moto's S3 server on a free port of loopback with `BUCKET` created, and the environment
    a user sets for an S3-compatible store (endpoint, credentials, region, plain HTTP) in
    `os.environ` meanwhile, so that subprocesses inherit it; yields the endpoint."""
    with moto_server() as endpoint:
        urllib.request.urlopen(
            urllib.request.Request(f"{endpoint}/{BUCKET}", method="PUT"), timeout=30
        ).read()
        settings = {"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "test",
                    "AWS_SECRET_ACCESS_KEY": "test", "AWS_REGION": "us-east-1",
                    "AWS_ALLOW_HTTP": "true"}
        with environment_set(settings):
            yield endpoint
