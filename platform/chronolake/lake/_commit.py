"""Writing one Delta commit whose actions delta-rs's Python API cannot express.

delta-rs commits `add` and `remove` actions, but not the `cdc` actions of an
update, without which a reader of the change data feed would take every row of
a rewritten file as deleted and re-inserted, nor deletion vectors. This module
writes such a commit's `_delta_log/<version>.json` itself, following the Delta
protocol (commitInfo, protocol and metaData when a feature is enabled, txn,
remove, add with their deletion vectors, and cdc lines), with a put-if-absent
write (`Storage.create_text`), so of two writers of the same version exactly one
succeeds, on a local disk as on an object store.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from urllib.parse import quote

from chronolake.lake.delta_log import log_file_name
from chronolake.lake.storage import Storage


class CommitConflict(Exception):
    """Another writer committed the version first."""


@dataclass(frozen=True, slots=True)
class DataFile:
    """A file of the commit, relative to the table root; `deletion_vector` is the descriptor
    of the rows deleted from it (an `add` or `remove` of a file and its deletion vector);
    `bounds` its columns' `minValues`, `maxValues` and `nullCount` (`file_stats`) when known."""

    path: str
    size: int
    rows: int = 0
    deletion_vector: Mapping[str, object] | None = None
    bounds: Mapping[str, object] = field(default_factory=dict)

    def entry(self) -> dict[str, object]:
        """The fields an `add` or `remove` of the file logs."""
        entry: dict[str, object] = {"path": quote(self.path), "partitionValues": {},
                                    "size": self.size, "dataChange": True}
        if self.deletion_vector is not None:
            entry["deletionVector"] = dict(self.deletion_vector)
        return entry


def write_commit(
    table: Storage,
    version: int,
    *,
    adds: Sequence[DataFile],
    removes: Sequence[DataFile],
    change_data: Sequence[DataFile],
    app_id: str,
    app_version: int,
    info: Mapping[str, str],
    operation: str,
    table_actions: Sequence[Mapping[str, object]] = (),
) -> int:
    """Commit `version` of `table`; `CommitConflict` when it already exists.
    `table_actions` (a `protocol` and `metaData` that enable a feature) come first."""
    now = int(time.time() * 1000)
    lines = [
        {"commitInfo": {"timestamp": now, "operation": operation, "operationParameters": {},
                        "clientVersion": "chronolake", **info}},
        *table_actions,
        {"txn": {"appId": app_id, "version": app_version, "lastUpdated": now}},
        *({"remove": {**f.entry(), "deletionTimestamp": now, "extendedFileMetadata": True}}
          for f in removes),
        *({"add": {**f.entry(), "modificationTime": now, "stats": json.dumps(
            {"numRecords": f.rows, **f.bounds}
            | ({"tightBounds": False} if f.deletion_vector else {}))}}
          for f in adds),
        *({"cdc": {"path": quote(f.path), "partitionValues": {}, "size": f.size,
                   "dataChange": False}}
          for f in change_data),
    ]
    text = "\n".join(json.dumps(line) for line in lines) + "\n"
    if not table.create_text(f"_delta_log/{log_file_name(version)}", text):
        raise CommitConflict(version)
    return version
