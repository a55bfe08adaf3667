"""Watermark progress per split and per tick, and the watermark in force for every row.

The rows are touched by two Spark passes: one aggregate of the generated
watermark and the commit timestamp per (split, tick), read back to the driver
(ticks × splits rows: metadata-sized, like the Delta log it follows), and one
pass that stamps every row: a broadcast join with a per-tick table
(on-periodic), or that join plus a window over each tick's rows (on-event).
Between the two, Python loops over ticks and splits only, as the runtime does.

Semantics, following Flink's per-split watermark outputs
(`WatermarkOutputMultiplexer`) and the FLIP-66 emission rules:

- A split's generator keeps the running maximum of the non-null generated
  values (so a value is emitted only if larger than the last one) and starts at
  its stored watermark, or at Long.MIN_VALUE ("nothing emitted yet").
- A split is active from the start of the tick that carries its first row (the
  tick in which the source discovers it), or from the start of the run if the
  stored state knows it. An active split that has emitted nothing holds the
  source back.
- The source watermark is the minimum over active splits, and never decreases:
  a newly discovered split cannot lower what was already emitted.
- on-periodic: splits emit at the end of each tick, so every row of tick t sees
  the source watermark after tick t-1.
- on-event: a split emits right after each row that raises it, so a row sees
  the source watermark after the row just before it in arrival order.

Idleness (`'scan.idle-timeout'`, Flink's `WatermarksWithIdleness`), decided at
the end of every tick as Flink decides it on every periodic emit:

- Time is the commit time of the data: a tick happens at the largest commit
  timestamp of its rows (never earlier than the ticks before it), which is when
  a source following the table would have read them. A split is active at the
  time of the last tick that carried one of its rows (any row: a null rowtime
  counts), and idle at the end of a tick that happens more than the timeout
  after that. At the end of a run the run's clock (`now_ms`) is one more such
  moment: a source without new commits goes idle split by split.
- An idle split does not hold the source back: the source watermark is the
  minimum over the splits that are not idle. When every split is idle the
  source is idle and its watermark stays where it is (Flink's
  `CombinedWatermarkStatus`: no split's watermark is flushed).
- A row re-activates its split from the start of its tick (as discovery does).
  The split's watermark may then be below the source's; the source never
  decreases, so it waits until the split catches up (the valve's rule).
- A split whose last activity is unknown (state stored without an idle
  timeout) is active at the first moment the run sees.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StructField, StructType

from chronolake.spark.session import join_local
from chronolake.watermarks.valve import source_watermark
from chronolake.watermarks.watermark import LONG_MAX, LONG_MIN

SPLIT = "__wm_split"
TICK = "__wm_tick"
GENERATED = "__wm_generated"
IN_FORCE = "__wm_in_force"
LATE_BELOW = "__wm_late_below"

_TICK_IN = "__wm_tick_in"


def _long(value: int) -> Column:
    return F.lit(value).cast(LongType())


@dataclass(frozen=True)
class TickStart:
    """The state at the start of one tick: the source watermark and every counting split's
    (the splits that are not idle, plus those the tick's rows discover or re-activate)."""

    tick: int
    watermark: int
    splits: Mapping[str, int]


@dataclass(frozen=True)
class SplitTick:
    """What the aggregate job reads back per (split, tick): the largest generated watermark
    (None: none generated), the largest commit timestamp of the split's rows there, and how
    many rows there are (which the run's ticks are cut by)."""

    split: str
    tick: int
    generated: int | None
    commit_ms: int
    rows: int


@dataclass(frozen=True)
class Progress:
    """Watermark progress over one run's ticks, computed from per-(split, tick) maxima.

    `active_at` (when each split last had rows) is tracked only with an idle timeout.
    """

    ticks: tuple[TickStart, ...]
    splits: Mapping[str, int]
    watermark: int
    idle: frozenset[str] = frozenset()
    active_at: Mapping[str, int] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        maxima: Iterable[SplitTick],
        *,
        start_splits: Mapping[str, int],
        start_watermark: int,
        start_idle: Iterable[str] = (),
        start_active_at: Mapping[str, int] | None = None,
        idle_timeout_ms: int | None = None,
        now_ms: int | None = None,
    ) -> Progress:
        """Replay the ticks in order, then apply the run's clock `now_ms` (if given)."""
        per_tick: dict[int, dict[str, int | None]] = {}
        tick_ms: dict[int, int] = {}
        for row in maxima:
            per_tick.setdefault(row.tick, {})[row.split] = row.generated
            tick_ms[row.tick] = max(tick_ms.get(row.tick, LONG_MIN), row.commit_ms)
        splits = dict(start_splits)
        idleness = _Idleness.start(idle_timeout_ms, start_idle, start_active_at or {})
        source = start_watermark
        starts: list[TickStart] = []
        for tick in sorted(per_tick):
            for split in per_tick[tick]:
                splits.setdefault(split, LONG_MIN)
            idleness.rows_at(tick_ms[tick], per_tick[tick], known=splits)
            counting = {s: w for s, w in splits.items() if s not in idleness.idle}
            starts.append(TickStart(tick=tick, watermark=source, splits=counting))
            for split, value in per_tick[tick].items():
                if value is not None:
                    splits[split] = max(splits[split], value)
            idleness.check(known=splits)
            source = source_watermark(source, splits, idleness.idle)
        if now_ms is not None and idleness.timeout_ms is not None:
            idleness.clock_at(now_ms, known=splits)
            idleness.check(known=splits)
            source = source_watermark(source, splits, idleness.idle)
        return cls(
            ticks=tuple(starts),
            splits=splits,
            watermark=source,
            idle=frozenset(idleness.idle),
            active_at=idleness.active_at,
        )

    def periodic(self, base: DataFrame, *, as_rowtime: Callable[[Column], Column]) -> DataFrame:
        """Stamp every row with the source watermark emitted at the end of the previous tick.

        Also adds `LATE_BELOW`: the watermark + 1 ms as a rowtime value (`as_rowtime`), so
        that a row is late iff rowtime < LATE_BELOW, a timestamp comparison per row.
        """
        in_force = F.col(_TICK_IN)
        below = F.when(
            (in_force > _long(LONG_MIN)) & (in_force < _long(LONG_MAX)), as_rowtime(in_force + 1)
        )
        stamped = self._with_tick_starts(base, [])
        return stamped.withColumns({IN_FORCE: in_force, LATE_BELOW: below}).drop(_TICK_IN)

    def on_event(self, base: DataFrame, *, order: Sequence[str]) -> DataFrame:
        """Stamp every row with the source watermark right after the row before it.

        Within a tick every split's running maximum is its own column (cost:
        rows × splits), starting from the split's value before the tick.
        """
        names = sorted({split for tick in self.ticks for split in tick.splits})
        stamped = self._with_tick_starts(base, names)
        in_tick = Window.partitionBy(TICK).orderBy(*order)
        so_far = in_tick.rowsBetween(Window.unboundedPreceding, Window.currentRow)
        values = [
            F.when(
                F.col(f"__wm_s{i}").isNotNull(),
                F.greatest(
                    F.col(f"__wm_s{i}"),
                    F.coalesce(
                        F.max(F.when(F.col(SPLIT) == name, F.col(GENERATED))).over(so_far),
                        _long(LONG_MIN),
                    ),
                ),
            ).otherwise(_long(LONG_MAX))
            for i, name in enumerate(names)
        ]
        after = "__wm_after_row"
        stamped = stamped.withColumn(after, F.least(*values) if len(values) > 1 else values[0])
        in_force = F.greatest(
            F.col(_TICK_IN), F.coalesce(F.lag(after).over(in_tick), _long(LONG_MIN))
        )
        helpers = [f"__wm_s{i}" for i in range(len(names))]
        return stamped.withColumn(IN_FORCE, in_force).drop(after, _TICK_IN, *helpers)

    def _with_tick_starts(self, base: DataFrame, names: Sequence[str]) -> DataFrame:
        """`base` plus, from its tick, the tick's starting source watermark and, per split in
        `names`, the split's starting watermark (null while the split is not active)."""
        columns = [TICK, _TICK_IN, *(f"__wm_s{i}" for i in range(len(names)))]
        schema = StructType([StructField(c, LongType()) for c in columns])
        rows = [
            (tick.tick, tick.watermark, *(tick.splits.get(n) for n in names))
            for tick in self.ticks
        ]
        return join_local(base, schema, rows, [TICK])


