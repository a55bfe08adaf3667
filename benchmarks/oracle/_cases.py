"""Random temporal-join cases for the Flink differential check, and Flink's rule in Python.

A *case* is a small probe stream and a build changelog over a few keys of its own, landed
in rounds (one `DerivedTable.run()` after each round). A *lake* groups cases that share one
configuration (watermark delays, join type, extra ON condition, how the changelog is
written) and one pair of Delta tables: their keys are prefixed with the case number, so the
cases cannot meet, but they share the tables' watermarks.

Times are whole seconds after `BASE`; each round's times drift later, so that later rounds
bring both fresh rows and rows at or below the watermark already reached (late rows).
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from enum import StrEnum

BASE = datetime(2026, 11, 2, 9, 0)
BASE_MS = int(BASE.replace(tzinfo=UTC).timestamp() * 1000)


class Changelog(StrEnum):
    """How the build changelog lands in the lake."""

    OP_COLUMN = "op-column"
    """Rows with an operation column: any sequence of +I/-U/+U/-D, as a CDC tool lands it."""
    CDF = "cdf"
    """Real INSERT/UPDATE/DELETE commits read through Delta's change data feed."""


@dataclass(frozen=True)
class Probe:
    id: int
    key: str
    t: int


@dataclass(frozen=True)
class Event:
    """One build changelog row (op-column) or one table operation (CDF: kind insert,
    update or delete; the change data feed turns it into +I, -U/+U or -D)."""

    key: str
    value: int
    t: int
    kind: str


@dataclass(frozen=True)
class Round:
    probe: tuple[Probe, ...] = ()
    build: tuple[Event, ...] = ()


@dataclass(frozen=True)
class Case:
    number: int
    rounds: tuple[Round, ...]

    def size(self) -> int:
        return sum(len(r.probe) + len(r.build) for r in self.rounds)


@dataclass(frozen=True)
class LakeConfig:
    probe_delay: int
    build_delay: int
    left: bool
    condition: bool
    """Whether the ON clause has the further condition `MOD(b.v, 3) <> 0`."""
    changelog: Changelog


@dataclass
class Lake:
    name: str
    config: LakeConfig
    cases: list[Case] = field(default_factory=list)

    @property
    def n_rounds(self) -> int:
        return max(len(c.rounds) for c in self.cases)

    def round(self, index: int) -> Round:
        """Round `index` of every case, case after case (arrival order within each side)."""
        probe: list[Probe] = []
        build: list[Event] = []
        for case in self.cases:
            if index < len(case.rounds):
                probe += case.rounds[index].probe
                build += case.rounds[index].build
        return Round(tuple(probe), tuple(build))


CONDITION = "MOD(b.v, 3) <> 0"


def generate(seed: int, n_cases: int, per_lake: int) -> list[Lake]:
    """`n_cases` random cases in lakes of `per_lake`; ids and values are unique per lake."""
    rng = random.Random(seed)
    # Every (join type, condition, changelog) combination in turn, in a seeded order.
    kinds = list(itertools.product([False, True], [False, True], list(Changelog)))
    rng.shuffle(kinds)
    lakes: list[Lake] = []
    number = 0
    while number < n_cases:
        left, condition, changelog = kinds[len(lakes) % len(kinds)]
        config = LakeConfig(probe_delay=rng.randint(0, 3), build_delay=rng.randint(0, 3),
                            left=left, condition=condition, changelog=changelog)
        lake = Lake(f"lake{len(lakes)}", config)
        n_rounds = rng.randint(1, 3)
        ids, values = iter(range(1, 10**9)), iter(range(1, 10**9))
        for _ in range(min(per_lake, n_cases - number)):
            lake.cases.append(_case(rng, number, n_rounds, config.changelog, ids, values))
            number += 1
        lakes.append(lake)
    return lakes


