"""A table's metadata and protocol at a version, read from its Delta log over the storage
layer: the newest `metaData` and `protocol` actions at or before the version, from its
commits back to the newest checkpoint and, when they are older, from that checkpoint
(classic, multi-part or v2). Both backends ask it, so a table reads the same whichever
engine wrote it, and no Spark job runs for metadata-sized facts."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import cast

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql.types import StructType

from chronolake.errors import SourceError, VersionGoneError
from chronolake.lake.delta_log import log_file_name
from chronolake.lake.files import logical_type
from chronolake.lake.log_reader import LOG, latest_version, read_commits
from chronolake.lake.storage import Storage

# `<version>.checkpoint.parquet`, `<version>.checkpoint.<part>.<parts>.parquet` (multi-part)
# and `<version>.checkpoint.<uuid>.json|parquet` (v2): the version is the name's first part.
_CHECKPOINT = re.compile(r"^(\d{20})\.checkpoint(\.[^/]+)?\.(parquet|json)$")
_ACTIONS = ("metaData", "protocol")


@dataclass(frozen=True, slots=True)
class TableState:
    """What a reader needs to know before it reads a version's files."""

    version: int
    metadata: Mapping[str, object]
    protocol: Mapping[str, object]

    @property
    def schema(self) -> StructType:
        """The table's schema with Delta's field metadata (column mapping's physical names)."""
        return StructType.fromJson(json.loads(str(self.metadata["schemaString"])))

    @property
    def logical_schema(self) -> StructType:
        """The schema as readers see it: names and types, without Delta's field metadata."""
        return logical_type(self.schema)

    @property
    def partition_columns(self) -> tuple[str, ...]:
        return tuple(cast(list[str], self.metadata.get("partitionColumns") or []))

    @property
    def configuration(self) -> dict[str, str]:
        return dict(cast(Mapping[str, str], self.metadata.get("configuration") or {}))

    @property
    def reader_features(self) -> frozenset[str]:
        return frozenset(cast(list[str], self.protocol.get("readerFeatures") or []))

    @property
    def writer_features(self) -> frozenset[str]:
        return frozenset(cast(list[str], self.protocol.get("writerFeatures") or []))


def table_state(table: Storage, version: int) -> TableState:
    """The metadata and protocol in force at `version` of the table at `table`."""
    names = set(table.names(LOG))
    checkpoint = max((v for v in map(_checkpoint_version, names) if v is not None and
                      v <= version), default=-1)
    found: dict[str, Mapping[str, object]] = {}
    for older in range(version, checkpoint, -1):
        commit = read_commits(table, range(older, older + 1), names).get(older)
        if commit is None:
            msg = (
                f"{table.location}: version {older} is no longer in the Delta log and no "
                f"checkpoint at or after it is, so the table's metadata at version {version} "
                "cannot be read; read a later version, or run a full refresh from the latest"
            )
            raise VersionGoneError(msg)
        for action, value in (("metaData", commit.metadata), ("protocol", commit.protocol)):
            if value is not None:
                found.setdefault(action, value)
        if len(found) == len(_ACTIONS):
            break
    if len(found) < len(_ACTIONS) and checkpoint >= 0:
        for action, value in _checkpointed(table, checkpoint, names).items():
            found.setdefault(action, value)
    missing = [action for action in _ACTIONS if action not in found]
    if missing:
        msg = (
            f"{table.location}: the Delta log has no {' or '.join(missing)} action at or "
            f"before version {version}; expected a table written by a Delta writer; recreate "
            "the table with one"
        )
        raise SourceError(msg)
    return TableState(version, found["metaData"], found["protocol"])


def rebuildable(table: Storage, version: int) -> bool:
    """Whether the log still holds what rebuilds `version`: every commit after the newest
    checkpoint at or before it (every commit from 0 without one). Log cleanup removes the
    oldest commits, so an old version can be gone while the log holds later ones."""
    names = set(table.names(LOG))
    checkpoint = max((v for v in map(_checkpoint_version, names) if v is not None and
                      v <= version), default=-1)
    return all(log_file_name(v) in names for v in range(checkpoint + 1, version + 1))


def latest_state(table: Storage) -> TableState:
    """The metadata and protocol of the table's newest version."""
    version = latest_version(table)
    if version is None:
        msg = f"{table.location}: no Delta commits in {LOG}; expected a Delta table"
        raise SourceError(msg)
    return table_state(table, version)


def _checkpoint_version(name: str) -> int | None:
    match = _CHECKPOINT.match(name)
    return int(match.group(1)) if match else None


def _checkpointed(table: Storage, version: int, names: set[str]) -> dict[str, Mapping[str, object]]:
    """The `metaData` and `protocol` a checkpoint at `version` holds (every part of it: a
    v2 checkpoint keeps them in its top file, a multi-part one in any part)."""
    found: dict[str, Mapping[str, object]] = {}
    for name in sorted(n for n in names if _checkpoint_version(n) == version):
        key = str(PurePosixPath(LOG) / name)
        if name.endswith(".json"):
            for line in (table.read_text(key) or "").splitlines():
                entry = json.loads(line) if line.strip() else {}
                found.update({a: entry[a] for a in _ACTIONS if entry.get(a)})
        else:
            data = pq.read_table(pa.BufferReader(table.read_bytes(key) or b""))
            for action in _ACTIONS:
                if action in data.column_names:
                    values = [v for v in data[action].to_pylist() if v]
                    if values:
                        found[action] = _plain(values[0])
        if len(found) == len(_ACTIONS):
            break
    return found


def _plain(action: Mapping[str, object]) -> Mapping[str, object]:
    """A checkpoint row's action as its JSON form: Parquet maps read back as pair lists."""
    configuration = action.get("configuration")
    if isinstance(configuration, list):
        return {**action, "configuration": dict(configuration)}
    return action
