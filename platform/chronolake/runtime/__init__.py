"""Runs of derived tables: a view materialized incrementally, exactly once, with its state.

`DerivedTable` runs one view: it reads its inputs' new commits, assigns their watermarks,
hands them to the view's operator (temporal join, interval join, window aggregate,
deduplication) and commits the output with the checkpoint that says what it consumed.
`materialize_view` runs any view (recomputing one that keeps no state), `full_refresh`
rebuilds one from scratch; each reports a `RunResult`.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from chronolake.runtime.checkpoint import (
        Checkpoint,
        CheckpointStore,
        InputPosition,
        RunIntent,
    )
    from chronolake.runtime.derived import DerivedTable, RunPlan
    from chronolake.runtime.faults import FaultPoint
    from chronolake.runtime.lock import run_lock
    from chronolake.runtime.refresh import full_refresh
    from chronolake.runtime.result import RunResult, RunStatus, TickReport
    from chronolake.runtime.source_checks import OverwritePolicy
    from chronolake.runtime.views import materialize_view

_OWNERS = {
    "Checkpoint": "checkpoint",
    "CheckpointStore": "checkpoint",
    "InputPosition": "checkpoint",
    "RunIntent": "checkpoint",
    "DerivedTable": "derived",
    "RunPlan": "derived",
    "FaultPoint": "faults",
    "run_lock": "lock",
    "full_refresh": "refresh",
    "RunResult": "result",
    "RunStatus": "result",
    "TickReport": "result",
    "OverwritePolicy": "source_checks",
    "materialize_view": "views",
}
"""Each public name's module. Imported on first use: the lake and the catalog import leaf
modules of this package (`faults`, `checkpoint`, `removal`) while `derived` imports them."""

__all__ = [
    "Checkpoint",
    "CheckpointStore",
    "DerivedTable",
    "FaultPoint",
    "InputPosition",
    "OverwritePolicy",
    "RunIntent",
    "RunPlan",
    "RunResult",
    "RunStatus",
    "TickReport",
    "full_refresh",
    "materialize_view",
    "run_lock",
]


def __getattr__(name: str) -> Any:
    if name not in _OWNERS:
        msg = f"module {__name__!r} has no attribute {name!r}"
        raise AttributeError(msg)
    value = getattr(import_module(f"{__name__}.{_OWNERS[name]}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
