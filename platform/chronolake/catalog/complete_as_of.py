"""Reads pinned to a watermark: a query over the lake as it was complete as of an instant.

`Catalog.sql(query, complete_as_of=T)` (`chronolake sql --complete-as-of T`) reads each
derived table the query reads (directly or through plain views) at the first Delta version
whose stamped output watermark reached T (`chronolake.lake.stamps`): the first commit
holding every result up to T, as Flink's event-time results are final once the watermark
passes them. Each source table the query reads is read at the version those commits
recorded having consumed, so the query sees the sources as the derived tables did. Later
commits change nothing of it: a report, or a model trained on its rows, can be reproduced
for as long as the lake keeps those versions.

Refused, by name, before a row is read:

- a derived table without a watermark (its SELECT keeps no rowtime), or whose watermark
  never reached T;
- a source table no pinned derived table consumed: a source's watermark is generated as
  it is read, never stamped on its commits, so nothing says which version was complete
  (nor which one two derived tables that consumed it at different versions agree on);
- a version whose log entries or data files are gone (`explaining_retention`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta

from chronolake.catalog.entry import Spec
from chronolake.catalog.inputs import Lake, input_specs
from chronolake.errors import DefinitionError, SourceError, VersionGoneError
from chronolake.lake.layout import table_location
from chronolake.lake.stamps import Stamp, logged_stamps
from chronolake.schema import TableSpec, ViewSpec
from chronolake.sql.query import referenced_tables

AsOf = str | datetime
"""An instant: `'2026-11-02 10:00'` (UTC; ISO 8601, seconds, milliseconds and an offset
optional) or a datetime (naive: UTC)."""

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def as_of_millis(instant: AsOf) -> int:
    """`instant` in epoch milliseconds, the watermarks' domain."""
    if isinstance(instant, str):
        try:
            parsed = datetime.fromisoformat(instant.strip())
        except ValueError:
            msg = (
                f"complete as of {instant!r}: not a time; expected 'YYYY-MM-DD HH:MM[:SS[.fff]]' "
                "in UTC, e.g. '2026-11-02 10:00' (or a datetime in Python)"
            )
            raise DefinitionError(msg) from None
    else:
        parsed = instant
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return (parsed - _EPOCH) // timedelta(milliseconds=1)


def pinned_versions(
    query: str, registered: Mapping[str, Spec], lake: Lake, as_of_ms: int
) -> dict[str, int]:
    """The Delta version each table `query` reads is read at, by (lower-case) name, to read
    it complete as of `as_of_ms`; refused as the module says. Each version is checked kept."""
    read = _tables_read(query, registered, lake)
    stamps = {
        name: _first_reaching(lake, spec, as_of_ms) for name, spec in read.items() if spec.derived
    }
    versions = {name: stamp.version for name, stamp in stamps.items()}
    for name, spec in read.items():
        if not spec.derived:
            versions[name] = _recorded_version(spec, stamps, as_of_ms)
    for name, version in versions.items():
        lake.backend.check_kept(table_location(lake.root, read[name].options.path), version)
    return versions


@contextmanager
def explaining_retention(as_of_ms: int) -> Iterator[None]:
    """Turn a version gone from the lake, as a pinned read finds it, into a refusal that
    says which table properties keep such reads possible."""
    try:
        yield
    except VersionGoneError as error:
        msg = (
            f"{error}; reading complete as of {shown(as_of_ms)} needs the versions it pins, "
            "and Delta keeps old versions only as long as delta.logRetentionDuration (log "
            "entries) and delta.deletedFileRetentionDuration (data files later versions "
            "removed, until VACUUM) allow; raise both on the tables (Delta's ALTER TABLE ... "
            "SET TBLPROPERTIES) to keep reads this old reproducible, or ask for a later time"
        )
        raise VersionGoneError(msg) from error


def shown(epoch_ms: int) -> str:
    """An instant as messages show it: `2026-11-02 10:00:00.000 UTC`."""
    return f"{_EPOCH + timedelta(milliseconds=epoch_ms):%Y-%m-%d %H:%M:%S.%f}"[:-3] + " UTC"


