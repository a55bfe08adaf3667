"""A small pure-Python reference model of DESIGN.md's event-time temporal join, run by run.

The model knows nothing of Spark or Delta: probe rows and build events are plain
records in arrival order, times are whole minutes, and each run is one tick (as
`DerivedTable.run()` is without alignment or a row bound):

- Each source's watermark is periodic per commit (one row per commit here): the
  running maximum of `time - delay` over every row it has read (`-U` and `-D`
  included). A row is late when its time is at or below the watermark in force on
  its arrival, i.e. the maximum over the rows before it.
- After run n the join's watermark is W_n = max(W_{n-1}, min(probe wm, build wm));
  while either source has emitted nothing it does not move.
- Run n emits every probe row arrived so far and not yet emitted whose time is at
  or below W_n, and joins it with the version of its key valid at its time among
  *all build events arrived by the end of run n* (the run is one tick, so a build
  event is visible to every probe row emitted in the same run). Emitted results are
  never revised.
- A version with time t is valid from t until the key's next version; `-U` is
  ignored; among events of one key with the same time the later arrival wins; a
  winning `-D` means no version. A deduplication view forwards a version only if
  its time is at or above every earlier version of its key.

Where Flink differs: it emits after every watermark (here: every commit), so a
probe row emitted by an earlier commit's watermark would not see build events of
later commits of the same run. Both agree on every row whose build events arrived
before the watermark that released it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum


class Kind(StrEnum):
    """Flink row kinds of build events."""

    INSERT = "+I"
    UPDATE_BEFORE = "-U"
    UPDATE_AFTER = "+U"
    DELETE = "-D"


@dataclass(frozen=True)
class BuildEvent:
    """One build changelog row: key, version time (minutes), kind and a value naming it."""

    key: str
    time: int
    kind: Kind
    value: int


@dataclass(frozen=True)
class ProbeRow:
    """One probe row: an id, the join key and its rowtime (minutes)."""

    id: int
    key: str
    time: int


@dataclass(frozen=True)
class Round:
    """What lands in the lake between two runs, each side in its own arrival order."""

    probe: tuple[ProbeRow, ...] = ()
    build: tuple[BuildEvent, ...] = ()


@dataclass
class TemporalJoinModel:
    """The join's emitted rows after every run, as `(probe id, value or None)` pairs.

    `dedup` makes the build side a deduplication view; `left` keeps unmatched rows.
    """

    probe_delay: int
    build_delay: int
    left: bool = False
    dedup: bool = False
    probe: list[ProbeRow] = field(default_factory=list)
    build: list[BuildEvent] = field(default_factory=list)
    emitted: dict[int, int | None] = field(default_factory=dict)
    watermark: int | None = None
    late_probe: int = 0
    late_build: int = 0

    def run(self, arrived: Round) -> dict[int, int | None]:
        """Apply one run; return every row emitted so far (matched value, or None for LEFT)."""
        self.late_probe += _late_rows([p.time for p in self.probe], [p.time for p in arrived.probe],
                                      self.probe_delay)
        self.late_build += _late_rows([e.time for e in self.build], [e.time for e in arrived.build],
                                      self.build_delay)
        self.probe += arrived.probe
        self.build += arrived.build
        probe_wm = _source_watermark([p.time for p in self.probe], self.probe_delay)
        build_wm = _source_watermark([e.time for e in self.build], self.build_delay)
        if probe_wm is not None and build_wm is not None:
            combined = min(probe_wm, build_wm)
            self.watermark = combined if self.watermark is None else max(self.watermark, combined)
        if self.watermark is None:
            return self.output()
        for row in self.probe:
            if row.id not in self.emitted and row.time <= self.watermark:
                self.emitted[row.id] = valid_version(self.build, row.key, row.time,
                                                     dedup=self.dedup)
        return self.output()

    @property
    def pending(self) -> int:
        return sum(1 for row in self.probe if row.id not in self.emitted)

    def output(self) -> dict[int, int | None]:
        """The output rows: inner drops unmatched rows, LEFT keeps them with None."""
        return {k: v for k, v in self.emitted.items() if self.left or v is not None}

    def bounded(self) -> dict[int, int | None]:
        """The batch result (`Catalog.sql`): every probe row against every build event."""
        joined = {p.id: valid_version(self.build, p.key, p.time, dedup=self.dedup)
                  for p in self.probe}
        return {k: v for k, v in joined.items() if self.left or v is not None}


def valid_version(events: Sequence[BuildEvent], key: str, time: int, *, dedup: bool = False
                  ) -> int | None:
    """The value of `key`'s version valid at `time` among `events` (in arrival order)."""
    forwarded = _forwarded(events, key) if dedup else [e for e in events if e.key == key]
    candidates = [
        (e.time, arrival, e) for arrival, e in enumerate(forwarded)
        if e.kind is not Kind.UPDATE_BEFORE and e.time <= time
    ]
    if not candidates:
        return None
    *_, winner = max(candidates, key=lambda c: (c[0], c[1]))
    return None if winner.kind is Kind.DELETE else winner.value


def _forwarded(events: Sequence[BuildEvent], key: str) -> list[BuildEvent]:
    """A deduplication view's events of `key`: versions older than the newest so far dropped."""
    kept: list[BuildEvent] = []
    newest: int | None = None
    for event in (e for e in events if e.key == key):
        is_version = event.kind in (Kind.INSERT, Kind.UPDATE_AFTER)
        if is_version and newest is not None and event.time < newest:
            continue
        if is_version:
            newest = event.time if newest is None else max(newest, event.time)
        kept.append(event)
    return kept


def _source_watermark(times: Sequence[int], delay: int) -> int | None:
    return max(times) - delay if times else None


def _late_rows(before: Sequence[int], arriving: Sequence[int], delay: int) -> int:
    """Rows at or below the watermark in force on arrival (one row per commit)."""
    late = 0
    seen = list(before)
    for time in arriving:
        in_force = _source_watermark(seen, delay)
        late += in_force is not None and time <= in_force
        seen.append(time)
    return late
