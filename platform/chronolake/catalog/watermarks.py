"""Where the watermark of each table and view of a lake stands now, without Spark: the one
answer `chronolake status` and `SHOW TABLES` give.

- A view: the watermark its output's latest commit recorded (`chronolake.lake.stamps`).
- A source whose rowtime is a stored column and whose strategy is the rowtime less a constant:
  that strategy applied to the largest rowtime in Delta's file statistics (`maxValues`).
- Any other source with a watermark: what the latest run of a view reading it recorded as the
  source's watermark (its checkpoint), naming that view.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from chronolake.catalog.checkpoint import Checkpoint, CheckpointStore
from chronolake.catalog.entry import CatalogEntry
from chronolake.lake.layout import output_path, table_location
from chronolake.lake.stamps import stamped_watermark
from chronolake.lake.tables import column_maximum_ms, is_table, latest_commits
from chronolake.location import Location
from chronolake.schema import PhysicalColumn, TableSpec
from chronolake.watermarks import LONG_MIN
from chronolake.watermarks.bounded import bounded_watermark

FROM_FILE_STATISTICS = "file statistics"
FROM_OWN_RUN = "its last run"


@dataclass(frozen=True, slots=True)
class CurrentWatermark:
    """A table's or view's watermark now (epoch ms) and where it was read (`watermark_from`)."""

    watermark_ms: int | None = None
    watermark_from: str | None = None


def current_watermarks(
    root: Location, entries: Mapping[str, CatalogEntry]
) -> dict[str, CurrentWatermark]:
    """The watermark of every entry of `entries` (by their keys); an empty `CurrentWatermark`
    for a table without a watermark, a view that has not run, or a source no run read yet."""
    watermarks: dict[str, CurrentWatermark] = {}
    checkpoints: list[tuple[str, Checkpoint]] | None = None  # read once, when first needed
    for name, entry in entries.items():
        spec = entry.spec
        if entry.kind == "view":
            watermarks[name] = _view_watermark(root, spec.name)
        elif isinstance(spec, TableSpec) and spec.watermark is not None:
            found = _from_statistics(root, spec)
            if found is None:
                if checkpoints is None:
                    checkpoints = _latest_checkpoints(root, entries)
                found = _from_last_run(spec.name, checkpoints)
            watermarks[name] = found
        else:
            watermarks[name] = CurrentWatermark()
    return watermarks


def _latest_checkpoints(
    root: Location, entries: Mapping[str, CatalogEntry]
) -> list[tuple[str, Checkpoint]]:
    """Each view's name and its latest checkpoint."""
    return [(entry.spec.name, CheckpointStore.of(root, entry.spec.name).latest())
            for entry in entries.values() if entry.kind == "view"]


def _view_watermark(root: Location, name: str) -> CurrentWatermark:
    output = output_path(root, name)
    if not is_table(output):
        return CurrentWatermark()
    [commit] = latest_commits(output, 1)
    watermark = stamped_watermark(commit)
    return CurrentWatermark(watermark, FROM_OWN_RUN if watermark is not None else None)


def _from_statistics(root: Location, spec: TableSpec) -> CurrentWatermark | None:
    """The strategy applied to the largest stored rowtime; None when the rowtime is computed,
    the strategy is not a constant delay, or the files logged no statistics of it."""
    assert spec.watermark is not None
    if not isinstance(spec.column(spec.watermark.rowtime.split(".")[0]), PhysicalColumn):
        return None
    path = table_location(root, spec.options.path)
    if not is_table(path):
        return None
    maximum = column_maximum_ms(path, spec.watermark.rowtime)
    watermark = None if maximum is None else bounded_watermark(spec.watermark, maximum)
    return None if watermark is None else CurrentWatermark(watermark, FROM_FILE_STATISTICS)


def _from_last_run(table: str, checkpoints: list[tuple[str, Checkpoint]]) -> CurrentWatermark:
    """The source watermark the latest run of a view reading `table` held (its checkpoint)."""
    latest: tuple[float, str, int] | None = None
    for view, checkpoint in checkpoints:
        held = [position.watermarks.watermark for input_name, position in
                checkpoint.inputs.items() if input_name.lower() == table.lower()]
        held = [watermark for watermark in held if watermark != LONG_MIN]
        finished = checkpoint.finished_at or 0.0
        if held and (latest is None or finished > latest[0]):
            latest = (finished, view, max(held))
    if latest is None:
        return CurrentWatermark()
    _, view, watermark = latest
    return CurrentWatermark(watermark, f"last run of view {view}")