def _tables_read(query: str, registered: Mapping[str, Spec], lake: Lake) -> dict[str, TableSpec]:
    """The tables `query` reads, directly or through views computed on read, as it reads
    them (`input_specs`: a derived view as its output table), by lower-case name."""
    specs = input_specs(query, registered, lake)
    read: dict[str, TableSpec] = {}
    for name in referenced_tables(query):
        spec = specs[name.lower()]
        if isinstance(spec, ViewSpec):  # a plain view, or a deduplication read by its source
            read |= _tables_read(spec.query, registered, lake)
        else:
            read[name.lower()] = spec
    return read


def _first_reaching(lake: Lake, spec: TableSpec, as_of_ms: int) -> Stamp:
    """The first commit of derived table `spec` whose watermark reached `as_of_ms`.

    Watermarks do not fall from run to run (a full refresh aside), and log cleanup removes
    the oldest commits: when the oldest one kept has reached it already, or none kept
    records a watermark, the first to reach it may be gone."""
    if spec.watermark is None:
        msg = (
            f"derived table {spec.name!r} has no watermark (its SELECT keeps no rowtime "
            "attribute, or it runs in processing time), so no version of it is known to be "
            f"complete as of {shown(as_of_ms)}; keep the rowtime in its SELECT, or read it "
            "without complete_as_of"
        )
        raise DefinitionError(msg)
    path = table_location(lake.root, spec.options.path)
    stamps = logged_stamps(path)
    reached = [s for s in stamps if s.watermark_ms is not None and s.watermark_ms >= as_of_ms]
    last = next((s for s in reversed(stamps) if s.watermark_ms is not None), None)
    cleaned = stamps[0].version if stamps else 0  # versions the log no longer holds: 0..-1
    if reached and (reached[0] is not stamps[0] or not cleaned):
        return reached[0]
    if not reached and (last is not None or not cleaned):
        held = (f"its watermark is {shown(last.watermark_ms)} (version {last.version})"
                if last is not None and last.watermark_ms is not None else
                "it has no watermark yet")
        msg = (
            f"derived table {spec.name!r} has not reached {shown(as_of_ms)}: {held}; run it "
            "again once its inputs have, or ask for an earlier time"
        )
        raise SourceError(msg)
    kept = (f"the oldest version kept, {cleaned}, is past {shown(as_of_ms)} already" if reached
            else "no version kept records a watermark")
    msg = (
        f"{path}: versions 0..{cleaned - 1} are no longer in the Delta log (removed by log "
        f"cleanup) and {kept}: the first version to reach it may be among them"
    )
    raise VersionGoneError(msg)


def _recorded_version(spec: TableSpec, stamps: Mapping[str, Stamp], as_of_ms: int) -> int:
    """The version of source `spec` the pinned derived tables' commits (`stamps`, by table)
    recorded having consumed."""
    name = spec.name.lower()
    consumed = {
        table: stamp.input_versions[name] for table, stamp in stamps.items()
        if stamp.input_versions is not None and name in stamp.input_versions
    }
    if len(set(consumed.values())) > 1:
        versions = ", ".join(f"{table!r} at {version}" for table, version in consumed.items())
        msg = (
            f"source table {spec.name!r} was consumed at different versions by the derived "
            f"tables this query reads as complete as of {shown(as_of_ms)} ({versions}), so "
            "no one version of it goes with them; query those tables separately"
        )
        raise SourceError(msg)
    if consumed:
        return next(iter(consumed.values()))
    unrecorded = [f"{t!r} (version {s.version})" for t, s in stamps.items()
                  if s.input_versions is None]
    if unrecorded:
        msg = (
            f"source table {spec.name!r} cannot be read complete as of {shown(as_of_ms)}: the "
            f"pinned versions of {', '.join(unrecorded)} were committed before chronolake "
            "recorded the input versions each commit consumed, so none says which version "
            f"of {spec.name!r} it read; ask for a time those tables reached in later runs, "
            f"or leave {spec.name!r} out of the query"
        )
        raise SourceError(msg)
    msg = (
        f"source table {spec.name!r} has no watermark stamped on its commits (a source's is "
        "generated as it is read), and no derived table this query reads consumed it, so "
        f"no version of it is known to be complete as of {shown(as_of_ms)}; read it in a "
        "query with a derived table that consumes it, or without complete_as_of"
    )
    raise DefinitionError(msg)