@dataclass
class _Idleness:
    """Which splits are idle, from when each last had rows and the time now (see the module
    docstring). Without a timeout nothing is tracked and no split is ever idle."""

    timeout_ms: int | None
    idle: set[str]
    active_at: dict[str, int]
    now_ms: int

    @classmethod
    def start(
        cls, timeout_ms: int | None, idle: Iterable[str], active_at: Mapping[str, int]
    ) -> _Idleness:
        if timeout_ms is None:
            return cls(None, set(), {}, LONG_MIN)
        now_ms = max(active_at.values(), default=LONG_MIN)
        return cls(timeout_ms, set(idle), dict(active_at), now_ms)

    def rows_at(self, commit_ms: int, splits: Iterable[str], *, known: Iterable[str]) -> None:
        """A tick at `commit_ms` (time never goes back) carries rows of `splits`."""
        if self.timeout_ms is None:
            return
        self.clock_at(commit_ms, known=known)
        for split in splits:
            self.active_at[split] = self.now_ms
            self.idle.discard(split)

    def clock_at(self, now_ms: int, *, known: Iterable[str]) -> None:
        """Move time to `now_ms` (never back); a split not seen before is active now."""
        self.now_ms = max(self.now_ms, now_ms)
        for split in known:
            self.active_at.setdefault(split, self.now_ms)

    def check(self, *, known: Iterable[str]) -> None:
        """The periodic check: every split without rows for longer than the timeout is idle."""
        if self.timeout_ms is None:
            return
        self.idle = {s for s in known if self.now_ms - self.active_at[s] > self.timeout_ms}
