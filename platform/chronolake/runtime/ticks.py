"""Ticks of a run: a backlog cut into bounded steps, with split watermark alignment.

A run whose inputs set `'scan.max-rows-per-tick'` does not hand its whole
backlog to the operator at once. Per input and split, the rows in arrival order
are cut into chunks: of at most that many rows when the input sets the option,
else one chunk per commit (an input with `SYSTEM_WATERMARK()` always ticks per
commit: its watermark is emitted after whole commits only). The chunks'
watermarks come from the facts the read's watermark assigner already counted
per (split, commit), without a Spark job, unless a commit is cut inside (then one
job per input reads back a row per (split, chunk)).
`chronolake.alignment.schedule_ticks` replays the ticks on those facts (pausing
the splits that run ahead of their alignment group) and says in which tick each
chunk is read. A broadcast join of that small table puts every row in its tick,
and the watermark assigner stamps the rows again with the tick as its emission
period, so `_watermark`/`_late` are what the operator would see tick by tick.
Inputs without event-time watermarks (processing time, hybrid) are read whole
in the first tick.

Without `'scan.max-rows-per-tick'` on any input a run is one tick, exactly as
before: `plan_ticks` returns None without a Spark job.

The ticks are a function of the rows the run's intent fixes, so a run killed
half-way through a catch-up is redone with the same ticks and the same output.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import reduce

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType

from chronolake.alignment.schedule import SourceBacklog, TickSchedule, schedule_ticks
from chronolake.alignment.settings import AlignmentSettings
from chronolake.catalog.checkpoint import Checkpoint, InputPosition
from chronolake.lake.changelog import ARRIVAL_ORDER, COMMIT_VERSION
from chronolake.runtime.figures import LEVEL_FIGURES
from chronolake.runtime.inputs import InputRead, combined_watermark
from chronolake.runtime.operator import Operator, RunContext, Step
from chronolake.runtime.result import TickReport
from chronolake.runtime.reuse import reused
from chronolake.spark.session import join_local
from chronolake.watermarks.assigner import (
    LATE_COLUMN,
    WATERMARK_COLUMN,
    AssignedChangelog,
    WatermarkAssigner,
)
from chronolake.watermarks.millis import watermark_millis
from chronolake.watermarks.progress import GENERATED, SPLIT, Progress, SplitTick
from chronolake.watermarks.watermark import Watermark

TICK_COLUMN = "__tick"
"""The tick in which a row is read (0-based), on the rows of a ticked run."""

_CHUNK = "__tick_chunk"
_OFFSET = "__tick_split_offset"
_MAX = "__tick_max"


@dataclass(frozen=True)
class TickedRun:
    """A run's inputs cut into ticks, with each input's watermark after every tick."""

    count: int
    reads: Mapping[str, InputRead]
    rows: Mapping[str, DataFrame]
    """The ticked inputs' rows, restamped, with `TICK_COLUMN` (checkpointed)."""
    watermarks: Mapping[str, tuple[Watermark, ...]]
    schedule: TickSchedule

    def reads_at(self, tick: int) -> dict[str, InputRead]:
        """Each input's rows of `tick` and its watermark at the end of the tick.

        The last tick carries each input's watermark as the whole read assigned it, so
        the run commits the same watermarks as an unticked run of the same commits.
        """
        last = tick == self.count - 1
        return {
            name: replace(
                read,
                rows=self._rows_at(name, tick),
                watermark=read.watermark if last else self.watermarks[name][tick],
            )
            for name, read in self.reads.items()
        }

    def _rows_at(self, name: str, tick: int) -> DataFrame:
        ticked = self.rows.get(name)
        if ticked is None:  # no event-time progress: the whole read in the first tick
            read = self.reads[name].rows
            return read if tick == 0 else read.limit(0)
        return ticked.where(F.col(TICK_COLUMN) == tick).drop(TICK_COLUMN)

    def report(self, buffered_rows: Sequence[int]) -> TickReport:
        """What the ticks and alignment did, with the rows buffered after each tick."""
        sources = self.schedule.sources
        return TickReport(
            ticks=self.count,
            buffered_rows=list(buffered_rows),
            split_watermarks={n: dict(s.split_watermarks) for n, s in sources.items()},
            paused_splits={n: list(s.paused_splits) for n, s in sources.items() if s.paused_splits},
            pauses={n: s.pauses for n, s in sources.items()},
            resumes={n: s.resumes for n, s in sources.items()},
            unaligned=sorted(n for n, s in sources.items() if s.unaligned),
            decisions=[
                f"tick {d.tick}: {d.source} max desired {d.max_desired_ms}"
                + (f", paused {', '.join(d.paused)}" if d.paused else "")
                + (f", resumed {', '.join(d.resumed)}" if d.resumed else "")
                for d in self.schedule.decisions
            ],
        )


