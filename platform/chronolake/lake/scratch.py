"""Scratch a writer makes next to what it writes, and its removal once that writer is gone.

Every write into the lake goes through scratch first: Spark writes a table's new
files into a staging folder inside the table (`.chronolake-staging-…`), and on a
local disk a small document or a Delta commit is first written to a temporary file
(`<name>#<n>`, object_store's staged upload; delta-rs's `_commit_….json.tmp`). A
writer killed with SIGKILL cannot remove its scratch, so every writer first sweeps
the folder it writes into (`sweep`): the next write of a table removes what killed
attempts left there. An object store has no scratch of this kind: an upload that
was cut off leaves nothing.

No lock is needed for that to be safe, so it holds between processes that share
nothing but the lake: a scratch name says who made it (`Writer`: host, process id,
the process's start, the time it was made), and it is removed only when that
writer is provably gone. On the same host that is checked (no such process, a
zombie, or a later process that reused the id); scratch of another host, or of
another writer (object_store's and delta-rs's temporary files, or names of older
chronolake versions), is removed once older than `FOREIGN_SCRATCH_TTL_S`.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import time
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from uuid import uuid4

STAGING_PREFIX = ".chronolake-staging-"
TEMP_PREFIX = ".chronolake-tmp-"
SCRATCH_PREFIXES = (STAGING_PREFIX, TEMP_PREFIX)
FOREIGN_SCRATCH_TTL_S = 24 * 3600
"""How old scratch whose writer cannot be checked must be before it is removed: longer than
any write runs."""

_FOREIGN_TEMP = re.compile(r"_commit_[0-9a-f-]+\.json\.tmp|.+#\d+")
"""delta-rs's temporary commits, and object_store's staged uploads (`<name>#<n>`)."""
_GONE_STATES = frozenset("ZX")  # zombie, dead: killed, not yet reaped by its parent


@dataclass(frozen=True)
class Writer:
    """Who made a scratch name: `host` (with its process namespace), `pid`, `started` (a token
    of when that process started, "" where the system does not say) and `made_ms` (when)."""

    host: str
    pid: int
    started: str
    made_ms: int

    @classmethod
    def current(cls) -> Writer:
        return cls.of_process(os.getpid())

    def tag(self) -> str:
        return f"{self.host}.{self.pid}.{self.started or '-'}.{self.made_ms}"

    @classmethod
    def parse(cls, tag: str) -> Writer | None:
        """The writer a scratch name's tag names; None for a name this module did not make."""
        parts = tag.split(".")
        if len(parts) != 4 or not (parts[1].isdigit() and parts[3].isdigit()):
            return None
        host, pid, started, made_ms = parts
        return cls(host, int(pid), "" if started == "-" else started, int(made_ms))

    @classmethod
    def of_process(cls, pid: int) -> Writer:
        """Process `pid` of this host, as it runs now (another process of the same id later
        is another writer)."""
        return cls(_host(), pid, _process_start(pid) or "", int(time.time() * 1000))

    def on_this_host(self) -> bool:
        return self.host == _host()

    def is_gone(self, now_s: float) -> bool:
        """Whether this writer can no longer be writing (see the module's docstring)."""
        if not self.on_this_host():
            return now_s - self.made_ms / 1000 > FOREIGN_SCRATCH_TTL_S
        return self.ended_here()

    def ended_here(self) -> bool:
        """Whether this writer ran on this host and runs no more (False for another host's,
        which cannot be checked)."""
        if not self.on_this_host():
            return False
        started = _process_start(self.pid)
        return started is None or (bool(self.started) and started != self.started)


def scratch_name(prefix: str) -> str:
    """A new scratch name for this process: `prefix`, its writer's tag, and a unique suffix."""
    return f"{prefix}{Writer.current().tag()}.{uuid4().hex}"


def staging_name() -> str:
    """The name of a new staging folder inside a table, for Spark's files of one write."""
    return scratch_name(STAGING_PREFIX)


def sweep(folder: Path) -> list[Path]:
    """Remove the scratch in `folder` (not below it) whose writer is gone; returns what went.
    A folder that does not exist has none."""
    try:
        entries = list(os.scandir(folder))
    except FileNotFoundError:
        return []
    now = time.time()
    removed = []
    for entry in entries:
        if not _is_debris(entry, now):
            continue
        path = Path(entry.path)
        if entry.is_dir(follow_symlinks=False):
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
        removed.append(path)
    return removed


def writer_of(name: str) -> Writer | None:
    """The writer a scratch name of this module names; None for any other name."""
    prefix = next((p for p in SCRATCH_PREFIXES if name.startswith(p)), None)
    return None if prefix is None else Writer.parse(name.removeprefix(prefix).rsplit(".", 1)[0])


def _is_debris(entry: os.DirEntry[str], now_s: float) -> bool:
    writer = writer_of(entry.name)
    if writer is not None:
        return writer.is_gone(now_s)
    if entry.name.startswith(SCRATCH_PREFIXES):  # an older chronolake's name
        return _older_than_ttl(entry, now_s)
    return _FOREIGN_TEMP.fullmatch(entry.name) is not None and _older_than_ttl(entry, now_s)


def _older_than_ttl(entry: os.DirEntry[str], now_s: float) -> bool:
    try:
        return now_s - entry.stat(follow_symlinks=False).st_mtime > FOREIGN_SCRATCH_TTL_S
    except FileNotFoundError:
        return False  # removed meanwhile


@cache
def _host() -> str:
    """This host's name, with its boot's id and the process namespace where it has them, as
    one dot-free token: machines sharing a bucket may share a host name (and the first
    namespace's number), never a boot id; containers sharing a host see different process
    ids."""
    marks = []
    for source in ("/proc/sys/kernel/random/boot_id", "/proc/self/ns/pid"):
        try:
            text = Path(source).read_text() if "random" in source else os.readlink(source)
        except OSError:
            continue
        marks.append(re.sub(r"[^A-Za-z0-9]", "", text.strip().removeprefix("pid:"))[:12])
    name = re.sub(r"[^A-Za-z0-9-]", "-", socket.gethostname()) or "host"
    return "-".join([name, *marks])


def _process_start(pid: int) -> str | None:
    """When process `pid` started (clock ticks after boot, from /proc), "" where there is no
    /proc; None when no such process runs (or only its zombie)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        if Path("/proc/self/stat").exists():
            return None
        return _without_proc(pid)
    except (OSError, IndexError):
        return ""
    return None if fields[0] in _GONE_STATES else fields[19]


def _without_proc(pid: int) -> str | None:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        pass  # it runs, as another user
    return ""
