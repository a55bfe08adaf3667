"""A run's output figures (rows out, by kind, and what its operator counts there), counted by
the job that writes the output (`chronolake.runtime.tally`).

An operator's output can be millions of rows (an interval join's pairs); counting them before
the write meant storing them and reading them again for each figure. An updating output's
kinds are needed before its commit (a retraction rewrites stored rows), so those are counted
first, in one pass.
"""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from chronolake.lake.changelog import ROW_KIND, RowKind
from chronolake.runtime.tally import Tally

KIND_FIGURES: dict[str, RowKind] = {
    "inserts_out": RowKind.INSERT,
    "update_befores_out": RowKind.UPDATE_BEFORE,
    "update_afters_out": RowKind.UPDATE_AFTER,
    "deletes_out": RowKind.DELETE,
}
"""A run's output rows by kind (+I, -U, +U, -D), as figures."""


class OutputFigures(Tally):
    """`rows_out`, the figures of `KIND_FIGURES` and the operator's `extra` figures (named
    aggregates) over a run's output `changes` (with `_row_kind`)."""

    def __init__(self, changes: DataFrame, extra: Mapping[str, Column]) -> None:
        by_kind = {name: F.count_if(F.col(ROW_KIND) == kind.value)
                   for name, kind in KIND_FIGURES.items()}
        super().__init__(changes, {**by_kind, **extra})

    def _counts(self, values: Mapping[str, object]) -> dict[str, int]:
        figures = super()._counts(values)
        return {"rows_out": sum(figures[name] for name in KIND_FIGURES), **figures}
