"""The rank stage of a window Top-N / deduplication: the fired windows' rows, ranked.

A window fires once, in the run whose watermark passes its end, with all of its
rows (this run's and the open-window state of earlier ones), so ranking the
fired rows per window and PARTITION BY key gives Flink's final Top-N exactly,
whichever runs the rows arrived in (`chronolake.sql.window_rank`).

Equal sort keys rank in arrival order (Delta commit, then position), as Flink's
`TopNRecordsCombiner` keeps them; a keep-last deduplication keeps the last
arrival among equal times. A window aggregate's rows have no arrival order (Flink
emits them in no set order): their values break ties, so that runs repeat.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import MapType

from chronolake.lake.changelog import ARRIVAL_ORDER
from chronolake.schema.spec import KeepRow
from chronolake.sql.window_rank import RANK_COLUMN, RankOrder, WindowRankPlan


def ranked_rows(rows: DataFrame, plan: WindowRankPlan) -> DataFrame:
    """The view's rows out of the fired windows' `rows` (the window stage's output, with
    the arrival columns when it is a window TVF's rows): ranked, bounded, selected. Lazy."""
    if plan.filter is not None:
        rows = rows.where(F.expr(plan.filter))
    order = [_sort(item) for item in plan.order_by]
    window = Window.partitionBy(*[F.expr(key) for key in plan.partition_by]).orderBy(
        *order, *_ties(rows, plan)
    )
    ranked = rows.withColumn(RANK_COLUMN, F.row_number().over(window).cast("bigint")).where(
        F.col(RANK_COLUMN).between(plan.rank_start, plan.rank_end)
    )
    selected = ranked.select(*[F.expr(item.expression).alias(item.name) for item in plan.ranked])
    if plan.where is not None:
        selected = selected.where(F.expr(plan.where))
    return selected.select(*[F.expr(item.expression).alias(item.name) for item in plan.items])


def _sort(item: RankOrder) -> Column:
    column = F.expr(item.expression)
    if item.descending:
        return column.desc_nulls_first() if item.nulls_first else column.desc_nulls_last()
    return column.asc_nulls_first() if item.nulls_first else column.asc_nulls_last()


def _ties(rows: DataFrame, plan: WindowRankPlan) -> list[Column]:
    """Arrival order (latest first for a keep-last deduplication); without it, the values."""
    if set(ARRIVAL_ORDER) <= set(rows.columns):
        last = plan.keep is KeepRow.LAST
        return [F.col(c).desc() if last else F.col(c).asc() for c in ARRIVAL_ORDER]
    return [F.col(f"`{field.name}`") for field in rows.schema.fields
            if not isinstance(field.dataType, MapType)]