def step_ticks(
    operator: Operator,
    ticked: TickedRun,
    context: RunContext,
    *,
    watermark_ms: Callable[[Checkpoint, Watermark], int | None],
) -> Step:
    """Run `operator` tick by tick, the state carried in memory from one tick to the next.

    The first tick sees the committed past (`context`); each later tick sees the one
    before as if it had been committed: its state (checkpointed locally, so plans do
    not grow with the ticks), its output watermark as the checkpoint's watermark and
    horizon, and the committed history plus the earlier ticks' history rows.
    `watermark_ms` is the run's rule for the output watermark (never below the
    checkpoint's).
    """
    outputs: list[DataFrame] = []
    late: list[DataFrame] = []
    history: list[DataFrame] = []
    buffered: list[int] = []
    figures: dict[str, int] = {}
    state: dict[str, DataFrame] = {}
    step: Step | None = None
    committed = context.history
    for tick in range(ticked.count):
        reads = ticked.reads_at(tick)
        combined = combined_watermark(reads.values(), with_idleness=tick == ticked.count - 1)
        output_ms = watermark_ms(context.checkpoint, combined)
        step = operator.step(context, reads, combined, output_ms)
        # Lazy: the next tick's first job materializes it and cuts the lineage there (the
        # last tick's is only written, once).
        last = tick == ticked.count - 1
        state = {role: frame if last else reused(frame) for role, frame in step.state.items()}
        outputs.append(step.output)
        late.append(step.late)
        if step.history is not None:
            history.append(step.history)
        tick_figures = {**step.figures, **step.tallied.counted()}  # the tick's, each summed
        buffered.append(tick_figures.get("state_rows", 0))
        for name, value in tick_figures.items():
            figures[name] = value if name in LEVEL_FIGURES else figures.get(name, 0) + value
        context = _next_context(
            context, state, committed, history, output_ms, event_time=operator.event_time
        )
    assert step is not None, "a ticked run has at least one tick"
    report = ticked.report(buffered)
    figures.update(report.figures())
    return Step(
        output=reduce(DataFrame.unionByName, outputs),
        late=reduce(DataFrame.unionByName, late),
        state=state,
        history=reduce(DataFrame.unionByName, history) if history else None,
        figures=figures,
        waiting_reason=step.waiting_reason,
        ticks=report,
        output_figures=step.output_figures,
        watermark_ms=output_ms,
        processing_time=combined.use_processing_time,
    )


def _next_context(
    context: RunContext,
    state: Mapping[str, DataFrame],
    committed: Callable[[], DataFrame | None],
    history: Sequence[DataFrame],
    output_ms: int | None,
    *,
    event_time: bool,
) -> RunContext:
    """What the next tick reads of the past: this tick as if committed (`committed`: the
    history table as the last run left it; `history`: the ticks' rows so far)."""
    earlier = list(history)

    def load_history() -> DataFrame | None:
        frames = [frame for frame in (committed(), *earlier) if frame is not None]
        return reduce(DataFrame.unionByName, frames) if frames else None

    checkpoint = context.checkpoint.model_copy(
        update={"watermark": output_ms, "horizon": output_ms if event_time else None}
    )
    return RunContext(
        checkpoint=checkpoint, clock=context.clock, load_state=state.get,
        load_history=load_history, tallies_counted=context.tallies_counted,
    )


def plan_ticks(
    reads: Mapping[str, InputRead], starts: Mapping[str, InputPosition]
) -> TickedRun | None:
    """Cut the run's backlog into ticks; None when no input bounds its ticks (one tick).

    `starts` are the inputs' positions before the run (their stored watermarks).
    Raises `RunError` when alignment must pause a split its reader cannot pause and
    `'pipeline.watermark-alignment.allow-unaligned-source-splits'` is not true.
    """
    if all(read.spec.options.max_rows_per_tick is None for read in reads.values()):
        return None
    cuts = {name: _cut(read) for name, read in reads.items() if _event_time(read)}
    schedule = schedule_ticks(
        [
            SourceBacklog(
                source=name,
                chunks=cut.chunk_watermarks(),
                start_splits=starts[name].watermarks.splits,
                alignment=AlignmentSettings.for_table(reads[name].spec),
            )
            for name, cut in cuts.items()
        ]
    )
    rows: dict[str, DataFrame] = {}
    watermarks: dict[str, tuple[Watermark, ...]] = {}
    for name, read in reads.items():
        cut = cuts.get(name)
        if cut is None:
            watermarks[name] = (read.watermark,) * schedule.count
            continue
        assigned = cut.ticked(schedule.sources[name].ticks, starts[name])
        rows[name] = reused(assigned.rows.select(*read.rows.columns, TICK_COLUMN))
        watermarks[name] = _watermarks_after(assigned.progress, schedule.count)
    return TickedRun(
        count=schedule.count, reads=reads, rows=rows, watermarks=watermarks, schedule=schedule
    )


