"""The output watermark a derived table's commit records, as Paimon stamps each snapshot,
and the input versions the commit's run had consumed.

Every commit of a derived table carries, in its Delta `commitInfo`:

- `chronolake.watermark`: the table's output watermark after the commit, ISO-8601 UTC
  with milliseconds (`2026-11-25T10:00:00.000Z`), readable by any Delta reader;
- `chronolake.watermarkMillis`: the same instant in epoch milliseconds;
- `chronolake.inputVersions`: the last Delta version of each input table the run had
  consumed, as a JSON object by table name (`{"orders": 12, "rates": 4}`). Checkpoints
  keep only the latest runs' positions; this keeps every commit's, so a read complete as
  of a watermark (`chronolake.catalog.complete_as_of`) finds the sources' versions.

- `chronolake.partitions`: for a table with time partitions, each partition the commit
  completed or changed once complete, with its figures (`PartitionFigures`), as a JSON
  object by partition key; Dagster records them as materialized from this alone.
- `chronolake.restated`: on a restatement's commit, the input it restated and the range of
  this table's time attribute its changes may touch (`RestatedSpan`): what the next hop
  restates instead of reading the commit's changes.

Absent watermark keys mean no watermark yet (nothing reached); absent input versions, a
commit written before chronolake recorded them. A reader downstream takes an input's
watermark from the latest commit it consumed, never from the data.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass
from datetime import UTC, datetime

from deltalake import DeltaTable

from chronolake.lake.backend import LakeBackend
from chronolake.lake.log_reader import latest_version, read_commits
from chronolake.lake.storage import Storage
from chronolake.location import LocationLike

WATERMARK_KEY = "chronolake.watermark"
WATERMARK_MILLIS_KEY = "chronolake.watermarkMillis"
INPUT_VERSIONS_KEY = "chronolake.inputVersions"
PARTITIONS_KEY = "chronolake.partitions"
RESTATED_KEY = "chronolake.restated"


@dataclass(frozen=True, slots=True)
class PartitionFigures:
    """What one commit did to one time partition of its table."""

    key: str
    """The partition's key, as Dagster names it (`2026-11-02-10:00`)."""
    completed: bool
    """Whether this commit completed it (else it changed a partition complete before)."""
    rows: int
    """Its rows after the commit."""
    late_rows: int
    """Rows of its time sent to the late side table, all commits so far."""
    new_late_rows: int
    """Of those, this commit's."""
    changes: Mapping[str, int]
    """This commit's changes to its rows, by row kind (`+I`, `-U`, `+U`, `-D`)."""

    @property
    def materialized(self) -> bool:
        """Whether the partition is recorded (again) for this commit: it completed, or its
        rows changed; late rows alone change no row."""
        return self.completed or any(self.changes.values())


def watermark_stamp(watermark_ms: int | None) -> dict[str, str]:
    """The commitInfo entries recording `watermark_ms` (none while there is no watermark)."""
    if watermark_ms is None:
        return {}
    instant = datetime.fromtimestamp(watermark_ms / 1000, tz=UTC)
    return {
        WATERMARK_KEY: instant.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        WATERMARK_MILLIS_KEY: str(watermark_ms),
    }


def input_versions_stamp(versions: Mapping[str, int]) -> dict[str, str]:
    """The commitInfo entry recording the input versions a run had consumed, by table."""
    return {INPUT_VERSIONS_KEY: json.dumps(dict(sorted(versions.items())))}


def restated_stamp(source: str, start_ms: int, end_ms: int) -> dict[str, str]:
    """The commitInfo entry of a restatement's commit: the source it restated and the range of
    this table's time attribute its changes may touch (what the next hop restates)."""
    return {RESTATED_KEY: json.dumps({"source": source, "fromMillis": start_ms,
                                      "toMillis": end_ms})}


@dataclass(frozen=True, slots=True)
class RestatedSpan:
    """What a restatement's commit recorded: the input it restated, and the range [`start_ms`,
    `end_ms`) of the table's time attribute its changes may touch."""

    source: str
    start_ms: int
    end_ms: int


def stamped_restated(info: Mapping[str, object]) -> RestatedSpan | None:
    """The restated range a commit's info recorded; None for a commit of an ordinary run."""
    document = _stamped(info, RESTATED_KEY)
    if document is None:
        return None
    span = json.loads(str(document))
    return RestatedSpan(span["source"], int(span["fromMillis"]), int(span["toMillis"]))


