"""The files a write left in a table that no commit names, and their removal.

A write puts its data files into the table's folder before its commit names them: Delta's
JVM writer (delta-spark) writes them there directly, and the delta-rs backend moves them in
from its staging folder. A writer killed in between leaves files no reader ever sees, which
nobody else knows to remove (Delta's VACUUM would, days later). Delta's writer can leave one
when nothing failed too: Spark's first task writes a file even when it has no rows, and
Delta commits no empty file.

So each write marks the table first (`writing_in_place`): a marker in the table's folder
`.chronolake-writes/` names the version it started from and its writer
(`chronolake.lake.scratch.Writer`). A write that ended (its writer gone, or the marker says
so) is collected by the next write, or by itself: the files stored since its marker that no
commit after its version names (`add`, `remove` and `cdc` files, deletion vector files) are
removed, then the marker. While any other writer may still be writing, nothing is removed,
since its files have no commit yet.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import PurePosixPath
from urllib.parse import unquote

from chronolake.lake.deletion_vectors import vector_file
from chronolake.lake.delta_log import log_file_name
from chronolake.lake.log_reader import LOG, latest_version, newest_version, read_commits
from chronolake.lake.scratch import Writer, scratch_name
from chronolake.lake.storage import STORAGE_ERRORS, Storage, StoredObject

MARKERS = ".chronolake-writes"
"""The folder of a table's markers: hidden from Spark's and Delta's readers, and listed apart
from the table's files, so that a write that finds no marker lists nothing else."""
_ENDED = "ended"
CLOCK_TIE_MS = 2_000
"""How close a file's time may be to a marker's and still be older: a store's times are
coarse (S3 keeps seconds), so commits this close before a marker are counted as after it."""


@dataclass(frozen=True, slots=True)
class WriteMarker:
    """A write into a table: the version it started from, who wrote, when it was marked."""

    key: str
    version: int
    writer: Writer
    marked_ms: int

    @classmethod
    def parse(cls, stored: StoredObject) -> WriteMarker | None:
        """The marker `stored` is, or None for any other object."""
        folder, _, name = stored.key.rpartition("/")
        if folder != MARKERS:
            return None
        version, _, rest = name.partition("_")
        writer = Writer.parse(rest.rsplit(".", 1)[0])
        if writer is None or not version.lstrip("-").isdigit():
            return None
        return cls(stored.key, int(version), writer, stored.modified_ms)


@contextmanager
def writing_in_place(table: Storage, *, leaves_uncommitted: bool = False) -> Iterator[None]:
    """Mark `table` for a write that puts files into it, after removing what writes that
    ended left (`_collect_ended`). A write that fails, or whose writer leaves files its
    commit does not name (`leaves_uncommitted`: Spark's first task writes a file even when it
    has no rows, and Delta commits no empty file), has its own files collected at once."""
    _collect_ended(table)
    before = latest_version(table)
    marker = f"{MARKERS}/{scratch_name(f'{-1 if before is None else before}_')}"
    table.write_text(marker, "")
    try:
        yield
    except BaseException:
        with suppress(*STORAGE_ERRORS):  # the write's own error is the one to report
            _end(table, marker)
        raise
    if leaves_uncommitted:
        _end(table, marker)
    else:
        table.delete(marker)


def _collect_ended(table: Storage, *, ended: str | None = None) -> None:
    """Remove the files that ended writes left uncommitted in `table` (their writer is gone,
    or said it had ended; `ended` is such a marker), and their markers; nothing while another
    writer may be writing."""
    markers = [m for m in map(WriteMarker.parse, table.objects(MARKERS)) if m is not None]
    now = time.time()
    done = [m for m in markers if m.key == ended or m.writer.is_gone(now)
            or table.read_text(m.key) == _ENDED]
    if not done or len(done) < len(markers):
        return
    objects = table.objects()
    since_ms = min(m.marked_ms for m in done) - CLOCK_TIE_MS
    named = _named_since(table, min(m.version for m in done), since_ms)
    abandoned = [o.key for o in objects
                 if o.modified_ms >= since_ms and _is_data(o.key) and o.key not in named]
    stored = {o.key for o in objects}
    checksums = [key for key in map(_checksum_of, abandoned) if key in stored]
    for key in [*abandoned, *checksums, *(m.key for m in done)]:
        table.delete(key)


def _end(table: Storage, marker: str) -> None:
    """Collect what the write of `marker` left; while another writer is writing, say in the
    marker that this write has ended, for a later write to collect."""
    _collect_ended(table, ended=marker)
    if table.exists(marker):
        table.write_text(marker, _ENDED)


def _named_since(table: Storage, version: int, since_ms: int) -> set[str]:
    """The files named by the commits after `version`, and by the commits up to it that were
    stored at or after `since_ms`."""
    stored = {o.key.removeprefix(f"{LOG}/"): o.modified_ms for o in table.objects(LOG)}
    latest = newest_version(stored)
    if latest is None:
        return set()
    first = version + 1
    while first > 0 and stored.get(log_file_name(first - 1), 0) >= since_ms:
        first -= 1
    named: set[str] = set()
    for commit in read_commits(table, range(first, latest + 1), set(stored)).values():
        for action in commit.actions:
            named.add(unquote(action.path))
            if action.deletion_vector is not None and (dv := vector_file(
                    action.deletion_vector)) is not None:
                named.add(dv)
    return named


def _checksum_of(key: str) -> str:
    """The checksum file Hadoop's local filesystem writes beside a file (`.<name>.crc`)."""
    path = PurePosixPath(key)
    return str(path.with_name(f".{path.name}.crc"))


def _is_data(key: str) -> bool:
    """Whether `key` is a file a write puts into a table: not the log, nor scratch or
    markers (hidden names), which have owners of their own."""
    parts = PurePosixPath(key).parts
    return parts[0] != LOG and not any(p.startswith(".") for p in parts)
