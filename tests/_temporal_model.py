"""A small pure-Python reference model of the event-time temporal join, run by run, as
`docs/design.md` describes it ("Versioned and regular tables", "Temporal join").

The model knows nothing of Spark or Delta: probe rows and build events are plain
records in arrival order, times are whole minutes, and each run is one tick (as
`DerivedTable.run()` is without alignment or a row bound):

- Each source's watermark is periodic per commit: the running maximum of
  `time - delay` over every row it has read (`-U` and `-D` included). A row is late
  when its time is at or below the watermark in force on its commit's arrival, i.e.
  the maximum over the rows of the commits before it. Every build event is its own
  commit; so is every probe row, except an update's `-U`, committed with its `+U`
  (as Delta's change data feed and an op column land an UPDATE).
- After run n the join's watermark is W_n = max(W_{n-1}, min(probe wm, build wm));
  while either source has emitted nothing it does not move.
- Run n emits every probe row (any kind) arrived so far and not yet emitted whose
  time is at or below W_n, in arrival order, and joins it with the version of its
  key valid at its time among *all build events arrived by the end of run n* (the
  run is one tick, so a build event is visible to every probe row emitted in the
  same run). The joined row takes the probe row's kind; inner drops unmatched
  additions, while a retraction always comes out (it takes back whatever an earlier
  run emitted for its probe row). Later build events never revise a joined row.
- A version with time t is valid from t until the key's next version; `-U` is
  ignored; among events of one key with the same time the later arrival wins; a
  winning `-D` means no version. A deduplication view forwards a version only if
  its time is at or above every earlier version of its key.
- The output is unique on the probe id. Per run and id, the run's changes (in
  arrival order) decide: a last `+I`/`+U` sets the id's row; a last `-U`/`-D`
  removes it, unless the run's first change for the id is an addition, in which
  case the additions and retractions take back each other and the id keeps the
  row it had (a pending row and its retraction come out together after a later
  version of the row). A run's commit shows per changed id what its changes add
  up to (Delta's change data feed): insert, update pre- and post-image (even when
  equal), delete, or nothing.

Where Flink differs: it emits after every watermark (here: every commit), so a
probe row emitted by an earlier commit's watermark would not see build events of
later commits of the same run. Both agree on every row whose build events arrived
before the watermark that released it.

So the output ends equal to the bounded join of the probe's final rows, also when an
update moves a pending row to an earlier time (its `+U` comes out before the `-U`
of the older row) and when a retraction meets no version any more (a late build
`-D` erased it).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum


class Kind(StrEnum):
    """Flink row kinds of build events and probe rows."""

    INSERT = "+I"
    UPDATE_BEFORE = "-U"
    UPDATE_AFTER = "+U"
    DELETE = "-D"


ADDITIONS = (Kind.INSERT, Kind.UPDATE_AFTER)


@dataclass(frozen=True)
class BuildEvent:
    """One build changelog row: key, version time (minutes), kind and a value naming it."""

    key: str
    time: int
    kind: Kind
    value: int


@dataclass(frozen=True)
class ProbeRow:
    """One probe changelog row: an id (the probe's key), the join key, its rowtime (minutes)
    and its kind (a `-U`/`-D` carries the values it retracts)."""

    id: int
    key: str
    time: int
    kind: Kind = Kind.INSERT


@dataclass(frozen=True)
class Round:
    """What lands in the lake between two runs, each side in its own arrival order."""

    probe: tuple[ProbeRow, ...] = ()
    build: tuple[BuildEvent, ...] = ()


Change = tuple[str, int, int | None]
"""One row of a commit's change data: (`_change_type`, id, value or None)."""


@dataclass
class TemporalJoinModel:
    """The join's output after every run: its rows (`state`) and the run's changes.

    `dedup` makes the build side a deduplication view; `left` keeps unmatched rows.
    """

    probe_delay: int
    build_delay: int
    left: bool = False
    dedup: bool = False
    probe: list[ProbeRow] = field(default_factory=list)
    build: list[BuildEvent] = field(default_factory=list)
    emitted: set[int] = field(default_factory=set)
    """Arrival positions (in `probe`) of the probe rows emitted so far."""
    state: dict[int, int | None] = field(default_factory=dict)
    """The output's rows: id -> value (None: a LEFT join's unmatched row)."""
    changes: list[Change] = field(default_factory=list)
    """The last run's change data, sorted."""
    kinds_out: Counter[Kind] = field(default_factory=Counter)
    """The last run's output rows by kind."""
    watermark: int | None = None
    late_probe: int = 0
    late_build: int = 0
    unmatched_retractions: int = 0
    """`-U`/`-D` that met no version while their id had a row (they still retract it)."""
    early_updates: int = 0
    """`+U` rows emitted while the `-U` of their update was still pending."""

    def run(self, arrived: Round) -> dict[int, int | None]:
        """Apply one run; return the output's rows (matched value, or None for LEFT)."""
        self.late_probe += _late_rows(_commit_times(self.probe), _commit_times(arrived.probe),
                                      self.probe_delay)
        self.late_build += _late_rows([[e.time] for e in self.build],
                                      [[e.time] for e in arrived.build], self.build_delay)
        self.probe += arrived.probe
        self.build += arrived.build
        probe_wm = _source_watermark([p.time for p in self.probe], self.probe_delay)
        build_wm = _source_watermark([e.time for e in self.build], self.build_delay)
        if probe_wm is not None and build_wm is not None:
            combined = min(probe_wm, build_wm)
            self.watermark = combined if self.watermark is None else max(self.watermark, combined)
        before = dict(self.state)
        out = self._emit() if self.watermark is not None else []
        self.kinds_out = Counter(row.kind for row, _ in out)
        changed = self._apply(out)
        self.changes = sorted(_change_data(before, self.state, changed), key=change_order)
        return dict(self.state)

    def _emit(self) -> list[tuple[ProbeRow, int | None]]:
        """The probe rows the watermark releases now, joined, in arrival order (inner: the
        matched ones), each applied to `state` as it comes out."""
        assert self.watermark is not None
        out = []
        for position, row in enumerate(self.probe):
            if position in self.emitted or row.time > self.watermark:
                continue
            self.emitted.add(position)
            if row.kind is Kind.UPDATE_AFTER and position - 1 not in self.emitted:
                self.early_updates += 1  # its -U is the row just before it, same commit
            value = valid_version(self.build, row.key, row.time, dedup=self.dedup)
            if value is None and not self.left:
                if row.kind in ADDITIONS:
                    continue  # an inner join drops an unmatched addition
                self.unmatched_retractions += row.id in self.state
            out.append((row, value))
        return out

    def _apply(self, out: list[tuple[ProbeRow, int | None]]) -> set[int]:
        """The run's changes applied to `state` per id (see the module docstring); the ids
        whose row the run changes."""
        by_id: dict[int, list[tuple[ProbeRow, int | None]]] = {}
        for row, value in out:
            by_id.setdefault(row.id, []).append((row, value))
        changed = set()
        for id_, rows in by_id.items():
            (first, _), (last, value) = rows[0], rows[-1]
            if last.kind in ADDITIONS:
                self.state[id_] = value
            elif first.kind in ADDITIONS:
                continue  # they take back each other: the id keeps its row
            else:
                self.state.pop(id_, None)
            changed.add(id_)
        return changed

    @property
    def pending(self) -> int:
        return len(self.probe) - len(self.emitted)

    def bounded(self) -> dict[int, int | None]:
        """The batch result (`Catalog.sql`): every final probe row against every build event."""
        joined = {p.id: valid_version(self.build, p.key, p.time, dedup=self.dedup)
                  for p in final_rows(self.probe)}
        return {k: v for k, v in joined.items() if self.left or v is not None}


def probe_commits(rows: Sequence[ProbeRow]) -> list[list[ProbeRow]]:
    """Probe rows as Delta commits: one per row, an update's `-U` with the `+U` after it."""
    commits: list[list[ProbeRow]] = []
    for row in rows:
        if commits and commits[-1][-1].kind is Kind.UPDATE_BEFORE:
            commits[-1].append(row)
        else:
            commits.append([row])
    return commits


def _commit_times(rows: Sequence[ProbeRow]) -> list[list[int]]:
    return [[row.time for row in commit] for commit in probe_commits(rows)]


def final_rows(rows: Sequence[ProbeRow]) -> list[ProbeRow]:
    """The probe changelog applied: each id's last row, unless that retracts it."""
    last = {row.id: row for row in rows}
    return [row for row in last.values() if row.kind in ADDITIONS]


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
        is_version = event.kind in ADDITIONS
        if is_version and newest is not None and event.time < newest:
            continue
        if is_version:
            newest = event.time if newest is None else max(newest, event.time)
        kept.append(event)
    return kept


def _change_data(before: dict[int, int | None], after: dict[int, int | None],
                 touched: set[int]) -> list[Change]:
    """What a commit's change data feed shows per touched id: changes to one id collapse."""
    changes: list[Change] = []
    for id_ in touched:
        if id_ in before and id_ in after:
            changes += [("update_preimage", id_, before[id_]),
                        ("update_postimage", id_, after[id_])]
        elif id_ in before:
            changes.append(("delete", id_, before[id_]))
        elif id_ in after:
            changes.append(("insert", id_, after[id_]))
    return changes


def change_order(change: Change) -> tuple:
    """Sort key for changes, so a doubled change fails an assert, not `sorted()`."""
    kind, id_, value = change
    return kind, id_, value is None, 0 if value is None else value


def _source_watermark(times: Sequence[int], delay: int) -> int | None:
    return max(times) - delay if times else None


def _late_rows(before: Sequence[Sequence[int]], arriving: Sequence[Sequence[int]], delay: int
               ) -> int:
    """Rows at or below the watermark in force when their commit arrives (commits of times)."""
    late = 0
    seen = [time for commit in before for time in commit]
    for commit in arriving:
        in_force = _source_watermark(seen, delay)
        late += sum(in_force is not None and time <= in_force for time in commit)
        seen += commit
    return late
