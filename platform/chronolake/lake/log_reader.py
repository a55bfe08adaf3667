"""The Delta log read over the storage layer, one commit file at a time, without Spark: the
one log reader both backends and the Spark-free parts (status, assets, sensors) ask, so it
answers the same for tables either backend wrote."""

from __future__ import annotations

import re
from collections.abc import Iterable

from chronolake.lake.delta_log import LogCommit, log_file_name, parse_commit
from chronolake.lake.storage import Storage

LOG = "_delta_log"
# A commit (`<version>.json`) or a checkpoint (`<version>.checkpoint[.<part or uuid>].parquet`
# or `.json`): the version is the name's first twenty digits.
_VERSIONED = re.compile(r"^(\d{20})\.(json|checkpoint(\.[^/]+)?\.(parquet|json))$")


def read_commits(
    table: Storage, versions: range, listed: set[str] | None = None
) -> dict[int, LogCommit]:
    """The parsed commits of `versions` still in the table's log. On a disk each is one file
    read; on an object store the log is listed first (`listed`, when the caller has), so that
    versions cleaned up cost no request: a ranged read is a listing and a GET per commit."""
    names = listed if listed is not None else log_names(table)
    commits: dict[int, LogCommit] = {}
    for version in versions:
        name = log_file_name(version)
        found = None if names is not None and name not in names else table.read_stamped(
            f"_delta_log/{name}"
        )
        if found is not None:
            text, written_ms = found
            commits[version] = parse_commit(
                version, text.splitlines(), fallback_timestamp_ms=written_ms
            )
    return commits


def log_names(table: Storage) -> set[str] | None:
    """The names in an object store's `_delta_log`; None on a disk, where reading a missing
    commit costs what asking for it would."""
    return None if table.location.is_local else set(table.names("_delta_log"))


def latest_version(table: Storage) -> int | None:
    """The table's newest version by one listing of its log (None: no commit yet): what
    Delta's and delta-rs's own snapshots find, without a Spark job."""
    return newest_version(table.names(LOG))


def newest_version(names: Iterable[str]) -> int | None:
    """The newest version among the names in a table's log (commits and checkpoints)."""
    versions = [int(match.group(1)) for match in map(_VERSIONED.match, names) if match]
    return max(versions, default=None)
