"""Watermark progress per split and per tick, and the watermark in force for every row.

The rows are touched by two Spark passes: one aggregate of the generated
watermark per (split, tick), read back to the driver (ticks × splits values:
metadata-sized, like the Delta log it follows), and one pass that stamps every
row: a broadcast join with a per-tick table (on-periodic), or that join plus a
window over each tick's rows (on-event). Between the two, Python loops over
ticks and splits only, as the runtime does.

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
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StructField, StructType

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
    """The state at the start of one tick: the source watermark and every active split's."""

    tick: int
    watermark: int
    splits: Mapping[str, int]


@dataclass(frozen=True)
class Progress:
    """Watermark progress over one run's ticks, computed from per-(split, tick) maxima."""

    ticks: tuple[TickStart, ...]
    splits: Mapping[str, int]
    watermark: int

    @classmethod
    def of(
        cls,
        maxima: Iterable[tuple[str, int, int | None]],
        *,
        start_splits: Mapping[str, int],
        start_watermark: int,
    ) -> Progress:
        """Replay the ticks in order from (split, tick, max generated value or None) triples."""
        per_tick: dict[int, dict[str, int | None]] = {}
        for split, tick, value in maxima:
            per_tick.setdefault(tick, {})[split] = value
        splits = dict(start_splits)
        source = start_watermark
        starts: list[TickStart] = []
        for tick in sorted(per_tick):
            for split in per_tick[tick]:
                splits.setdefault(split, LONG_MIN)
            starts.append(TickStart(tick=tick, watermark=source, splits=dict(splits)))
            for split, value in per_tick[tick].items():
                if value is not None:
                    splits[split] = max(splits[split], value)
            source = max(source, min(splits.values()))
        return cls(ticks=tuple(starts), splits=splits, watermark=source)

    def periodic(self, base: DataFrame, *, as_rowtime: Callable[[Column], Column]) -> DataFrame:
        """Stamp every row with the source watermark emitted at the end of the previous tick.

        Also adds `LATE_BELOW`: the watermark + 1 ms as a rowtime value (`as_rowtime`), so
        that a row is late iff rowtime < LATE_BELOW, a timestamp comparison per row.
        """
        in_force = F.col(_TICK_IN)
        below = F.when(
            (in_force > _long(LONG_MIN)) & (in_force < _long(LONG_MAX)), as_rowtime(in_force + 1)
        )
        ticks = self._tick_table(base.sparkSession, []).select(
            TICK, in_force.alias(IN_FORCE), below.alias(LATE_BELOW)
        )
        return base.join(F.broadcast(ticks), TICK)

    def on_event(self, base: DataFrame, *, order: Sequence[str]) -> DataFrame:
        """Stamp every row with the source watermark right after the row before it.

        Within a tick every split's running maximum is its own column (cost:
        rows × splits), starting from the split's value before the tick.
        """
        names = sorted({split for tick in self.ticks for split in tick.splits})
        ticks = self._tick_table(base.sparkSession, names)
        stamped = base.join(F.broadcast(ticks), TICK)
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

    def _tick_table(self, spark: SparkSession, names: Sequence[str]) -> DataFrame:
        """One row per tick: its starting source watermark and, per split in `names`, the
        split's starting watermark (null while the split is not active).

        Built as SQL `VALUES` (a local relation, broadcast without a Spark job), as
        `createDataFrame` from Python rows would go through an RDD.
        """
        columns = [TICK, _TICK_IN, *(f"__wm_s{i}" for i in range(len(names)))]
        if not self.ticks:
            schema = StructType([StructField(c, LongType()) for c in columns])
            return spark.createDataFrame([], schema)
        values = ", ".join(
            "(" + ", ".join(
                "NULL" if v is None else str(v)
                for v in (tick.tick, tick.watermark, *(tick.splits.get(n) for n in names))
            ) + ")"
            for tick in self.ticks
        )
        typed = ", ".join(f"CAST(c{i} AS BIGINT) AS {c}" for i, c in enumerate(columns))
        aliases = ", ".join(f"c{i}" for i in range(len(columns)))
        return spark.sql(f"SELECT {typed} FROM VALUES {values} AS t({aliases})")
