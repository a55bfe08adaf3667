"""The ticks of a catch-up run: which chunk of which split is read in which tick.

A run's backlog is cut, per split, into chunks in arrival order (see
`chronolake.runtime.ticks`). `schedule_ticks` replays the run tick by tick on
metadata only (one watermark per chunk): in each tick every split that is not
paused and has chunks left reads its next chunk, and emits its watermark at the
end of the tick (on-periodic). The source watermarks that follow (the minimum
over the active splits, with idleness) are the watermark assigner's business:
the runtime stamps the ticked rows with it. Alignment (FLIP-182/217) is updated
before the first tick,
then every `update_every_ticks` ticks of each source: the splits report to the
`AlignmentCoordinator` and each source's `SplitAligner` pauses the splits above
its max desired watermark and resumes the paused ones at or below it.

A split whose backlog in this run is read counts as finished until the next
run (its report is forgotten): a run must read its whole backlog, so a split
with nothing left must not hold the others back. When every split with chunks
left is paused, alignment is updated at once (the schedule has nothing else to
do). The schedule is a deterministic function of the chunks, so a run killed
half-way through a catch-up is redone identically.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from chronolake.alignment.aligner import SplitAligner
from chronolake.alignment.coordinator import AlignmentCoordinator
from chronolake.alignment.settings import AlignmentSettings
from chronolake.watermarks import LONG_MIN

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class SourceBacklog:
    """One source's backlog in a run, as the scheduler sees it.

    `chunks[split]` lists, in arrival order, the largest watermark each chunk of the
    split generates (None: the chunk generates none, e.g. null rowtimes).
    """

    source: str
    chunks: Mapping[str, Sequence[int | None]]
    start_splits: Mapping[str, int] = field(default_factory=dict)
    alignment: AlignmentSettings | None = None


@dataclass(frozen=True)
class AlignmentDecision:
    """One alignment update of one source that paused or resumed something."""

    tick: int
    source: str
    max_desired_ms: int | None
    paused: tuple[str, ...]
    resumed: tuple[str, ...]


@dataclass(frozen=True)
class SourceSchedule:
    """Where each chunk of one source goes, and what alignment did to the source."""

    ticks: Mapping[tuple[str, int], int]
    split_watermarks: Mapping[str, int]
    pauses: int = 0
    resumes: int = 0
    paused_splits: tuple[str, ...] = ()
    unaligned: bool = False


@dataclass(frozen=True)
class TickSchedule:
    """The run's ticks: their number, each source's schedule, and the alignment decisions."""

    count: int
    sources: Mapping[str, SourceSchedule]
    decisions: tuple[AlignmentDecision, ...]


class _Source:
    """A source's progress while the schedule is replayed."""

    def __init__(self, backlog: SourceBacklog) -> None:
        self.backlog = backlog
        self.next_chunk = dict.fromkeys(backlog.chunks, 0)
        self.splits = dict(backlog.start_splits)
        self.ticks: dict[tuple[str, int], int] = {}
        self.ever_paused: set[str] = set()
        self.ever_unaligned = False
        settings = backlog.alignment
        self.aligner = None if settings is None else SplitAligner(
            allow_unaligned_splits=settings.allow_unaligned_splits,
            can_pause_splits=settings.can_pause_splits,
            source=backlog.source,
        )

    def pending(self) -> dict[str, int]:
        """The splits with chunks left, and their current watermarks."""
        return {
            split: self.splits.get(split, LONG_MIN)
            for split, chunks in self.backlog.chunks.items()
            if self.next_chunk[split] < len(chunks)
        }

    def readable(self) -> list[str]:
        paused = self.aligner.paused if self.aligner is not None else set()
        return sorted(set(self.pending()) - paused)

    def read(self, tick: int, splits: Sequence[str]) -> None:
        """Read the next chunk of each of `splits` in `tick`; each emits its watermark."""
        for split in splits:
            index = self.next_chunk[split]
            self.ticks[(split, index)] = tick
            self.next_chunk[split] = index + 1
            value = self.backlog.chunks[split][index]
            current = self.splits.setdefault(split, LONG_MIN)
            if value is not None:
                self.splits[split] = max(current, value)

    def schedule(self) -> SourceSchedule:
        aligner = self.aligner
        return SourceSchedule(
            ticks=self.ticks,
            split_watermarks=dict(self.splits),
            pauses=aligner.pauses if aligner else 0,
            resumes=aligner.resumes if aligner else 0,
            paused_splits=tuple(sorted(self.ever_paused)),
            unaligned=self.ever_unaligned,
        )


def schedule_ticks(backlogs: Sequence[SourceBacklog]) -> TickSchedule:
    """Replay a run's ticks over `backlogs` with watermark alignment; see the module doc.

    Raises `RunError` (from `SplitAligner`) when a source must pause one of several
    splits its reader cannot pause and does not allow unaligned splits.

    Example:
        >>> ahead = SourceBacklog("orders", {"eu": [10, 20, 30], "us": [5_000, 6_000]},
        ...                       alignment=AlignmentSettings(group="g", max_drift_ms=100))
        >>> schedule_ticks([ahead]).sources["orders"].paused_splits
        ('us',)
    """
    sources = {backlog.source: _Source(backlog) for backlog in backlogs}
    coordinator = AlignmentCoordinator()
    for source in sources.values():
        if source.backlog.alignment is not None:
            settings = source.backlog.alignment
            coordinator.register(source.backlog.source, settings.group, settings.max_drift_ms)
    decisions: list[AlignmentDecision] = []
    _align(sources, coordinator, decisions, tick=0, every_source=True)
    tick = 0
    while any(source.pending() for source in sources.values()):
        reading = {name: source.readable() for name, source in sources.items()}
        if not any(reading.values()):  # everyone left is paused: align now
            _align(sources, coordinator, decisions, tick=tick, every_source=True)
            reading = {name: source.readable() for name, source in sources.items()}
            assert any(reading.values()), "the group's slowest split is never paused"
        for name, source in sources.items():
            source.read(tick, reading[name])
        tick += 1
        _align(sources, coordinator, decisions, tick=tick, every_source=False)
    return TickSchedule(
        count=max(tick, 1),
        sources={name: source.schedule() for name, source in sources.items()},
        decisions=tuple(decisions),
    )


def _align(
    sources: Mapping[str, _Source],
    coordinator: AlignmentCoordinator,
    decisions: list[AlignmentDecision],
    *,
    tick: int,
    every_source: bool,
) -> None:
    """Report every aligned split to the coordinator, then update the aligners that are due
    after `tick` ticks (`every_source`: all of them)."""
    aligned = [s for s in sources.values() if s.aligner is not None]
    for source in aligned:
        name, pending = source.backlog.source, source.pending()
        for split in source.backlog.chunks.keys() - pending.keys():
            coordinator.forget(name, split)
        for split, watermark in pending.items():
            coordinator.report(name, split, watermark)
    for source in aligned:
        settings, aligner = source.backlog.alignment, source.aligner
        assert settings is not None and aligner is not None
        if not every_source and tick % settings.update_every_ticks:
            continue
        name, pending = source.backlog.source, source.pending()
        max_desired = coordinator.max_desired(name)
        pause, resume = aligner.update(max_desired, pending)
        source.ever_paused |= aligner.paused
        source.ever_unaligned |= aligner.unaligned
        if pause or resume:
            decisions.append(
                AlignmentDecision(
                    tick=tick, source=name, max_desired_ms=max_desired,
                    paused=tuple(sorted(pause)), resumed=tuple(sorted(resume)),
                )
            )