def _event_time(read: InputRead) -> bool:
    """Whether the input makes event-time progress of its own in this run (else: read in tick
    0). A derived table's watermark is the one its commits recorded, and a plain view's its
    source's: neither has a generator to cut ticks with."""
    return read.assigner is not None and not read.watermark.use_processing_time


@dataclass(frozen=True)
class _Cut:
    """One input's rows cut into chunks per split, in arrival order.

    The read's assigner already counted the rows of every (split, commit) and took
    their largest watermark and commit time. When every commit falls inside one chunk
    (always so for a backlog under the bound, or with a chunk per commit), the chunks'
    watermarks and the ticks' facts follow from those counts without a Spark job.
    Otherwise a commit is cut inside, by rank: one job reads the chunks' watermarks
    back, and the ticked rows are assigned again with one job more.
    """

    read: InputRead
    commits: tuple[SplitTick, ...]
    """The assigner's facts per (split, commit), in arrival order."""
    commit_chunks: Mapping[tuple[str, int], int] | None
    """(split, commit) -> chunk, when no commit straddles two chunks."""
    chunked: DataFrame | None
    """The rows with their chunk, when a commit does (checkpointed)."""

    def chunk_watermarks(self) -> dict[str, list[int | None]]:
        """Per split, the largest generated watermark of each chunk, in chunk order."""
        if self.chunked is not None:
            return _chunk_watermarks(self.chunked)
        assert self.commit_chunks is not None
        chunks: dict[str, dict[int, int | None]] = {}
        for fact in self.commits:
            by_chunk = chunks.setdefault(fact.split, {})
            chunk = self.commit_chunks[(fact.split, fact.tick)]
            by_chunk[chunk] = _larger(by_chunk.get(chunk), fact.generated)
        return {split: [marks[i] for i in sorted(marks)] for split, marks in chunks.items()}

    def ticked(
        self, ticks: Mapping[tuple[str, int], int], start: InputPosition
    ) -> AssignedChangelog:
        """The rows in their ticks, stamped again with the tick as the emission period."""
        assigner = _assigner(self.read).model_copy(update={"tick": TICK_COLUMN})
        columns = [c for c in self.read.rows.columns if c not in (WATERMARK_COLUMN, LATE_COLUMN)]
        if self.chunked is not None:
            rows = _with_ticks(self.chunked, (SPLIT, _CHUNK), ticks)
            return assigner.assign(rows.select(*columns, TICK_COLUMN), state=start.watermarks)
        assert self.commit_chunks is not None
        commit_ticks = {key: ticks[(key[0], chunk)] for key, chunk in self.commit_chunks.items()}
        base, _, _ = _assigner(self.read).annotate(self.read.rows.select(*columns))
        rows = _with_ticks(base, (SPLIT, COMMIT_VERSION), commit_ticks)
        maxima = _tick_facts(self.commits, commit_ticks)
        return assigner.assign(
            rows.select(*columns, TICK_COLUMN), state=start.watermarks, maxima=maxima
        )


def _cut(read: InputRead) -> _Cut:
    assigner = _assigner(read)
    assert assigner.tick == COMMIT_VERSION, "a read's assigner ticks per commit"
    commits = tuple(sorted(read.maxima, key=lambda fact: (fact.split, fact.tick)))
    bound = read.spec.options.max_rows_per_tick
    by_commit = bound is None or assigner.is_system_watermark
    chunks, straddled = commit_chunks(commits, None if by_commit else bound)
    if not straddled:
        return _Cut(read, commits, chunks, None)
    assert bound is not None
    return _Cut(read, commits, None, reused(_chunked(read, commits, bound)))


def commit_chunks(
    commits: Sequence[SplitTick], bound: int | None
) -> tuple[dict[tuple[str, int], int], bool]:
    """Each commit's chunk in its split (by rank, or one per commit when `bound` is None),
    and whether some commit straddles two chunks."""
    chunks: dict[tuple[str, int], int] = {}
    offsets: dict[str, int] = {}
    straddled = False
    for fact in commits:
        offset = offsets.get(fact.split, 0)
        if bound is None:
            chunks[(fact.split, fact.tick)] = offset
            offsets[fact.split] = offset + 1
            continue
        first, last = offset // bound, (offset + fact.rows - 1) // bound
        straddled = straddled or first != last
        chunks[(fact.split, fact.tick)] = first
        offsets[fact.split] = offset + fact.rows
    return chunks, straddled


