"""What a run checks about a source before it writes anything.

Each bad input stops the run with an error that names the table, what was
expected and the fix, and leaves the derived table exactly as it was:

- the source path is not a Delta table;
- a declared column is missing from the Delta table, or its type changed since
  the version the last run consumed (a *new* column is fine: files without it
  read it as null, and the declared columns ignore it);
- the table was rewritten by OVERWRITE since the checkpoint: a rewrite is not a
  changelog, so the run stops unless the derived table allows a full refresh.

The change data feed being off, and versions removed by VACUUM or log cleanup,
are found by the lake backend when the run defines its input reads, which is
still before anything is written; those errors name the versions and the fix.
"""

from __future__ import annotations

from enum import StrEnum
from typing import cast

from pyspark.sql.types import StructType

from chronolake.errors import SourceError, SourceRewrittenError
from chronolake.lake.tables import is_table, latest_commits, stored_schema, table_version
from chronolake.location import Location
from chronolake.schema import PhysicalColumn, TableSpec

# Operations that replace a table's contents rather than change some rows. delta-rs and
# delta-spark log `WRITE` with `mode = Overwrite`; delta-spark's REPLACE forms log these.
_REPLACING_OPERATIONS = frozenset(
    {
        "CREATE OR REPLACE TABLE",
        "REPLACE TABLE",
        "CREATE OR REPLACE TABLE AS SELECT",
        "REPLACE TABLE AS SELECT",
    }
)


class OverwritePolicy(StrEnum):
    """What a run does when a source was rewritten by OVERWRITE since its checkpoint."""

    FAIL = "fail"
    FULL_REFRESH = "full-refresh"


def require_delta_table(path: Location, spec: TableSpec, derived: str) -> None:
    """Raise `SourceError` when the source's location holds no Delta table."""
    if not is_table(path):
        msg = (
            f"table {spec.name!r} (read by {derived!r}): {path} is not a Delta table (no "
            "_delta_log with commits); expected the location of a Delta table; fix the "
            "table's 'path' option (relative paths start at the lake root) or create the "
            "table first; nothing was read or written"
        )
        raise SourceError(msg)


def declared_column_types(path: Location, spec: TableSpec, version: int) -> dict[str, str]:
    """The Delta types of the source's declared physical columns at `version` (absent
    columns left out), from the Delta log alone."""
    schema = stored_schema(path, version) or StructType()
    declared = {c.name for c in spec.columns if isinstance(c, PhysicalColumn)}
    return {f.name: f.dataType.simpleString() for f in schema.fields if f.name in declared}


def check_columns(
    spec: TableSpec,
    *,
    consumed: dict[str, str],
    consumed_version: int,
    current: dict[str, str],
    version: int,
    derived: str,
) -> None:
    """Every declared physical column is present at `version`, with the type it had at the
    version last consumed (`consumed`, empty on a first run or a full refresh)."""
    for column in spec.columns:
        if not isinstance(column, PhysicalColumn):
            continue
        name = column.name
        if name not in current:
            msg = (
                f"table {spec.name!r}: column {name!r}, declared by the table and read by "
                f"{derived!r}, is not in the Delta table at version {version} (it has "
                f"{', '.join(sorted(current)) or 'none of the declared columns'}); expected "
                f"every declared column; restore the column, or declare the table without it "
                f"and run a full refresh of {derived!r}"
            )
            raise SourceError(msg)
        before = consumed.get(name)
        if before is not None and before != current[name]:
            msg = (
                f"table {spec.name!r}: column {name!r}, read by {derived!r}, changed type from "
                f"{before} (version {consumed_version}, the last one {derived!r} consumed) to "
                f"{current[name]} (version {version}); expected its type to stay {before}; "
                f"restore the type, or declare the new type and run a full refresh of "
                f"{derived!r}"
            )
            raise SourceError(msg)


def overwrite_versions(path: Location, start: int, end: int) -> list[int]:
    """The versions in `start..end` that rewrote the table (OVERWRITE, REPLACE), oldest
    first, from the commit infos in the Delta log (metadata-sized). Version 0 creates the
    table, whatever its mode, so it replaces nothing."""
    start = max(start, 1)
    if end < start:
        return []
    history = latest_commits(path, table_version(path) - start + 1)
    return sorted(
        _version(entry) for entry in history if start <= _version(entry) <= end and _replaces(entry)
    )


def overwrite_error(
    spec: TableSpec, path: Location, versions: list[int], consumed_version: int, derived: str
) -> SourceRewrittenError:
    """A source was rewritten after the checkpoint and the derived table does not refresh."""
    listed = ", ".join(map(str, versions))
    msg = (
        f"table {spec.name!r} ({path}) was rewritten by OVERWRITE at version(s) {listed}, after "
        f"version {consumed_version}, the last one {derived!r} consumed; a rewrite replaces "
        "the table instead of recording changes, so it cannot be applied incrementally and "
        f"this run changed nothing; expected only appends, updates and deletes; run a full "
        f"refresh of {derived!r} (full_refresh(catalog, {derived!r}), or `chronolake run "
        f"{derived} --full-refresh`), or let runs refresh by themselves with "
        "on_source_overwrite='full-refresh'"
    )
    return SourceRewrittenError(msg)


def _version(entry: dict[str, object]) -> int:
    """A `latest_commits` entry's version: always there, the int of its commit's file name."""
    return cast(int, entry["version"])


def _replaces(entry: dict[str, object]) -> bool:
    operation = str(entry.get("operation", ""))
    parameters = entry.get("operationParameters") or {}
    mode = str(parameters.get("mode", "")) if isinstance(parameters, dict) else ""
    return operation in _REPLACING_OPERATIONS or (
        operation == "WRITE" and mode.strip('"').lower() == "overwrite"
    )
