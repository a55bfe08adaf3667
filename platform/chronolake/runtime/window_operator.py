"""The window aggregate as a run operator: TUMBLE / HOP windows emitted once, when they close.

A window view (`chronolake.sql.window`) reads one append-only table. Each run
places the new rows (after the view's WHERE) in their windows; a window [start,
end) fires in the run whose watermark reaches end − 1 ms and is emitted then,
exactly once, aggregated as the SELECT says. Rows of windows still open stay in
state (role `open`) and are taken back by the next run. A row whose windows had
all fired when it arrived, or whose rowtime is null, goes to the late-rows side
table with the reason and the watermark on arrival.

With an event-time source (`WATERMARK FOR`) the watermark is the source's. A
source without one (or a hybrid source) emits processing-time watermarks: the
watermark is then the clock's time (`RunContext.clock`), so the same query closes
its windows by the clock: a window fires in the first run after its end, and a
row arriving for a window that an earlier run closed is late.
"""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from chronolake.catalog import Catalog
from chronolake.errors import DefinitionError, RunError
from chronolake.lake.changelog import ROW_KIND, RowKind
from chronolake.runtime.inputs import InputRead
from chronolake.runtime.operator import Operator, RunContext, Step, count_figures, reused
from chronolake.schema import ViewSpec
from chronolake.sql.window import WINDOW_COLUMNS, WindowPlan, plan_window_aggregate
from chronolake.watermarks._late import REASON_COLUMN, LateReason
from chronolake.watermarks._millis import is_timestamp
from chronolake.watermarks.assigner import WatermarkAssigner
from chronolake.watermarks.watermark import LONG_MIN, Watermark
from chronolake.windows.tvf import Windows, open_windows, split_windows

OPEN_ROLE = "open"
"""The state table of the rows held in open windows."""

_ITEM = "__w_item_"
_HAVING = "__w_having"


class WindowAggregateOperator(Operator):
    """A view `SELECT ... FROM TABLE(TUMBLE|HOP(TABLE t, ...)) GROUP BY window_start,
    window_end, ...`, run incrementally.

    Example:
        >>> catalog.execute('''CREATE VIEW orders_per_currency AS
        ...     SELECT window_start, window_end, currency, COUNT(*) AS orders
        ...     FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(order_time), INTERVAL '10' MINUTES))
        ...     GROUP BY window_start, window_end, currency''')      # doctest: +SKIP
        >>> DerivedTable(catalog, "orders_per_currency").run()       # doctest: +SKIP
    """

    def __init__(self, catalog: Catalog, view: ViewSpec) -> None:
        self.plan: WindowPlan = plan_window_aggregate(view.query, catalog.input_specs(view.query))
        self.source = self.plan.source
        self.inputs = (self.source,)
        self.event_time = self.plan.event_time
        self.clock_driven = not self.event_time
        self.windows = Windows(
            kind=self.plan.kind, size_ms=self.plan.size_ms, slide_ms=self.plan.slide_ms
        )

    def step(
        self,
        context: RunContext,
        reads: Mapping[str, InputRead],
        watermark: Watermark,
        watermark_ms: int | None,
    ) -> Step:
        read = reads[self.source.name]
        rows = reused(read.rows)  # read once: output, side table, state and figures
        # The view's WHERE filters rows before their windows, as in Flink: never late.
        kept = rows if self.plan.where is None else rows.where(F.expr(self.plan.where))
        rowtime = self._rowtime(read, kept)
        started = context.checkpoint.watermark
        ending = LONG_MIN if watermark_ms is None else watermark_ms
        split = split_windows(
            kept,
            self.windows,
            rowtime=rowtime,
            started=LONG_MIN if started is None else started,
            ending=ending,
            state=context.state(OPEN_ROLE),
        )
        output = reused(self._aggregate(split.fired))
        counts = count_figures({
            "rows_in": rows,
            "retractions": rows.where(F.col(ROW_KIND) != RowKind.INSERT.value),
            "rows_out": output,
            "late_rows": split.late,
            "null_rowtime_rows": split.late.where(
                F.col(REASON_COLUMN) == LateReason.NULL_ROWTIME.value
            ),
            "windows_fired": split.fired.select(*WINDOW_COLUMNS).distinct(),
            "open_windows": open_windows(split.open, self.windows, rowtime=rowtime, ending=ending),
            "pending_rows": split.open,
        })
        if counts.pop("retractions"):
            raise _retraction_error(self.source.name, read)
        figures = {**counts, "state_rows": counts["pending_rows"]}
        return Step(
            output=output,
            late=split.late,
            state={OPEN_ROLE: split.open},
            history=None,
            figures=figures,
        )

    def _rowtime(self, read: InputRead, rows: DataFrame) -> Column:
        """The DESCRIPTOR column (for `SYSTEM_ROWTIME()`, the commit timestamp); its type is
        checked here when only Spark can tell it (a computed column): analysis, no job."""
        if read.assigner is not None:
            column = read.assigner.rowtime_column()
        elif self.source.watermark is not None:
            column = WatermarkAssigner.for_table(self.source).rowtime_column()
        else:
            column = F.col(self.plan.time_column)
        data_type = rows.select(column).schema[0].dataType
        if not is_timestamp(data_type):
            msg = (
                f"window view over {self.source.name!r}: DESCRIPTOR({self.plan.time_column}) is "
                f"{data_type.simpleString().upper()}; The window function requires the timecol "
                "to be TIMESTAMP or TIMESTAMP_LTZ: compute a TIMESTAMP(3) column and window it"
            )
            raise DefinitionError(msg)
        return column

    def _aggregate(self, fired: DataFrame) -> DataFrame:
        """The SELECT over the fired rows: grouped per window and key, HAVING applied."""
        items = [F.expr(item.expression).alias(f"{_ITEM}{i}")
                 for i, item in enumerate(self.plan.items)]
        having = [] if self.plan.having is None else [F.expr(self.plan.having).alias(_HAVING)]
        grouped = fired.groupBy(*[F.expr(key) for key in self.plan.group_keys], *WINDOW_COLUMNS)
        aggregated = grouped.agg(*items, *having)
        if having:
            aggregated = aggregated.where(F.col(_HAVING))
        return aggregated.select(
            *[F.col(f"{_ITEM}{i}").alias(item.name) for i, item in enumerate(self.plan.items)]
        )


def _retraction_error(table: str, read: InputRead) -> RunError:
    msg = (
        f"window aggregation over {table!r} doesn't support consuming update and delete "
        f"changes, but the commits of {table!r} up to version {read.position.version} hold "
        "-U/+U/-D rows; a window view "
        "needs an append-only input: window a table that is only appended to, or a "
        "deduplicated append-only copy of it"
    )
    return RunError(msg)
