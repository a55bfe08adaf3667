"""Small documents (catalog entries, checkpoints, leases) written so a crash leaves old or new.

Two ways: `write_text_atomically` replaces a document whole; `write_text_if_absent` creates
one only if nothing is there yet (put-if-absent), which is what a commit point needs: of two
writers of the same name, exactly one succeeds, with no lock between them. On a local disk
that is a hard link, which fails when its name exists; an object store's conditional put
(`If-None-Match: *`) is the same operation.
"""

from __future__ import annotations

import os
from pathlib import Path

from chronolake.lake.scratch import TEMP_PREFIX, scratch_name, sweep


def write_text_atomically(path: Path, text: str) -> None:
    """Write via a temporary file in the same folder, fsync, then rename over `path`.

    The temporary files that killed writers left in that folder go first (`sweep`).
    """
    tmp = _written_beside(path, text)
    os.replace(tmp, path)


def write_text_if_absent(path: Path, text: str) -> bool:
    """Create `path` holding `text`, whole, unless it exists; whether this call created it."""
    tmp = _written_beside(path, text)
    try:
        os.link(tmp, path)
    except FileExistsError:
        return False
    finally:
        tmp.unlink(missing_ok=True)
    return True


def _written_beside(path: Path, text: str) -> Path:
    """`text` in a new temporary file next to `path`, on disk (fsync)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    sweep(path.parent)
    tmp = path.parent / scratch_name(TEMP_PREFIX)
    with tmp.open("x") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    return tmp
