"""Small documents (catalog entries, checkpoints) written so a crash leaves old or new."""

from __future__ import annotations

import os
from pathlib import Path

from chronolake.lake.scratch import TEMP_PREFIX, scratch_name, sweep


def write_text_atomically(path: Path, text: str) -> None:
    """Write via a temporary file in the same folder, fsync, then rename over `path`.

    The temporary files that killed writers left in that folder go first (`sweep`).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    sweep(path.parent)
    tmp = path.parent / scratch_name(TEMP_PREFIX)
    with tmp.open("x") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