def _tick_facts(
    commits: Sequence[SplitTick], commit_ticks: Mapping[tuple[str, int], int]
) -> list[SplitTick]:
    """The per-(split, tick) facts of the ticked rows, from the per-(split, commit) ones."""
    facts: dict[tuple[str, int], SplitTick] = {}
    for fact in commits:
        key = (fact.split, commit_ticks[(fact.split, fact.tick)])
        known = facts.get(key)
        facts[key] = SplitTick(
            split=fact.split,
            tick=key[1],
            generated=fact.generated if known is None else _larger(known.generated, fact.generated),
            commit_ms=fact.commit_ms if known is None else max(known.commit_ms, fact.commit_ms),
            rows=fact.rows + (0 if known is None else known.rows),
        )
    return list(facts.values())


def _larger(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else max(a, b)


def _assigner(read: InputRead) -> WatermarkAssigner:
    assert read.assigner is not None, "only event-time inputs are ticked"
    return read.assigner


def _chunked(read: InputRead, commits: Sequence[SplitTick], bound: int) -> DataFrame:
    """The input's rows with their split key, generated watermark (ms) and chunk number:
    the rows of earlier commits, then the rank inside the commit (a window per commit,
    never one over a whole split)."""
    assigner = _assigner(read)
    # The assigner's own split key and generated value, so the chunks follow its rules.
    base, generated_type, _ = assigner.annotate(read.rows.drop(WATERMARK_COLUMN, LATE_COLUMN))
    in_commit = Window.partitionBy(SPLIT, COMMIT_VERSION).orderBy(*ARRIVAL_ORDER)
    chunk = F.floor((F.col(_OFFSET) + F.row_number().over(in_commit) - 1) / bound)
    return _with_commit_offsets(base, commits).select(
        *read.rows.drop(WATERMARK_COLUMN, LATE_COLUMN).columns,
        F.col(SPLIT),
        chunk.cast(LongType()).alias(_CHUNK),
        watermark_millis(F.col(GENERATED), generated_type).alias(GENERATED),
    )


def _with_commit_offsets(base: DataFrame, commits: Sequence[SplitTick]) -> DataFrame:
    """`base` plus, per (split, commit), the split's rows in earlier commits."""
    offsets: dict[tuple[str, int], int] = {}
    seen: dict[str, int] = {}
    for fact in commits:
        offsets[(fact.split, fact.tick)] = seen.get(fact.split, 0)
        seen[fact.split] = seen.get(fact.split, 0) + fact.rows
    schema = StructType(
        [StructField(SPLIT, StringType()), StructField(COMMIT_VERSION, LongType()),
         StructField(_OFFSET, LongType())]
    )
    rows = [(split, version, offset) for (split, version), offset in offsets.items()]
    return join_local(base, schema, rows, [SPLIT, COMMIT_VERSION])


def _chunk_watermarks(chunked: DataFrame) -> dict[str, list[int | None]]:
    """Per split, the largest generated watermark of each chunk, in chunk order."""
    facts = chunked.groupBy(SPLIT, _CHUNK).agg(F.max(GENERATED).alias(_MAX))
    chunks: dict[str, dict[int, int | None]] = {}
    # One row per (split, chunk): rows / max-rows-per-tick values, metadata-sized.
    for row in facts.collect():
        chunks.setdefault(row[SPLIT], {})[row[_CHUNK]] = row[_MAX]
    return {split: [by_index[i] for i in sorted(by_index)] for split, by_index in chunks.items()}


def _with_ticks(
    base: DataFrame, key: tuple[str, str], ticks: Mapping[tuple[str, int], int]
) -> DataFrame:
    """`base` plus the tick of its (split, chunk or commit)."""
    schema = StructType(
        [StructField(key[0], StringType()), StructField(key[1], LongType()),
         StructField(TICK_COLUMN, LongType())]
    )
    rows = [(split, part, tick) for (split, part), tick in sorted(ticks.items())]
    return join_local(base, schema, rows, list(key))


def _watermarks_after(progress: Progress, count: int) -> tuple[Watermark, ...]:
    """The source watermark at the end of each of `count` ticks: the start of the next tick
    that has rows of the source, or where the run leaves it."""
    starts = {start.tick: start.watermark for start in progress.ticks}
    after, following = [], progress.watermark
    for tick in reversed(range(count)):
        after.append(Watermark(following))
        following = starts.get(tick, following)
    return tuple(reversed(after))
