"""What a lake holds and where each view stands, read from the catalog, checkpoints and Delta
logs (no Spark)."""

from __future__ import annotations

from datetime import UTC, datetime

from pydantic import BaseModel, ConfigDict, Field

from chronolake.catalog import load_entries
from chronolake.catalog.checkpoint import CheckpointStore
from chronolake.catalog.watermarks import current_watermarks
from chronolake.lake.layout import output_path
from chronolake.lake.tables import is_table, latest_commits
from chronolake.location import Location, LocationLike, as_location
from chronolake.runtime.last_error import last_failure


class TableStatus(BaseModel):
    """One table or view of `chronolake status`."""

    model_config = ConfigDict(frozen=True)

    name: str
    what: str = Field(..., description="table or view.")
    kind: str = Field(..., description="versioned or regular.")
    rowtime: str | None = Field(..., description="The time attribute, if any.")
    watermark: datetime | None = Field(
        None, description="A view's output watermark, a source's current watermark (UTC)."
    )
    watermark_from: str | None = Field(
        None, description="Where the watermark was read: 'its last run' (a view), 'file "
        "statistics' or 'last run of view <name>' (a source; `chronolake.catalog.watermarks`).",
    )
    lag_seconds: float | None = Field(
        None, description="How far the watermark is behind the clock now, in seconds."
    )
    pending_rows: int | None = Field(None, description="Rows held for a later watermark.")
    last_run: int | None = Field(
        None, description="The last committed run (a recomputed view: its output version)."
    )
    last_run_at: datetime | None = Field(None, description="When it committed (UTC).")
    last_error: str | None = Field(None, description="The error of the last run, if it failed.")
    last_error_at: datetime | None = Field(None, description="When that run failed (UTC).")


def lake_status(root: LocationLike, *, now: datetime | None = None) -> list[TableStatus]:
    """Every table and view of the lake, with its watermark and its lag behind `now` (the
    clock's time by default), and where each view's last run left it."""
    now = now or datetime.now(tz=UTC)
    entries = load_entries(root)
    watermarks = current_watermarks(as_location(root), entries)
    rows: list[TableStatus] = []
    for name, entry in entries.items():
        spec = entry.spec
        watermark = _instant(watermarks[name].watermark_ms)
        row = TableStatus(
            name=spec.name, what=entry.kind, kind=spec.kind.value, rowtime=spec.rowtime,
            watermark=watermark, watermark_from=watermarks[name].watermark_from,
            lag_seconds=None if watermark is None else (now - watermark).total_seconds(),
        )
        if entry.kind == "view":
            row = row.model_copy(update=_view_status(as_location(root), name))
        rows.append(row)
    return rows


def _view_status(root: Location, name: str) -> dict[str, object]:
    """A view's last committed run (its checkpoint, or for a recomputed view its output's
    latest commit) and the error of its last run if that failed."""
    fields: dict[str, object] = {}
    output = output_path(root, name)
    if is_table(output):
        [commit] = latest_commits(output, 1)
        fields["last_run"] = commit.get("version")
        fields["last_run_at"] = _instant(commit.get("timestamp"))
    checkpoint = CheckpointStore.of(root, name).latest()
    if checkpoint.run > 0:
        fields["last_run"] = checkpoint.run
        fields["pending_rows"] = checkpoint.counters.get("pending_rows")
        if checkpoint.finished_at:
            fields["last_run_at"] = _instant(checkpoint.finished_at * 1000)
    failure = last_failure(root, name)
    if failure is not None:
        fields["last_error"], fields["last_error_at"] = failure.error, failure.at
    return fields


def _instant(epoch_ms: object) -> datetime | None:
    if not isinstance(epoch_ms, int | float):
        return None
    return datetime.fromtimestamp(epoch_ms / 1000, tz=UTC)
