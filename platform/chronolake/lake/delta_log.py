"""The Delta transaction log, one commit at a time, as plain Python values.

A commit file (`_delta_log/<version>.json`) is a handful of JSON lines: the
commit's info, its file actions and, sometimes, new table metadata. Reading
them in Python is metadata-sized work; the rows the files hold are read by
Spark (see `chronolake.lake.files`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import cast

CDF_PROPERTY = "delta.enableChangeDataFeed"
COLUMN_MAPPING_PROPERTY = "delta.columnMapping.mode"


class ActionKind(StrEnum):
    """The three file actions a commit can carry."""

    ADD = "add"
    REMOVE = "remove"
    CDC = "cdc"


@dataclass(frozen=True, slots=True)
class FileAction:
    """One `add`, `remove` or `cdc` entry; `path` is relative and URL-encoded, as logged."""

    kind: ActionKind
    path: str
    data_change: bool
    partition_values: Mapping[str, str | None]
    deletion_vector: Mapping[str, object] | None = None
    """The descriptor of the rows a deletion vector deletes from the file, if any."""

    @property
    def has_deletion_vector(self) -> bool:
        return self.deletion_vector is not None


@dataclass(frozen=True, slots=True)
class LogCommit:
    """One parsed commit: its info, its file actions in log order, and new metadata if any."""

    version: int
    timestamp_ms: int
    operation: str
    actions: tuple[FileAction, ...]
    configuration: Mapping[str, str] | None = field(default=None)
    info: Mapping[str, object] = field(default_factory=dict)
    """The commit's `commitInfo` (a derived table's records its watermark there)."""
    transactions: Mapping[str, int] = field(default_factory=dict)
    """The application transactions (`txn`: app id to version) the commit records: the
    attempt token an exactly-once writer checks to know its write committed."""
    metadata: Mapping[str, object] | None = None
    """The commit's `metaData` action, when it changes the table's schema or properties."""
    protocol: Mapping[str, object] | None = None
    """The commit's `protocol` action, when it changes the versions or features required."""

    def files(self, kind: ActionKind) -> list[FileAction]:
        """The commit's data-changing actions of one kind, in log order.

        `add`/`remove` with `dataChange = false` (OPTIMIZE, compaction) move rows
        between files without changing the table, so no reader sees them.
        """
        return [
            a for a in self.actions
            if a.kind is kind and (a.data_change or kind is ActionKind.CDC)
        ]

    @property
    def is_data_change(self) -> bool:
        """False for commits that only rearrange files (OPTIMIZE) or change metadata."""
        return any(a.data_change or a.kind is ActionKind.CDC for a in self.actions)


def log_file_name(version: int) -> str:
    """`_delta_log` file name of a version: twenty zero-padded digits and `.json`."""
    return f"{version:020d}.json"


def parse_commit(version: int, lines: Iterable[str], *, fallback_timestamp_ms: int) -> LogCommit:
    """Parse the JSON lines of one commit file.

    The commit timestamp is the in-commit timestamp when the table has them,
    else `commitInfo.timestamp` (what delta-rs's change data feed reports),
    else `fallback_timestamp_ms` (the log file's modification time, the
    protocol's definition).
    """
    timestamp_ms, operation = fallback_timestamp_ms, "UNKNOWN"
    actions: list[FileAction] = []
    configuration: Mapping[str, str] | None = None
    commit_info: Mapping[str, object] = {}
    transactions: dict[str, int] = {}
    metadata: Mapping[str, object] | None = None
    protocol: Mapping[str, object] | None = None
    for line in lines:
        if not line.strip():
            continue
        entry = json.loads(line)
        if info := entry.get("commitInfo"):
            commit_info = info
            stamp = info.get("inCommitTimestamp") or info.get("timestamp")
            timestamp_ms = int(stamp or timestamp_ms)
            operation = str(info.get("operation", operation))
        elif "metaData" in entry:
            metadata = entry["metaData"]
            configuration = dict(cast(Mapping[str, str], metadata.get("configuration") or {}))
        elif "protocol" in entry:
            protocol = entry["protocol"]
        elif txn := entry.get("txn"):
            transactions[str(txn["appId"])] = int(txn["version"])
        for kind in ActionKind:
            if action := entry.get(kind.value):
                actions.append(
                    FileAction(
                        kind=kind,
                        path=action["path"],
                        data_change=bool(action.get("dataChange", True)),
                        partition_values=dict(action.get("partitionValues") or {}),
                        deletion_vector=action.get("deletionVector"),
                    )
                )
    return LogCommit(
        version, timestamp_ms, operation, tuple(actions), configuration, commit_info,
        transactions, metadata, protocol,
    )
