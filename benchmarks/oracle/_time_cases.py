"""Random cases for the time-SQL differential check: windows, window ranking, interval joins.

A *lake* is one case: a few tables of rows `(id, k, v, ts)` (one table for the window
families, `lhs` and `rhs` for interval joins) landed in rounds, one query, and its
parameters drawn at random (sizes, offsets, gaps, bounds, join type, watermark delays).
Times are milliseconds after `_cases.BASE`, mostly whole seconds (so rows fall exactly on
window bounds, session gaps and interval bounds), sometimes a millisecond before one; each
round's times drift later, so later rounds bring fresh rows and rows already late.

The last round is a *flush*: one row per table at `FLUSH_MS`, far ahead, which moves every
watermark past everything before it, so that every window fires and every outer row is
padded in both systems; rows from it are left out of the comparison (`is_flush`).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace

FLUSH_MS = 10_000_000
FLUSH_KEY = "flush"


@dataclass(frozen=True)
class Arrival:
    table: str
    id: int
    k: str
    v: int
    t: int
    """Milliseconds after `_cases.BASE`."""


@dataclass(frozen=True)
class Family:
    """One kind of query: its tables, its SQL (with parameters) and its output columns."""

    name: str
    tables: tuple[str, ...]
    draw: Callable[[random.Random], dict[str, object]]
    sql: str
    columns: tuple[str, ...]
    times: tuple[str, ...] = ("window_start", "window_end")
    join: bool = False


@dataclass(frozen=True)
class Lake:
    number: int
    family: Family
    params: dict[str, object]
    delays: dict[str, int]
    """Watermark delay per table, seconds (`WATERMARK FOR ts AS ts - INTERVAL 'd' SECOND`)."""
    rounds: tuple[tuple[Arrival, ...], ...]
    """The generated rounds; `all_rounds` adds the flush."""

    @property
    def name(self) -> str:
        return f"{self.family.name}-{self.number}"

    def query(self) -> str:
        return self.family.sql.format(**self.params)

    def all_rounds(self) -> tuple[tuple[Arrival, ...], ...]:
        flush = tuple(Arrival(table, -1 - i, FLUSH_KEY, 0, FLUSH_MS)
                      for i, table in enumerate(self.family.tables))
        return (*self.rounds, flush)

    def watermarks(self) -> list[int | None]:
        """The query's watermark (ms) after each run, by docs/design.md's rule: per table
        max(ts) − delay over every row read; a join takes the minimum of its tables (none
        while one has read nothing); a watermark never decreases."""
        highest: dict[str, int] = {}
        out: list[int | None] = []
        current: int | None = None
        for arrived in self.all_rounds():
            for row in arrived:
                highest[row.table] = max(highest.get(row.table, row.t), row.t)
            if all(table in highest for table in self.family.tables):
                value = min(highest[t] - 1000 * self.delays[t] for t in self.family.tables)
                current = value if current is None else max(current, value)
            out.append(current)
        return out

    def size(self) -> int:
        return sum(len(r) for r in self.rounds)


def _window_params(rng: random.Random) -> dict[str, object]:
    size = rng.choice([3, 4, 5, 6])
    return {"size": size, "offset": rng.randint(-size + 1, size - 1)}


def _hop_params(rng: random.Random) -> dict[str, object]:
    slide = rng.choice([2, 3])
    size = slide * rng.choice([1, 2, 3])
    return {"slide": slide, "size": size, "offset": rng.randint(-size, size)}


def _cumulate_params(rng: random.Random) -> dict[str, object]:
    step = rng.choice([1, 2, 3])
    size = step * rng.choice([2, 3, 4])
    offset = rng.choice([0, 0, rng.randint(-size, size)])
    return {"step": step, "size": size, "offset": offset}


def _session_params(rng: random.Random) -> dict[str, object]:
    return {"gap": rng.choice([1, 2, 3, 4])}


def _join_params(rng: random.Random) -> dict[str, object]:
    lower = rng.randint(-2, 3)  # lhs.ts >= rhs.ts - lower
    upper = rng.randint(-lower, 4)  # lhs.ts <= rhs.ts + upper
    kind = rng.choice(["", "LEFT ", "RIGHT ", "FULL "])
    form = rng.choice(["between", "compare"])
    low = f"rhs.ts - INTERVAL '{lower}' SECOND" if lower >= 0 else \
        f"rhs.ts + INTERVAL '{-lower}' SECOND"
    high = f"rhs.ts + INTERVAL '{upper}' SECOND" if upper >= 0 else \
        f"rhs.ts - INTERVAL '{-upper}' SECOND"
    bounds = (f"lhs.ts BETWEEN {low} AND {high}" if form == "between"
              else f"lhs.ts >= {low} AND lhs.ts < {high}")
    return {"kind": kind, "bounds": bounds, "lower": lower, "upper": upper,
            "strict": form == "compare"}


_AGG = "SELECT k, window_start, window_end, COUNT(*) AS n, SUM(v) AS s FROM TABLE({tvf}) " \
       "GROUP BY k, window_start, window_end"
_TUMBLE = "TUMBLE(TABLE events, DESCRIPTOR(ts), INTERVAL '{size}' SECOND, " \
          "INTERVAL '{offset}' SECOND)"
_WINDOW_COLUMNS = ("k", "window_start", "window_end", "n", "s")


FAMILIES: dict[str, Family] = {family.name: family for family in [
    Family("tumble_offset", ("events",), _window_params,
           _AGG.replace("{tvf}", _TUMBLE), _WINDOW_COLUMNS),
    Family("hop_offset", ("events",), _hop_params, _AGG.replace(
        "{tvf}", "HOP(TABLE events, DESCRIPTOR(ts), INTERVAL '{slide}' SECOND, "
        "INTERVAL '{size}' SECOND, INTERVAL '{offset}' SECOND)"), _WINDOW_COLUMNS),
    Family("cumulate", ("events",), _cumulate_params, _AGG.replace(
        "{tvf}", "CUMULATE(TABLE events, DESCRIPTOR(ts), INTERVAL '{step}' SECOND, "
        "INTERVAL '{size}' SECOND, INTERVAL '{offset}' SECOND)"), _WINDOW_COLUMNS),
    Family("session_keyed", ("events",), _session_params, _AGG.replace(
        "{tvf}", "SESSION(TABLE events PARTITION BY k, DESCRIPTOR(ts), "
        "INTERVAL '{gap}' SECOND)"), _WINDOW_COLUMNS),
    Family("session_global", ("events",), _session_params,
           "SELECT window_start, window_end, COUNT(*) AS n, SUM(v) AS s FROM TABLE("
           "SESSION(TABLE events, DESCRIPTOR(ts), INTERVAL '{gap}' SECOND)) "
           "GROUP BY window_start, window_end", ("window_start", "window_end", "n", "s")),
    Family("top_n_aggregate", ("events",), _window_params,
           "SELECT window_start, window_end, k, s, rn FROM (SELECT *, ROW_NUMBER() OVER ("
           "PARTITION BY window_start, window_end ORDER BY s DESC) AS rn FROM ("
           "SELECT window_start, window_end, k, SUM(v) AS s FROM TABLE(" + _TUMBLE + ") "
           "GROUP BY window_start, window_end, k)) WHERE rn <= 2",
           ("window_start", "window_end", "k", "s", "rn")),
    Family("top_n_tvf", ("events",), _window_params,
           "SELECT window_start, window_end, id, k, v, rn FROM (SELECT *, ROW_NUMBER() OVER ("
           "PARTITION BY window_start, window_end, k ORDER BY v DESC) AS rn FROM TABLE("
           + _TUMBLE + ")) WHERE rn <= 2",
           ("window_start", "window_end", "id", "k", "v", "rn")),
    Family("dedup_first", ("events",), _window_params,
           "SELECT window_start, window_end, id, k, v FROM (SELECT *, ROW_NUMBER() OVER ("
           "PARTITION BY window_start, window_end, k ORDER BY ts ASC) AS rn FROM TABLE("
           + _TUMBLE + ")) WHERE rn = 1",
           ("window_start", "window_end", "id", "k", "v")),
    Family("dedup_last", ("events",), _window_params,
           "SELECT window_start, window_end, id, k, v FROM (SELECT *, ROW_NUMBER() OVER ("
           "PARTITION BY window_start, window_end, k ORDER BY ts DESC) AS rn FROM TABLE("
           + _TUMBLE + ")) WHERE rn = 1",
           ("window_start", "window_end", "id", "k", "v")),
    Family("interval_join", ("lhs", "rhs"), _join_params,
           "SELECT lhs.id AS lid, rhs.id AS rid FROM lhs {kind}JOIN rhs "
           "ON lhs.k = rhs.k AND {bounds}", ("lid", "rid"), times=(), join=True),
]}


def generate(family: Family, seed: int, n_lakes: int) -> list[Lake]:
    """`n_lakes` random lakes of `family`; ids and values unique within a lake."""
    rng = random.Random(f"{family.name}/{seed}")
    lakes = []
    for number in range(n_lakes):
        params = family.draw(rng)
        delays = {table: rng.randint(0, 3) for table in family.tables}
        keys = [f"k{i}" for i in range(rng.randint(1, 3))]
        ids = iter(range(1, 10**6))
        values = rng.sample(range(1, 1000), 200)
        rounds = []
        for index in range(rng.randint(2, 4)):
            arrived = []
            for table in family.tables:
                for _ in range(rng.randint(1, 7)):
                    t = 1000 * (4 * index + rng.randint(0, 8)) - rng.choice([0] * 5 + [1])
                    arrived.append(Arrival(table, next(ids), rng.choice(keys), values.pop(), t))
            rng.shuffle(arrived)
            rounds.append(tuple(arrived))
        lakes.append(Lake(number, family, params, delays, tuple(rounds)))
    return lakes


def is_flush(row: dict[str, object], family: Family) -> bool:
    """Whether an output row comes from the flush rows (left out of every comparison)."""
    if row.get("k") == FLUSH_KEY:
        return True
    if any(isinstance(row.get(c), int) and row[c] < 0 for c in ("id", "lid", "rid")):
        return True
    return any(isinstance(row.get(c), int) and row[c] >= FLUSH_MS - 100_000
               for c in family.times)


def released(row: dict[str, object], family: Family, watermark: int | None) -> bool:
    """Whether a run whose watermark is `watermark` must have emitted `row` (Flink's rules):
    a window once the watermark reaches its end − 1 ms; an interval join's match in the run
    that sees both rows (outer rows' padding is compared after the flush only)."""
    if family.join:
        return row["lid"] is not None and row["rid"] is not None
    return watermark is not None and row["window_end"] - 1 <= watermark


def order_sensitive(lake: Lake) -> set[int]:
    """Interval joins: ids of rows whose match Flink decides by arrival order within a round.

    A row whose interval the watermark has passed when it arrives is not cached by
    `TimeIntervalJoin`: it meets only the other side's rows cached before it. Within a round
    the two inputs of Flink's join interleave as the network delivers them (both come from
    one stream through two exchanges), so its matches with the other side's on-time rows of
    the same round (and hence its padding, and theirs) are not determined; chronolake joins
    it with all of them. Such rows are left out of the comparison.
    """
    if not lake.family.join:
        return set()
    lower, upper = 1000 * int(lake.params["lower"]), 1000 * int(lake.params["upper"])
    upper -= 1 if lake.params["strict"] else 0
    ends = {"lhs": lower, "rhs": upper}
    out: set[int] = set()
    before: int | None = None
    for arrived, after in zip(lake.all_rounds(), lake.watermarks(), strict=True):
        closed = {a.id for a in arrived if before is not None and before >= a.t + ends[a.table]}
        for row in (a for a in arrived if a.id in closed and a.table == "lhs"):
            partners = {a.id for a in arrived if a.table == "rhs" and a.k == row.k
                        and a.id not in closed and a.t - lower <= row.t <= a.t + upper}
            out |= partners | ({row.id} if partners else set())
        for row in (a for a in arrived if a.id in closed and a.table == "rhs"):
            partners = {a.id for a in arrived if a.table == "lhs" and a.k == row.k
                        and a.id not in closed and row.t - lower <= a.t <= row.t + upper}
            out |= partners | ({row.id} if partners else set())
        before = after
    return out


def lazy_cleanup(lake: Lake) -> set[int]:
    """Interval joins: ids of both rows of every pair whose match depends on when Flink's
    `TimeIntervalJoin` cleans its state, which chronolake's rule does not follow.

    Flink caches a row iff the operator's watermark is below its interval end (t + the
    relative window size), and removes a cached row only lazily: when its key's cleanup timer
    fires (the first cached row's interval end + 1 ms) or when a row of the other side for the
    key scans it (joining it first). Its watermark is the minimum of its two inputs', and the
    other input's watermark often arrives after the round's rows, so it lags the watermark a
    chronolake run starts from. chronolake drops a row whose interval end the watermark has
    passed at the end of each run and never keeps a row closed on arrival. Left out, for a
    pair of rows of one key within the bounds, the earlier `y` and the later `x`:

    1. `y` from an earlier round whose interval end is below the watermark `x`'s run starts
       from (chronolake dropped it; Flink may still hold it and join `x` with it);
    2. `y` from an earlier round, closed on arrival (chronolake never held it; Flink may have
       cached it, its operator's watermark lagging);
    3. `x` and `y` of one round, both closed on arrival (chronolake does not pair them; Flink
       does when it cached whichever came first).

    Ids, not pairs: the comparison leaves out every output row holding one of them, so a
    pair one system joins and the other pads (or joins elsewhere) goes on both sides alike.
    """
    if not lake.family.join:
        return set()
    lower, upper = 1000 * int(lake.params["lower"]), 1000 * int(lake.params["upper"])
    upper -= 1 if lake.params["strict"] else 0
    ends = {"lhs": lower, "rhs": upper}

    def match(x: Arrival, y: Arrival) -> bool:
        if x.table == y.table or x.k != y.k:
            return False
        left, right = (x, y) if x.table == "lhs" else (y, x)
        return right.t - lower <= left.t <= right.t + upper

    out: set[int] = set()
    earlier: list[tuple[Arrival, bool]] = []  # rows of earlier rounds, closed on arrival?
    before: int | None = None
    for arrived, after in zip(lake.all_rounds(), lake.watermarks(), strict=True):
        closed = {a.id for a in arrived if before is not None and before >= a.t + ends[a.table]}
        for x in arrived:
            for y, y_closed in earlier:
                stale = before is not None and y.t + ends[y.table] < before
                if (y_closed or stale) and match(x, y):
                    out |= {x.id, y.id}
            if x.id in closed:
                partners = {y.id for y in arrived if y.id in closed and match(x, y)}
                out |= partners | ({x.id} if partners else set())
        earlier += [(a, a.id in closed) for a in arrived]
        before = after
    return out


@dataclass
class Shrink:
    """Candidate smaller lakes for minimizing a mismatch, most promising first."""

    lake: Lake
    keys: set[str] = field(default_factory=set)

    def candidates(self) -> Iterator[Lake]:
        if self.keys:
            kept = tuple(tuple(a for a in r if a.k in self.keys) for r in self.lake.rounds)
            if kept != self.lake.rounds:
                yield replace(self.lake, rounds=kept)
        rounds = self.lake.rounds
        for index in range(len(rounds)):
            if len(rounds) > 1:
                yield replace(self.lake, rounds=rounds[:index] + rounds[index + 1:])
        for index, arrived in enumerate(rounds):
            for position in range(len(arrived)):
                smaller = arrived[:position] + arrived[position + 1:]
                yield replace(self.lake, rounds=rounds[:index] + (smaller,) + rounds[index + 1:])