def restated_commits(
    backend: LakeBackend, path: LocationLike, start: int, end: int
) -> dict[int, RestatedSpan]:
    """The restatements' commits among `start..end` of a derived table, by version (one read
    of the log; none when `start` is past `end`)."""
    if start > end:
        return {}
    infos = backend.commit_infos(path, start, end)
    spans = {version: stamped_restated(info) for version, info in infos.items()}
    return {version: span for version, span in spans.items() if span is not None}


def partitions_stamp(figures: Sequence[PartitionFigures]) -> dict[str, str]:
    """The commitInfo entry recording what a commit did to its partitions (none: nothing)."""
    if not figures:
        return {}
    document = {  # zeros left out: a catch-up completes many empty partitions
        item.key: {name: value for name, value in (
            ("completed", item.completed), ("rows", item.rows), ("lateRows", item.late_rows),
            ("newLateRows", item.new_late_rows),
            ("changes", {kind: n for kind, n in item.changes.items() if n}),
        ) if value}
        for item in figures
    }
    return {PARTITIONS_KEY: json.dumps(document)}


def stamped_partitions(info: Mapping[str, object]) -> list[PartitionFigures]:
    """The partitions a commit's info recorded, in key order (none for a commit that
    recorded none)."""
    document = _stamped(info, PARTITIONS_KEY)
    if document is None:
        return []
    return [
        PartitionFigures(
            key=key, completed=bool(item.get("completed")), rows=int(item.get("rows", 0)),
            late_rows=int(item.get("lateRows", 0)), new_late_rows=int(item.get("newLateRows", 0)),
            changes={kind: int(n) for kind, n in item.get("changes", {}).items()},
        )
        for key, item in json.loads(str(document)).items()
    ]


def stamped_watermark(info: Mapping[str, object]) -> int | None:
    """The watermark a commit's info recorded (epoch ms), None when it recorded none."""
    millis = _stamped(info, WATERMARK_MILLIS_KEY)
    return None if millis is None else int(str(millis))


def stamped_input_versions(info: Mapping[str, object]) -> dict[str, int] | None:
    """The input versions a commit's info recorded, by table; None when it recorded none (a
    commit written before chronolake recorded them)."""
    versions = _stamped(info, INPUT_VERSIONS_KEY)
    if versions is None:
        return None
    return {name: int(version) for name, version in json.loads(str(versions)).items()}


def _stamped(info: Mapping[str, object], key: str) -> object | None:
    """The entry `key` of a commit's info: delta-rs writes the entries into `commitInfo`
    itself; delta-spark into its `userMetadata` string, as JSON."""
    value = info.get(key)
    if value is None and isinstance(user := info.get("userMetadata"), str):
        with suppress(ValueError, AttributeError):  # not chronolake's JSON: no entry
            value = json.loads(user).get(key)
    return value


def recorded_watermarks(
    backend: LakeBackend, path: LocationLike, start: int, end: int
) -> dict[int, int | None]:
    """The watermark each commit `start..end` of a derived table recorded, by version (one
    read of the log); None before the first commit (version -1) or where it recorded none."""
    infos = backend.commit_infos(path, max(start, 0), end) if end >= 0 else {}
    return {
        version: stamped_watermark(infos[version]) if version in infos else None
        for version in range(start, end + 1)
    }


@dataclass(frozen=True, slots=True)
class Stamp:
    """What one commit of a derived table recorded."""

    version: int
    watermark_ms: int | None
    input_versions: Mapping[str, int] | None
    partitions: Sequence[PartitionFigures] = ()


def logged_stamps(path: LocationLike, since: int = 0) -> list[Stamp]:
    """What each commit of a derived table still in its Delta log recorded, from version
    `since` on, oldest first (commits log cleanup removed are left out): one read of the
    log, no Spark."""
    table = Storage(path)
    latest = latest_version(table)
    commits = read_commits(table, range(since, latest + 1)) if latest is not None else {}
    return [
        Stamp(version, stamped_watermark(commit.info), stamped_input_versions(commit.info),
              stamped_partitions(commit.info))
        for version, commit in sorted(commits.items())
    ]


def latest_recorded_watermark(path: LocationLike) -> int | None:
    """The watermark the latest commit of a derived table recorded, read from its Delta log
    alone (no Spark: `chronolake status`, Dagster's metadata); None before its first run."""
    if not DeltaTable.is_deltatable(str(path)):
        return None
    [latest] = DeltaTable(str(path), without_files=True).history(limit=1)
    return stamped_watermark(latest)
