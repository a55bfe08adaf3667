"""The output watermark a derived table's commit records, as Paimon stamps each snapshot.

Every commit of a derived table carries, in its Delta `commitInfo`:

- `chronolake.watermark`: the table's output watermark after the commit, ISO-8601 UTC
  with milliseconds (`2026-11-25T10:00:00.000Z`), readable by any Delta reader;
- `chronolake.watermarkMillis`: the same instant in epoch milliseconds.

Absent keys mean no watermark yet (nothing reached). A reader downstream takes
an input's watermark from the latest commit it consumed, never from the data.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from contextlib import suppress
from datetime import UTC, datetime

from deltalake import DeltaTable

from chronolake.lake.backend import LakeBackend
from chronolake.location import LocationLike

WATERMARK_KEY = "chronolake.watermark"
WATERMARK_MILLIS_KEY = "chronolake.watermarkMillis"


def watermark_stamp(watermark_ms: int | None) -> dict[str, str]:
    """The commitInfo entries recording `watermark_ms` (none while there is no watermark)."""
    if watermark_ms is None:
        return {}
    instant = datetime.fromtimestamp(watermark_ms / 1000, tz=UTC)
    return {
        WATERMARK_KEY: instant.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        WATERMARK_MILLIS_KEY: str(watermark_ms),
    }


def stamped_watermark(info: Mapping[str, object]) -> int | None:
    """The watermark a commit's info recorded (epoch ms), None when it recorded none.

    delta-rs writes the entries into `commitInfo` itself; delta-spark into its
    `userMetadata` string, as JSON.
    """
    millis = info.get(WATERMARK_MILLIS_KEY)
    if millis is None and isinstance(user := info.get("userMetadata"), str):
        with suppress(ValueError, AttributeError):  # not chronolake's JSON: no watermark
            millis = json.loads(user).get(WATERMARK_MILLIS_KEY)
    return None if millis is None else int(str(millis))


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


def latest_recorded_watermark(path: LocationLike) -> int | None:
    """The watermark the latest commit of a derived table recorded, read from its Delta log
    alone (no Spark: `chronolake status`, Dagster's metadata); None before its first run."""
    if not DeltaTable.is_deltatable(str(path)):
        return None
    [latest] = DeltaTable(str(path), without_files=True).history(limit=1)
    return stamped_watermark(latest)
