"""Runs of derived tables: a view materialized incrementally, exactly once, with its state.

`DerivedTable` runs one view: it reads its inputs' new commits, assigns their watermarks,
hands them to the view's operator (temporal join, interval join, window aggregate,
deduplication) and commits the output with the checkpoint that says what it consumed.
`materialize_view` runs any view (recomputing one that keeps no state), `full_refresh`
rebuilds one from scratch; each reports a `RunResult`.
"""

from __future__ import annotations

from chronolake.runtime.derived import DerivedTable, RunPlan
from chronolake.runtime.refresh import full_refresh
from chronolake.runtime.result import RunResult, RunStatus, TickReport
from chronolake.runtime.source_checks import OverwritePolicy
from chronolake.runtime.views import materialize_view

__all__ = [
    "DerivedTable",
    "OverwritePolicy",
    "RunPlan",
    "RunResult",
    "RunStatus",
    "TickReport",
    "full_refresh",
    "materialize_view",
]
