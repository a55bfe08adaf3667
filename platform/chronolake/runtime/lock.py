"""One run per derived table at a time: an exclusive lock file under `_chronolake/locks/`.

The lock is created atomically (`O_CREAT | O_EXCL`), so of two runs started
together exactly one gets it; the other fails at once with a clear error and
changes nothing. A lock left behind by a killed run (same host, process gone)
is taken over.
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from chronolake.errors import RunError


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _stale(holder: dict[str, object]) -> bool:
    return holder.get("host") == socket.gethostname() and not _alive(int(holder.get("pid", -1)))


def _try_create(path: Path) -> bool:
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w") as handle:
        holder = {"pid": os.getpid(), "host": socket.gethostname(), "started": time.time()}
        json.dump(holder, handle)
    return True


def _holder(path: Path) -> dict[str, object]:
    try:
        return json.loads(path.read_text() or "{}")
    except (OSError, json.JSONDecodeError):
        return {}


@contextmanager
def run_lock(lock_dir: Path, name: str) -> Iterator[None]:
    """Hold the run lock of derived table `name` for the duration of the block."""
    lock_dir.mkdir(parents=True, exist_ok=True)
    path = lock_dir / f"{name}.lock"
    if not _try_create(path):
        holder = _holder(path)
        if holder and _stale(holder):
            path.unlink(missing_ok=True)
        if not _try_create(path):
            raise RunError(
                f"another run of {name!r} is in progress (pid {holder.get('pid', '?')} on "
                f"{holder.get('host', '?')}); this run changed nothing. Wait for it to finish, "
                f"or if that process is gone, delete {path}"
            )
    try:
        yield
    finally:
        path.unlink(missing_ok=True)
