"""A run's output figures (rows out, by kind, and what its operator counts there), counted by
the job that writes the output.

An operator's output can be millions of rows (an interval join's pairs); counting them before
the write meant storing them and reading them again for each figure. Observed on the write
(`DataFrame.observe`), they cost no job and no read of their own. An updating output's kinds
are needed before its commit (a retraction rewrites stored rows), so those are counted first,
in one pass.
"""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import Column, DataFrame, Observation
from pyspark.sql import functions as F

from chronolake.lake.changelog import ROW_KIND, RowKind

KIND_FIGURES: dict[str, RowKind] = {
    "inserts_out": RowKind.INSERT,
    "update_befores_out": RowKind.UPDATE_BEFORE,
    "update_afters_out": RowKind.UPDATE_AFTER,
    "deletes_out": RowKind.DELETE,
}
"""A run's output rows by kind (+I, -U, +U, -D), as figures."""


class OutputFigures:
    """`rows_out`, the figures of `KIND_FIGURES` and the operator's `extra` figures (named
    aggregates) over a run's output `changes` (with `_row_kind`).

    Write `observed` to have them counted by that write, then read `written(version)`; or
    read `counted()` for a job of their own.
    """

    def __init__(self, changes: DataFrame, extra: Mapping[str, Column]) -> None:
        by_kind = {name: F.count_if(F.col(ROW_KIND) == kind.value)
                   for name, kind in KIND_FIGURES.items()}
        self._aggregates = [column.alias(name) for name, column in {**by_kind, **extra}.items()]
        self._changes = changes
        self._observation = _observation_for(changes)
        self.observed = changes.observe(self._observation, *self._aggregates)

    def counted(self) -> dict[str, int]:
        """The figures, counted now by one aggregation over the output."""
        row = self._changes.agg(*self._aggregates).first()  # one row of counts
        assert row is not None, "a global aggregate has one row"
        return _with_total(row.asDict())

    def written(self, version: int | None) -> dict[str, int]:
        """The figures the write of `observed` counted; `version` None means that write
        was skipped (a redone run whose output was committed before it was killed), so
        they are counted now."""
        return self.counted() if version is None else _with_total(self._observation.get)


def _with_total(counts: Mapping[str, object]) -> dict[str, int]:
    figures = {name: int(value or 0) for name, value in counts.items()}  # type: ignore[call-overload]
    return {"rows_out": sum(figures[name] for name in KIND_FIGURES), **figures}


def _observation_for(frame: DataFrame) -> Observation:
    """An observation for `frame`'s kind of session. `Observation()` picks Spark Connect's
    whenever the process has opened a Connect session, even for a classic frame."""
    from pyspark.sql.connect.dataframe import DataFrame as ConnectDataFrame

    if isinstance(frame, ConnectDataFrame):
        from pyspark.sql.connect.observation import Observation as ConnectObservation

        return ConnectObservation()  # type: ignore[return-value]
    observation = object.__new__(Observation)  # the classic class, whatever the process opened
    observation.__init__()
    return observation
