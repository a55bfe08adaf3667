"""The Delta table features chronolake reads and writes, and the refusal of the others.

A reader or writer that meets a feature it does not know must not touch the table (the
Delta protocol's rule): chronolake reads changelogs from the log and the files itself, so
it names the features its reader and its delta-rs writer understand, and refuses any other
by name before anything is read or written. Delta's own writer (the delta-spark backend)
honours every feature it supports itself.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from chronolake.errors import SourceError
from chronolake.lake.delta_log import COLUMN_MAPPING_PROPERTY

READABLE_FEATURES = frozenset({
    "columnMapping",  # 'name' mode: files hold physical names, read back by the schema's
    "deletionVectors",
    "timestampNtz",
    "v2Checkpoint",
    "vacuumProtocolCheck",
})
"""Reader features whose tables chronolake reads as Delta's reader does."""

WRITABLE_FEATURES = frozenset({
    "appendOnly", "changeDataFeed", "deletionVectors", "invariants", "timestampNtz",
    "v2Checkpoint", "vacuumProtocolCheck",
})
"""Writer features chronolake's own commits (the delta-rs backend) honour: it writes no
checkpoints, so v2 checkpoints are never broken."""

READABLE_COLUMN_MAPPING = ("none", "name")
APPEND_ONLY_PROPERTY = "delta.appendOnly"


def check_readable(
    location: object, version: int, reader_features: Iterable[str],
    configuration: Mapping[str, str],
) -> None:
    """Refuse a version whose reader features or column mapping chronolake cannot read."""
    _refuse(location, version, set(reader_features) - READABLE_FEATURES, "read")
    mode = configuration.get(COLUMN_MAPPING_PROPERTY, "none")
    if mode not in READABLE_COLUMN_MAPPING:
        msg = (
            f"{location}: version {version} maps columns by {mode!r} "
            f"({COLUMN_MAPPING_PROPERTY}), which chronolake cannot read; expected "
            f"{' or '.join(map(repr, READABLE_COLUMN_MAPPING))}; nothing was read or written; "
            "copy the table into one with column mapping by 'name'"
        )
        raise SourceError(msg)


def check_writable(location: object, version: int, features: Iterable[str]) -> None:
    """Refuse a table whose (reader or writer) `features` chronolake's own commits would
    break."""
    _refuse(location, version, set(features) - WRITABLE_FEATURES, "write")


def check_removable(
    location: object, version: int, configuration: Mapping[str, str], write: str
) -> None:
    """Refuse a `write` that removes or replaces files of an append-only table, as Delta's
    writer does (the `appendOnly` feature chronolake's own commits honour)."""
    if str(configuration.get(APPEND_ONLY_PROPERTY, "false")).lower() != "true":
        return
    msg = (
        f"{location}: version {version} is append-only ({APPEND_ONLY_PROPERTY} = true), and "
        f"{write} would update or delete its rows; nothing was written; unset the property "
        f"(ALTER TABLE ... UNSET TBLPROPERTIES ('{APPEND_ONLY_PROPERTY}')) to let it change"
    )
    raise SourceError(msg)


def _refuse(location: object, version: int, unknown: Iterable[str], action: str) -> None:
    names = sorted(unknown)
    if not names:
        return
    listed = ", ".join(repr(n) for n in names)
    known = READABLE_FEATURES if action == "read" else WRITABLE_FEATURES
    msg = (
        f"{location}: version {version} requires the Delta table feature(s) {listed}, which "
        f"chronolake cannot {action}; nothing was read or written; chronolake {action}s "
        f"tables with {', '.join(sorted(known))}; "
        + ("read the table through a copy without them" if action == "read" else
           "let chronolake write through Delta's own writer (CHRONOLAKE_BACKEND=delta-spark), "
           "or drop the feature (ALTER TABLE ... DROP FEATURE)")
    )
    raise SourceError(msg)
