"""The operator of a derived table: what one run computes from its inputs' new rows.

The run protocol (`chronolake.runtime.derived`) reads the inputs, hands their
rows to the operator's `step`, and commits what the step returns exactly once.
An operator never writes: it returns output, late rows, state and history as
lazy DataFrames, and reads the committed past through its `RunContext`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import reduce

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from chronolake.clock import Clock
from chronolake.lake.changelog import COMMIT_VERSION, POSITION, ROW_KIND, RowKind
from chronolake.runtime.checkpoint import Checkpoint
from chronolake.runtime.inputs import InputRead
from chronolake.runtime.result import TickReport
from chronolake.schema import TableSpec
from chronolake.watermarks.assigner import LATE_COLUMN, WATERMARK_COLUMN
from chronolake.watermarks.watermark import Watermark

INTERNAL_COLUMNS = (WATERMARK_COLUMN, LATE_COLUMN)
"""The watermark annotations the reader adds to every input row."""

_FIGURE = "__figure"

KIND_FIGURES: dict[str, RowKind] = {
    "inserts_out": RowKind.INSERT,
    "update_befores_out": RowKind.UPDATE_BEFORE,
    "update_afters_out": RowKind.UPDATE_AFTER,
    "deletes_out": RowKind.DELETE,
}
"""A run's output rows by kind (+I, -U, +U, -D), as figures."""


@dataclass(frozen=True)
class Step:
    """What one run of an operator produced, before anything is written."""

    output: DataFrame
    """The run's changes to the view: its columns plus `_row_kind`, `_commit_version` and
    `_position` (arrival order); an insert-only operator may leave those out (all +I)."""
    late: DataFrame
    state: dict[str, DataFrame]
    history: DataFrame | None
    figures: dict[str, int]
    waiting_reason: str | None = None
    ticks: TickReport | None = None
    """What the ticks and alignment did (a ticked run only)."""


@dataclass(frozen=True)
class RunContext:
    """What an operator may read of the committed past: the last checkpoint, its state
    tables and the history table (loaders given by the run, so ticks can hand over
    in-memory state instead)."""

    checkpoint: Checkpoint
    clock: Clock
    load_state: Callable[[str], DataFrame | None]
    load_history: Callable[[], DataFrame | None] = field(default=lambda: None)

    def state(self, role: str) -> DataFrame | None:
        """State table `role` as the last run left it (None before any)."""
        return self.load_state(role)

    def history(self) -> DataFrame | None:
        """Every build event committed so far (None when the operator keeps none)."""
        return self.load_history()


class Operator(ABC):
    """One derived table's computation over its inputs' new rows."""

    inputs: tuple[TableSpec, ...]
    """The tables whose commits feed the operator, read by the run."""
    event_time: bool
    """Whether the output watermark follows event time (else processing time)."""
    output_delay_ms: int = 0
    """How far the output's watermark trails the operator's: an interval join emits rows up
    to that far behind its inputs' watermark (Flink's max output delay), so its output's
    watermark is held back by as much, and downstream finds none of them late."""
    clock_driven: bool = False
    """Whether the clock alone can release held rows (windows closing by processing time),
    so a run is due even when no input moved."""

    @abstractmethod
    def step(
        self,
        context: RunContext,
        reads: Mapping[str, InputRead],
        watermark: Watermark,
        watermark_ms: int | None,
    ) -> Step:
        """This run's output, late rows, state and figures, all lazy.

        `watermark` is the minimum of the inputs' watermarks; `watermark_ms` the
        output watermark the run commits (never below the last run's; the clock's
        time under processing time; None while no watermark was reached).
        """


def count_figures(frames: Mapping[str, DataFrame]) -> dict[str, int]:
    """The row count of every frame, in one Spark job (a run's figures come from many frames;
    one small job instead of one per count keeps a run's overhead down)."""
    if not frames:
        return {}
    tagged = [frame.select(F.lit(name).alias(_FIGURE)) for name, frame in frames.items()]
    counts = reduce(DataFrame.unionAll, tagged).groupBy(_FIGURE).count()
    # One row per figure: metadata-sized.
    found = {row[_FIGURE]: int(row["count"]) for row in counts.collect()}
    return {name: found.get(name, 0) for name in frames}


def reused(frame: DataFrame) -> DataFrame:
    """`frame`, computed once by the first job that needs it and read back by the others.

    A lazy local checkpoint: no Spark job of its own (an eager one costs a job each, which
    dominates a run on a few rows), and later plans start from the stored rows.
    """
    return frame.localCheckpoint(eager=False)


def without_annotations(rows: DataFrame) -> DataFrame:
    """Input rows without the watermark annotations (state keeps changelog columns only)."""
    return rows.drop(*INTERNAL_COLUMNS)


def kind_frames(output: DataFrame) -> dict[str, DataFrame]:
    """The output's rows of each kind, to count with the run's other figures."""
    if ROW_KIND not in output.columns:
        return {name: output.where(F.lit(kind is RowKind.INSERT)) for name, kind in
                KIND_FIGURES.items()}
    return {name: output.where(F.col(ROW_KIND) == kind.value) for name, kind in
            KIND_FIGURES.items()}


def as_changes(output: DataFrame) -> DataFrame:
    """A step's output as changes: an insert-only operator's rows become `+I` rows."""
    if ROW_KIND in output.columns:
        return output
    return output.select(
        "*",
        F.lit(RowKind.INSERT.value).alias(ROW_KIND),
        F.lit(None).cast("long").alias(COMMIT_VERSION),
        F.lit(None).cast("long").alias(POSITION),
    )
