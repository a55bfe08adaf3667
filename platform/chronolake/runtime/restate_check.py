"""Whether a source's rewrite lies within the time range a restatement names.

A restatement of [t0, t1) (docs/design.md, "Restatement") recomputes only what depends on
that range, so it first checks that nothing else changed: the source's commits since the
version its consumer last consumed may change only rows whose event time lies in the range.

Delta reports a rewrite as deletes and inserts: a whole-table OVERWRITE removes every row and
adds the new ones, a writer without change data files reports a copy-on-write DELETE or
UPDATE as its whole rewritten files. Rows removed and re-added unchanged are no change, so
the check nets the changes as a multiset over the declared columns (+1 per insert or
post-image, -1 per delete or pre-image) and looks only at what is left. That accepts a
whole-table OVERWRITE that differs only in the range, a predicate overwrite (`replaceWhere`)
inside it, a delete and reinsert of it, and an UPDATE or MERGE of rows in it.

All of it is one Spark job (group the changes, then count, min and max); one row reaches
the driver.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column
from pyspark.sql import functions as F

from chronolake.catalog import Catalog
from chronolake.catalog.relations import with_declared_columns
from chronolake.errors import DefinitionError, RestateRangeError, RunError, SourceError
from chronolake.lake.changelog import ADDITIONS, COMMIT_VERSION, ROW_KIND
from chronolake.schema import ComputedColumn, MetadataColumn, TableSpec
from chronolake.watermarks.millis import timestamp_millis, utc_text

_NET, _LAST_VERSION, _TIME = "__restate_net", "__restate_version", "__restate_time"


@dataclass(frozen=True, slots=True)
class AcceptedRewrite:
    """A source's changes after `after_version` up to `end_version`, all within
    [`start_ms`, `end_ms`): what a restatement of that range reads."""

    table: str
    after_version: int
    """The version the consumer last consumed; the restatement reads the versions after it."""
    end_version: int
    start_ms: int
    end_ms: int
    removed_rows: int
    """Row images removed (a delete, an update's old row), net of rows removed and re-added
    unchanged: a one-row UPDATE removes one and adds one."""
    added_rows: int
    """Row images added (an insert, an update's new row), net the same way."""


def check_rewrite(
    catalog: Catalog, table: str, *, consumed_version: int, start_ms: int, end_ms: int,
    end_version: int | None = None,
) -> AcceptedRewrite:
    """Accept the changes of source `table` after `consumed_version` up to `end_version`
    when every row they change has its rowtime in [`start_ms`, `end_ms`) (epoch
    milliseconds; a TIMESTAMP rowtime read as UTC, as watermarks are). `end_version` is the
    source's latest version, read once by a caller that checks several consumers so that
    all of them read up to the same version (None: read here).

    Raises `RestateRangeError` naming the versions and the changed rows' times outside the
    range, and the range that covers them; `DefinitionError` when `table` is not a source
    with a rowtime stored in its rows; `RunError` for an empty range; `SourceError` when the
    table cannot be read from `consumed_version` on. Nothing is written.

    Example:
        >>> check_rewrite(catalog, "orders", consumed_version=12,
        ...               start_ms=1_793_610_000_000, end_ms=1_793_613_600_000).changed_rows
        48
    """
    spec = restatable_source(catalog, table, start_ms=start_ms, end_ms=end_ms)
    path = catalog.table_path(spec)
    latest = catalog.backend.latest_version(path) if end_version is None else end_version
    accepted = AcceptedRewrite(spec.name, consumed_version, latest, start_ms, end_ms, 0, 0)
    if latest == consumed_version:
        return accepted
    if latest < consumed_version:
        msg = (
            f"table {spec.name!r} ({path}): its latest version is {latest}, before version "
            f"{consumed_version}, which its consumer last consumed: the table was created anew "
            "at its path, so its changes since then cannot be told; run a full refresh of the "
            "views that read it; nothing was written"
        )
        raise SourceError(msg)
    changes = with_declared_columns(
        catalog.backend.changes(path, consumed_version + 1, latest, require_cdf=False), spec
    )
    rowtime = spec.rowtime
    assert rowtime is not None  # `restatable_source` refused a table without one
    head = rowtime.split(".")[0]
    stored = [c.name for c in spec.physical_columns]
    grouped = stored if head.lower() in {c.lower() for c in stored} else [*stored, head]
    sign = F.when(F.col(ROW_KIND).isin(*ADDITIONS), 1).otherwise(-1)
    netted = (
        changes.groupBy(*(F.col(f"`{c}`") for c in grouped))
        .agg(F.sum(sign).alias(_NET), F.max(COMMIT_VERSION).alias(_LAST_VERSION))
        .where(F.col(_NET) != 0)
    )
    time_type = netted.select(F.col(rowtime)).schema.fields[0].dataType
    at = timestamp_millis(F.col(rowtime), time_type)
    timed = netted.select(F.col(_NET), F.col(_LAST_VERSION), at.alias(_TIME))
    inside = F.coalesce((F.col(_TIME) >= start_ms) & (F.col(_TIME) < end_ms), F.lit(False))
    outside = ~inside
    removed, added = F.greatest(-F.col(_NET), F.lit(0)), F.greatest(F.col(_NET), F.lit(0))
    # one row of figures over the netted changes: metadata-sized
    [figures] = timed.agg(
        _total(removed).alias("removed"),
        _total(added).alias("added"),
        _total(removed, outside).alias("removed_outside"),
        _total(added, outside).alias("added_outside"),
        _total(F.abs(F.col(_NET)), F.col(_TIME).isNull()).alias("untimed"),
        F.min(F.when(outside, F.col(_TIME))).alias("earliest"),
        F.max(F.when(outside, F.col(_TIME))).alias("latest"),
        F.min(F.when(outside, F.col(_LAST_VERSION))).alias("first_version"),
        F.max(F.when(outside, F.col(_LAST_VERSION))).alias("last_version"),
    ).collect()
    if figures["removed_outside"] or figures["added_outside"]:
        raise _outside_error(accepted, figures.asDict())
    return AcceptedRewrite(
        spec.name, consumed_version, latest, start_ms, end_ms, figures["removed"],
        figures["added"],
    )


def restatable_source(catalog: Catalog, table: str, *, start_ms: int, end_ms: int
                      ) -> TableSpec:
    """The declared source `table`, refused (`DefinitionError`) when a restatement cannot
    name a range of it, and (`RunError`) when [`start_ms`, `end_ms`) is empty."""
    spec = catalog.spec(table)
    if not isinstance(spec, TableSpec) or spec.derived:
        msg = (
            f"{table!r} is a view; a restatement names the source table that was rewritten, "
            "and restates the views downstream of it"
        )
        raise DefinitionError(msg)
    if spec.rowtime is None:
        msg = (
            f"table {spec.name!r} has no rowtime (WATERMARK FOR ...), so a time range of it "
            "means nothing; declare its event time column, or run a full refresh of the views "
            "that read it"
        )
        raise DefinitionError(msg)
    column = spec.column(spec.rowtime.split(".")[0])
    if isinstance(column, MetadataColumn) or (
        isinstance(column, ComputedColumn) and column.is_system_rowtime
    ):
        msg = (
            f"table {spec.name!r}: its rowtime {spec.rowtime!r} is the commit time, which a "
            "rewrite moves to its own, so no range of it can be restated; run a full refresh "
            "of the views that read it"
        )
        raise DefinitionError(msg)
    if end_ms <= start_ms:
        msg = (
            f"restating {spec.name!r}: the range [{utc_text(start_ms)}, {utc_text(end_ms)}) is "
            "empty; expected its start before its end; pass --from earlier than --to"
        )
        raise RunError(msg)
    return spec


def _outside_error(accepted: AcceptedRewrite, figures: dict[str, int]) -> RestateRangeError:
    """The rewrite changed rows outside the range: name their times and the range that fits."""
    untimed = figures["untimed"]
    outside = figures["removed_outside"] + figures["added_outside"]
    timed = outside - untimed
    earliest, latest = figures["earliest"], figures["latest"]
    times = (
        "" if not timed
        else f"{timed} of them with event time {utc_text(earliest)}" if earliest == latest
        else f"{timed} of them with event times from {utc_text(earliest)} to {utc_text(latest)}"
    )
    nulls = f"{untimed} of them without an event time (a null rowtime)" if untimed else ""
    what = " and ".join(part for part in (times, nulls) if part)
    counts = f"removed {figures['removed_outside']} and added {figures['added_outside']} row(s)"
    refresh = "run a full refresh of the views that read it"
    fix = (
        f"restate [{utc_text(min(accepted.start_ms, earliest))}, "
        f"{utc_text(max(accepted.end_ms, latest + 1))}) instead, or {refresh}"
        if timed else refresh
    )
    read = _versions(accepted.after_version + 1, accepted.end_version)
    changed = _versions(figures["first_version"], figures["last_version"])
    return RestateRangeError(
        f"table {accepted.table!r}: {read} {counts} outside the range "
        f"[{utc_text(accepted.start_ms)}, {utc_text(accepted.end_ms)}) being restated: "
        f"{what} (last changed at {changed}); expected changes only within the range; {fix}; "
        "nothing was written"
    )


def _total(count: Column, where: Column | None = None) -> Column:
    """The sum of `count` over the rows where `where` holds (all rows when None), 0 for none."""
    return F.coalesce(F.sum(count if where is None else F.when(where, count)), F.lit(0))


def _versions(first: int, last: int) -> str:
    return f"version {first}" if first == last else f"versions {first}..{last}"