def _case(rng: random.Random, number: int, n_rounds: int, changelog: Changelog,
          ids: Iterator[int], values: Iterator[int]) -> Case:
    keys = [f"c{number}{k}" for k in "AB"]
    rounds = []
    for index in range(n_rounds):
        def when() -> int:
            return 4 * index + rng.randint(0, 8)  # noqa: B023 - one round at a time

        probe = tuple(Probe(next(ids), rng.choice([*keys, f"c{number}Z"]), when())
                      for _ in range(rng.randint(0, 5)))
        build: list[Event] = []
        for _ in range(rng.randint(0, 5)):
            key, value, t = rng.choice(keys), next(values), when()
            if changelog is Changelog.CDF:
                build.append(Event(key, value, t, rng.choice(["insert", "update", "delete"])))
                continue
            kind = rng.choice(["+I", "+U", "+U", "-D"])
            if kind == "+U":
                build.append(Event(key, -value, when(), "-U"))
            build.append(Event(key, value, t, kind))
        rounds.append(Round(probe, tuple(build)))
    return Case(number, tuple(rounds))


def changelog_rows(events: Sequence[Event], changelog: Changelog,
                   table: dict[str, tuple[int, int]]) -> list[Event]:
    """The build changelog rows `events` produce, in arrival order.

    For CDF, `table` (key -> (value, t)) is the table's content before the events and is
    updated: an insert of a present key, and an update or delete of an absent key, become
    no-ops, as they would in the table (one key per operation, one commit each).
    """
    if changelog is Changelog.OP_COLUMN:
        return list(events)
    rows: list[Event] = []
    for op in events:
        old = table.get(op.key)
        if op.kind == "insert" and old is None:
            rows.append(Event(op.key, op.value, op.t, "+I"))
            table[op.key] = (op.value, op.t)
        elif op.kind == "update" and old is not None:
            rows += [Event(op.key, old[0], old[1], "-U"), Event(op.key, op.value, op.t, "+U")]
            table[op.key] = (op.value, op.t)
        elif op.kind == "delete" and old is not None:
            rows.append(Event(op.key, old[0], old[1], "-D"))
            del table[op.key]
    return rows


def effective(op: Event, table: dict[str, tuple[int, int]]) -> bool:
    """Whether a CDF operation changes the table (else it writes no commit)."""
    present = op.key in table
    return present if op.kind in ("update", "delete") else not present


def flink_rule(build: Sequence[Event], key: str, t: int, *, condition: bool) -> int | None:
    """What `TemporalRowTimeJoinOperator` joins when it fires after every build row arrived.

    The build state is a map from row time to row per key (`rightState.put(rowTime, row)`:
    a later arrival with the same time replaces the earlier); -U rows never reach the
    operator (the planner drops them for a build side with a primary key); the probe row
    takes the row with the largest time at or below its own (`latestRightRowToJoin`) and
    matches only if that row is +I/+U (`isAccumulateMsg`) and the rest of the ON condition
    holds.
    """
    state: dict[int, Event] = {}
    for row in build:
        if row.key == key and row.kind != "-U":
            state[row.t] = row
    times = [time for time in state if time <= t]
    if not times:
        return None
    row = state[max(times)]
    if row.kind == "-D" or (condition and row.value % 3 == 0):
        return None
    return row.value


def without(case: Case, round_index: int, side: str, position: int) -> Case:
    """`case` with one probe row or build event removed (for minimizing a mismatch)."""
    rounds = list(case.rounds)
    chosen = rounds[round_index]
    items = list(getattr(chosen, side))
    del items[position]
    rounds[round_index] = replace(chosen, **{side: tuple(items)})
    return replace(case, rounds=tuple(rounds))


def smaller(case: Case) -> Iterator[Case]:
    """Every case with one row less (a -U taken with the +U after it), then one round less."""
    for index, chosen in enumerate(case.rounds):
        for position in range(len(chosen.probe)):
            yield without(case, index, "probe", position)
        for position, event in enumerate(chosen.build):
            if event.kind == "-U":
                continue
            smaller_case = without(case, index, "build", position)
            if position > 0 and chosen.build[position - 1].kind == "-U":
                smaller_case = without(smaller_case, index, "build", position - 1)
            yield smaller_case
    if len(case.rounds) > 1:
        for index in range(len(case.rounds)):
            yield replace(case, rounds=case.rounds[:index] + case.rounds[index + 1:])


def at(t: int) -> datetime:
    return BASE + timedelta(seconds=t)


def epoch_ms(t: int) -> int:
    return BASE_MS + t * 1000
