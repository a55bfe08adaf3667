"""The operator of a derived table: what one run computes from its inputs' new rows.

The run protocol (`chronolake.runtime.derived`) reads the inputs, hands their
rows to the operator's `step`, and commits what the step returns exactly once.
An operator never writes: it returns output, late rows, state and history as
lazy DataFrames, and reads the committed past through its `RunContext`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import reduce

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from chronolake.catalog.checkpoint import Checkpoint
from chronolake.clock import Clock
from chronolake.lake.changelog import COMMIT_VERSION, POSITION, ROW_KIND, RowKind
from chronolake.lake.file_span import FileSpan
from chronolake.runtime.inputs import InputRead
from chronolake.runtime.result import TickReport
from chronolake.runtime.tally import Tally
from chronolake.schema import TableSpec
from chronolake.schema.windows import Windows
from chronolake.watermarks.assigner import LATE_COLUMN, WATERMARK_COLUMN
from chronolake.watermarks.watermark import Watermark

INTERNAL_COLUMNS = (WATERMARK_COLUMN, LATE_COLUMN)
"""The watermark annotations the reader adds to every input row."""

_FIGURE, _COUNT, _COUNTS = "__figure", "__count", "__counts"


@dataclass(frozen=True)
class Step:
    """What one run of an operator produced, before anything is written."""

    output: DataFrame
    """The run's changes to the view: its columns plus `_row_kind`, `_commit_version` and
    `_position` (arrival order); an insert-only operator may leave those out (all +I)."""
    late: DataFrame
    state: dict[str, DataFrame]
    history: DataFrame | None
    figures: Mapping[str, int]
    """Counted by the step; the output's own figures (`rows_out`, by kind) are counted by
    the run as it writes the output (`chronolake.runtime.output_figures`), and those of
    `tallied` by the writes of the frames they are built on. Names built at run time, checked
    against `RunFigures` when the run commits (`runtime.figures.run_figures`)."""
    waiting_reason: str | None = None
    ticks: TickReport | None = None
    """What the ticks and alignment did (a ticked run only)."""
    output_figures: dict[str, Column] = field(default_factory=dict)
    """More figures to count over the output as it is written, as named aggregates."""
    tallied: Tallied = field(default_factory=lambda: Tallied({}, lambda counts: {}))
    watermark_ms: int | None = None
    """The watermark the step ran at (the last tick's, in ticks), set by the run: what it
    commits, so that a clock read between the step and the commit never moves it."""
    processing_time: bool = False
    """Whether that watermark is the clock's (no input has an event-time watermark)."""


OUTPUT = "output"
"""The write of a step's output, as a key of `Tallied.tallies` (the others are state roles)."""


@dataclass(frozen=True)
class Tallied:
    """Figures a run's writes count (`chronolake.runtime.tally`), and the step's figures that
    follow from their counts."""

    tallies: Mapping[str, Tally]
    """By the write that reads each one's `observed` frame: `OUTPUT`, or a state role."""
    figures: Callable[[Mapping[str, int]], Mapping[str, int]]

    def written(self, versions: Mapping[str, int | None]) -> Mapping[str, int]:
        """The figures once the writes are done, `versions` the version each committed (None,
        or missing: skipped, so its tallies are counted now)."""
        if any(versions.get(write) is None for write in self.tallies):
            return self.counted()
        return self.figures({
            name: count for write, tally in self.tallies.items()
            for name, count in tally.written(versions[write]).items()
        })

    def counted(self) -> Mapping[str, int]:
        """The figures counted now, in one Spark job (a ticked run needs each tick's)."""
        return self.figures(_aggregated([
            (tally.frame, tally.aggregates) for tally in self.tallies.values()
        ]))


@dataclass(frozen=True)
class Region:
    """What restating [t0, t1) of an operator's input recomputes (docs/design.md,
    "Restatement"): the input rows it re-reads and the output rows it replaces."""

    input_span: tuple[int, int]
    """The rowtimes [from, to) of the input rows the recompute reads (epoch ms); of those
    that tell the region, when it reads every input row."""
    output_span: tuple[int, int] | None
    """The output's time attribute [from, to) of every row the recompute may change: what the
    next hop restates; None when only the changes tell (the span of their rowtimes)."""
    rows_of: Callable[[DataFrame], DataFrame]
    """The region's rows of an output: of the stored table, or of the recompute."""
    stored_files: FileSpan | None
    """A span of a stored output column that holds every row of the region: the output's
    files a restatement reads and rewrites are those that may hold rows in it (None: all)."""
    late_rows_of_input: bool = True
    """Whether the side table holds the restated input's late rows (they leave it for the
    span: the recompute read them on time); a join's build side has none there."""
    every_input_row: bool = False
    """Whether the recompute reads every input row as of the rewrite, not those of
    `input_span` alone: a region of keys, which rows of any time may decide."""


@dataclass(frozen=True)
class Restated:
    """A recompute of a region: its output rows (to diff with the stored ones), the state after
    it, and its figures."""

    output: DataFrame
    state: dict[str, DataFrame]
    figures: Mapping[str, int]
    region: Region | None = None
    """The region as the recompute found it, when only the rows tell (the keys the range
    touched, or a span that ends at their next versions): its stored rows are replaced and
    its span stamped instead of the planned region's."""
    history: DataFrame | None = None
    """The build events after the rewrite, when the recompute changed them: they replace
    the history table."""
    emitted: DataFrame | None = None
    """Changes committed as they are besides the diff: rows outside the region that the
    watermark the rewrite moved releases, as an ordinary run would emit them; None when the
    watermark did not move (they may update keys stored anywhere, so their commit reads the
    whole output)."""


@dataclass(frozen=True)
class RunContext:
    """What an operator may read of the committed past: the last checkpoint, its state
    tables and the history table (loaders given by the run, so ticks can hand over
    in-memory state instead)."""

    checkpoint: Checkpoint
    clock: Clock
    load_state: Callable[[str], DataFrame | None]
    load_history: Callable[[], DataFrame | None] = field(default=lambda: None)
    consumed_rows: Callable[[str, FileSpan | None], DataFrame] | None = None
    """A restatement's reader of another input: its rows as the last run consumed them (the
    snapshot at that version, with arrival order, no watermarks), of the files that may hold
    rows in a span."""
    tallies_counted: bool = False
    """Whether the run counts the step's tallies before the writes that would observe them
    (each tick of a ticked run; an updating output, read through a checkpoint): a tallied
    frame is then held (`Tally(held=True)`), so that the count and the write share it."""

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
    windows: Windows | None = None
    """A window aggregate's windows: a partition of its `window_start` completes once the
    watermark passes the end of the last window starting in it
    (`chronolake.watermarks.partitions`)."""
    clock_driven: bool = False
    """Whether the clock alone can release held rows (windows closing by processing time),
    so a run is due even when no input moved."""

    @property
    def depends_on_processing_time(self) -> bool:
        """Whether the output depends on when rows were processed, not only on the rows: a
        recompute of the same rows (a restatement) cannot reproduce it. True when the output
        watermark is processing time; an operator that orders by processing time under an
        event-time watermark says so itself."""
        return not self.event_time

    def restates(self, source: str) -> bool:
        """Whether this operator can restate a range of its input table `source`
        (`restated_region`)."""
        return False

    def restated_region(self, source: str, start_ms: int, end_ms: int) -> Region | None:
        """The region a restatement of rows of input table `source` with rowtime in
        [`start_ms`, `end_ms`) recomputes; None when this operator cannot restate it (yet)."""
        return None

    def restate(
        self, context: RunContext, read: InputRead, region: Region, watermark_ms: int | None
    ) -> Restated:
        """The region recomputed from `read`, the input's rows in its span as of the rewrite
        (a bounded input stamped as a refresh stamps it), at the committed watermark
        `watermark_ms`: the windows or intervals it closed are emitted, the open ones' rows
        replace theirs in state."""
        raise NotImplementedError(type(self).__name__)

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


@dataclass(frozen=True)
class Where:
    """The rows of `frame` where `condition` holds, as a figure: counted in the same pass
    over `frame` as its other figures."""

    frame: DataFrame
    condition: Column


def count_figures(frames: Mapping[str, DataFrame | Where]) -> dict[str, int]:
    """The row count of every frame (or of its rows where a condition holds), in one Spark
    job that reads each frame once (a run's figures come from many frames; one small job
    instead of one per count keeps a run's overhead down)."""
    passes: dict[int, tuple[DataFrame, dict[str, Column]]] = {}
    for name, entry in frames.items():
        frame, condition = (
            (entry.frame, entry.condition) if isinstance(entry, Where) else (entry, F.lit(True))
        )
        passes.setdefault(id(frame), (frame, {}))[1][name] = F.count_if(condition)
    return _aggregated(list(passes.values()))


def _aggregated(passes: Sequence[tuple[DataFrame, Mapping[str, Column]]]) -> dict[str, int]:
    """Each frame's named aggregates (counts), in one Spark job that reads each frame once."""
    if not passes:
        return {}
    counts = reduce(DataFrame.unionAll, [
        frame.agg(F.array(*(
            F.struct(F.lit(name).alias(_FIGURE), aggregate.cast("long").alias(_COUNT))
            for name, aggregate in aggregates.items()
        )).alias(_COUNTS)).select(F.inline(_COUNTS))
        for frame, aggregates in passes
    ])
    # One row per figure: metadata-sized.
    found = {row[_FIGURE]: int(row[_COUNT] or 0) for row in counts.collect()}
    return {name: found.get(name, 0) for _, aggregates in passes for name in aggregates}


def without_annotations(rows: DataFrame) -> DataFrame:
    """Input rows without the watermark annotations (state keeps changelog columns only)."""
    return rows.drop(*INTERNAL_COLUMNS)


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
