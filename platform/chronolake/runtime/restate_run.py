"""What one hop of a restatement reads and refuses: the region of a derived table that a
restated range of its source reaches (docs/design.md, "Restatement").

A hop is a run of the ordinary protocol whose intent names the range
(`RunIntent.restate`): the run re-reads the source's rows in the region's span as of the
rewrite, recomputes the region, and commits the differences with its stored rows
(`DerivedTable.restate`). These are its parts that need no run: which views can be
restated, and the region's rows.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from chronolake.catalog import Catalog
from chronolake.catalog.checkpoint import InputPosition, ReadPhase
from chronolake.errors import DefinitionError
from chronolake.lake.file_span import FileSpan
from chronolake.runtime.inputs import InputRead, assign_watermarks, read_input
from chronolake.runtime.operator import Operator, Region
from chronolake.runtime.reuse import reused
from chronolake.schema import TableSpec, ViewSpec
from chronolake.sql.view_kinds import view_kind
from chronolake.watermarks.assigner import WatermarkAssigner
from chronolake.watermarks.millis import timestamp_millis, within
from chronolake.watermarks.watermark import Watermark


def restated_region(
    view: ViewSpec, operator: Operator, *, source: str, start_ms: int, end_ms: int
) -> Region:
    """The region of `view` that restating [`start_ms`, `end_ms`) of its input table `source`
    recomputes; `DefinitionError` naming what stops it when the view cannot restate it (yet)."""
    refusal = _refusal(view, operator, source)
    if refusal is not None:
        raise DefinitionError(refusal)
    region = operator.restated_region(source, start_ms, end_ms)
    assert region is not None  # `_refusal` asked the operator
    return region


def can_restate(view: ViewSpec, operator: Operator, source: str) -> bool:
    """Whether `view` restates a restated range of its input table `source` (else it reads
    the changes)."""
    return _refusal(view, operator, source) is None


def _refusal(view: ViewSpec, operator: Operator, source: str) -> str | None:
    """Why `view` cannot restate a range of `source`, as its error says; None when it can."""
    through_view = next((spec for spec in operator.inputs if spec.through_view), None)
    if not operator.restates(source) or through_view is not None:
        what = (f"it reads {through_view.name!r}, a view of its source" if through_view
                else f"it is {view_kind(view).written}")
        return (
            f"cannot restate through view {view.name!r}: {what}, and restatement is built for "
            "TUMBLE, HOP and CUMULATE window aggregates, deduplications and history views by "
            "event time, and event-time temporal joins that keep the probe's rowtime (a build "
            "side that is a table) so far; run a full refresh of "
            f"{view.name!r} instead (`chronolake run {view.name} --full-refresh`); nothing was "
            "written"
        )
    if not view.primary_key:
        return (
            f"cannot restate through view {view.name!r}: its rows have no key to replace them "
            "by (a window view whose SELECT drops window_start, window_end or a GROUP BY key, "
            "or a join whose probe side has no primary key); keep them, or run a full refresh "
            "instead; nothing was written"
        )
    return None


@dataclass(frozen=True)
class RegionRead:
    """The source's rows in a region's span as of the rewrite, and where the input stands."""

    read: InputRead
    """The rows, stamped from no watermark: none of them is late, as in a refresh."""
    position: InputPosition
    """The input after the rewrite: its version, and its watermark state advanced by the
    rows as an ordinary run's would be (a restated row may be the latest)."""
    watermark: Watermark
    """The input's watermark from that state."""


def region_read(
    catalog: Catalog, spec: TableSpec, end_version: int, region: Region, *, derived: str,
    position: InputPosition, now_ms: int,
) -> RegionRead:
    """The rows of source `spec` with rowtime in the region's span as of `end_version`, as a
    full refresh reads a snapshot: inserts in the order they arrived, stamped from no
    watermark (under per-commit emission none is late), of the files whose logged rowtimes
    may lie in the span (when the rowtime is a stored column). `position` is where the input
    stood: its watermark state advances by the rows (two Spark jobs, one per stamping). A
    region of keys (`Region.every_input_row`) reads every row."""
    start = InputPosition(version=end_version - 1, phase=ReadPhase.BOOTSTRAP)
    # a computed, nested or commit-time rowtime is no stored column: the span skips nothing
    span = (None if spec.rowtime is None or region.every_input_row
            else FileSpan(spec.rowtime, *region.input_span))
    read = read_input(catalog, spec, start, end_version, derived=derived, span=span)
    region_rows = read.rows
    if not region.every_input_row:
        rowtime = WatermarkAssigner.for_table(spec).rowtime_column()
        rowtime_type = read.rows.select(rowtime).schema[0].dataType
        region_rows = region_rows.where(within(rowtime, rowtime_type, *region.input_span))
    # held once: the stampings, the step and its figures each read the region's rows
    rows = replace(read, rows=reused(region_rows))
    advanced = assign_watermarks(replace(rows, position=rows.position.model_copy(
        update={"watermarks": position.watermarks})), now_ms=now_ms)
    return RegionRead(assign_watermarks(rows, now_ms=now_ms), advanced.position,
                      advanced.watermark)


def changed_span(
    changes: DataFrame, rowtime: str | None, otherwise: tuple[int, int]
) -> tuple[int, int]:
    """The span [from, to) (epoch ms) of the rowtimes of a restatement's `changes` (held: one
    small Spark job), what the next hop restates when the region cannot tell before the
    recompute (a region of keys); `otherwise` when there are none, or the view keeps no
    rowtime."""
    if rowtime is None:
        return otherwise
    millis = timestamp_millis(F.col(f"`{rowtime}`"), changes.schema[rowtime].dataType)
    span = changes.agg(F.min(millis), F.max(millis)).first()  # one row
    if span is None or span[0] is None:
        return otherwise
    return int(span[0]), int(span[1]) + 1
