"""Writing one Delta commit whose actions delta-rs's Python API cannot express.

delta-rs commits `add` and `remove` actions, but not the `cdc` actions of a
copy-on-write update, without which a reader of the change data feed would
take every row of a rewritten file as deleted and re-inserted. This module
writes such a commit's `_delta_log/<version>.json` itself, following the Delta
protocol (commitInfo, txn, remove, add and cdc lines), with a put-if-absent
write: the version file is linked into place, which fails when it exists, so of
two writers of the same version exactly one succeeds.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote
from uuid import uuid4

from chronolake.lake._log import log_file_name


class CommitConflict(Exception):
    """Another writer committed the version first."""


@dataclass(frozen=True, slots=True)
class DataFile:
    """A file of the commit, relative to the table root."""

    path: str
    size: int
    rows: int = 0


def write_commit(
    root: Path,
    version: int,
    *,
    adds: Sequence[DataFile],
    removes: Sequence[DataFile],
    change_data: Sequence[DataFile],
    app_id: str,
    app_version: int,
    info: Mapping[str, str],
    operation: str,
) -> int:
    """Commit `version` of the table at `root`; `CommitConflict` when it already exists."""
    now = int(time.time() * 1000)
    lines = [
        {"commitInfo": {"timestamp": now, "operation": operation, "operationParameters": {},
                        "clientVersion": "chronolake", **info}},
        {"txn": {"appId": app_id, "version": app_version, "lastUpdated": now}},
        *({"remove": {"path": quote(f.path), "deletionTimestamp": now, "dataChange": True,
                      "extendedFileMetadata": True, "partitionValues": {}, "size": f.size}}
          for f in removes),
        *({"add": {"path": quote(f.path), "partitionValues": {}, "size": f.size,
                   "modificationTime": now, "dataChange": True,
                   "stats": json.dumps({"numRecords": f.rows})}}
          for f in adds),
        *({"cdc": {"path": quote(f.path), "partitionValues": {}, "size": f.size,
                   "dataChange": False}}
          for f in change_data),
    ]
    log = root / "_delta_log"
    staged = log / f".{log_file_name(version)}.{uuid4().hex}.tmp"
    staged.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    try:
        os.link(staged, log / log_file_name(version))  # put-if-absent
    except FileExistsError:
        raise CommitConflict(version) from None
    finally:
        staged.unlink(missing_ok=True)
    return version
