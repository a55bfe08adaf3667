"""What a lake holds and where each derived table stands, read from the catalog and checkpoints."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from chronolake.catalog import load_entries
from chronolake.lake.layout import STATE_ROOT, output_path
from chronolake.lake.stamps import latest_recorded_watermark
from chronolake.runtime.checkpoint import CheckpointStore


class TableStatus(BaseModel):
    """One row of `chronolake status`."""

    model_config = ConfigDict(frozen=True)

    name: str
    what: str
    kind: str
    rowtime: str | None
    watermark: datetime | None = None
    pending_rows: int | None = None
    last_run: int | None = None
    last_run_at: datetime | None = None


def lake_status(root: str | os.PathLike[str]) -> list[TableStatus]:
    """Every table and view of the lake, with the latest checkpoint of each view (no Spark)."""
    rows: list[TableStatus] = []
    for name, entry in load_entries(root).items():
        spec = entry.spec
        checkpoint = CheckpointStore(Path(root) / STATE_ROOT / name).latest()
        ran = checkpoint.run > 0
        rows.append(
            TableStatus(
                name=spec.name,
                what=entry.kind,
                kind=spec.kind.value,
                rowtime=spec.rowtime,
                watermark=_instant(latest_recorded_watermark(output_path(Path(root), name)))
                if ran else None,
                pending_rows=checkpoint.counters.get("pending_rows") if ran else None,
                last_run=checkpoint.run if ran else None,
                last_run_at=_instant(checkpoint.finished_at * 1000)
                if ran and checkpoint.finished_at
                else None,
            )
        )
    return rows


def _instant(epoch_ms: float | None) -> datetime | None:
    return None if epoch_ms is None else datetime.fromtimestamp(epoch_ms / 1000, tz=UTC)
