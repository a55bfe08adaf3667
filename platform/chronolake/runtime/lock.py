"""One run per derived table at a time: an exclusive lock under `_chronolake/locks/`.

The lock is an advisory `flock` on `<table>.lock`, taken without waiting: of two
runs started together exactly one gets it; the other fails at once with a clear
error, before it has read or written anything. The operating system releases
the lock when its holder exits, however it exits (SIGKILL included), so a
crashed run never leaves a stale lock behind and no takeover logic is needed.
The file itself stays; it only names the current holder for the error message.
(`flock` is local to one host, like the file system the lake lives on.)
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from chronolake.errors import RunError


def lock_path(lock_dir: Path, name: str) -> Path:
    """The lock file of derived table `name`."""
    return lock_dir / f"{name}.lock"


@contextmanager
def run_lock(lock_dir: Path, name: str) -> Iterator[None]:
    """Hold the run lock of derived table `name` for the duration of the block.

    Raises `RunError` at once when another process holds it.
    """
    lock_dir.mkdir(parents=True, exist_ok=True)
    path = lock_path(lock_dir, name)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(path)
            msg = (
                f"another run of {name!r} is in progress (pid {holder.get('pid', '?')} on "
                f"{holder.get('host', '?')}, holding {path}); expected no concurrent run of "
                "the same derived table; this run read and changed nothing: wait for the "
                "other run to finish, then run again"
            )
            raise RunError(msg) from None
        _write_holder(fd)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def _write_holder(fd: int) -> None:
    holder = {"pid": os.getpid(), "host": socket.gethostname(), "started": time.time()}
    os.ftruncate(fd, 0)
    os.pwrite(fd, json.dumps(holder).encode(), 0)


def _holder(path: Path) -> dict[str, object]:
    try:
        return json.loads(path.read_text() or "{}")
    except (OSError, json.JSONDecodeError):
        return {}
