"""The window aggregate as a run operator: TUMBLE / HOP / CUMULATE windows emitted once, when
they close.

A window view (`chronolake.sql.window`) reads one table, or a derived table's
change feed. Each run places the new rows (after the view's WHERE) in their
windows; a window [start, end) fires in the run whose watermark reaches end − 1
ms and is emitted then, exactly once, aggregated as the SELECT says: an
insert-only output. Over an updating input, a retraction (-U, -D) that arrives
while its window is open cancels the matching addition before the window fires;
one for a window already emitted goes to the side table (`retraction_after_emit`).
Rows of windows still open stay in state (role `open`) and are taken back by the
next run. A row whose windows had all fired when it arrived, or whose rowtime is
null, goes to the late-rows side table with the reason and the watermark on arrival.

With an event-time source (`WATERMARK FOR`) the watermark is the source's. A
source without one (or a hybrid source) emits processing-time watermarks: the
watermark is then the clock's time (`RunContext.clock`), so the same query closes
its windows by the clock: a window fires in the first run after its end, and a
row arriving for a window that an earlier run closed is late.

SESSION windows merge instead of being fixed (`chronolake.windows.session`): the
same run protocol, state and figures, with `open_windows` counting open sessions.

A window Top-N or deduplication view (`chronolake.sql.window_rank`) ranks the rows of
the windows fired in the run, after the aggregate or straight over the window's rows
(`chronolake.windows.rank`): emitted once per window too, insert-only.
"""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from chronolake.errors import DefinitionError
from chronolake.lake.changelog import ARRIVAL_ORDER, ROW_KIND, RowKind
from chronolake.lake.file_span import FileSpan
from chronolake.runtime.inputs import InputRead
from chronolake.runtime.operator import (
    Operator,
    Region,
    Restated,
    RunContext,
    Step,
    Where,
    count_figures,
)
from chronolake.schema import ViewSpec
from chronolake.schema.windows import WINDOW_COLUMNS, Windows
from chronolake.sql.current_watermark import (
    FUNCTION,
    ROW_WATERMARK,
    bind_spark_sql,
    held_by,
    with_row_watermark,
)
from chronolake.sql.view_kinds import is_updating
from chronolake.sql.window import WindowPlan
from chronolake.sql.window_rank import WindowRankPlan
from chronolake.watermarks.assigner import WatermarkAssigner
from chronolake.watermarks.late import REASON_COLUMN, LateReason
from chronolake.watermarks.millis import is_timestamp, timestamp_millis, within
from chronolake.watermarks.watermark import LONG_MIN, Watermark
from chronolake.windows.assign import first_end, overlapping_span
from chronolake.windows.rank import ranked_rows
from chronolake.windows.session import open_sessions, split_sessions
from chronolake.windows.tvf import (
    WINDOW_END,
    WINDOW_START,
    WindowKind,
    WindowSplit,
    open_windows,
    split_windows,
)

OPEN_ROLE = "open"
"""The state table of the rows held in open windows."""

_ITEM = "__w_item_"
_RETRACTED = "__w_retracted"
_NTH = "__w_nth"
RETRACTIONS = (RowKind.UPDATE_BEFORE.value, RowKind.DELETE.value)
_HAVING = "__w_having"


class WindowAggregateOperator(Operator):
    """A view `SELECT ... FROM TABLE(TUMBLE|HOP|CUMULATE(TABLE t, ...)) GROUP BY window_start,
    window_end, ...`, run incrementally.

    Example:
        >>> catalog.execute('''CREATE VIEW orders_per_currency AS
        ...     SELECT window_start, window_end, currency, COUNT(*) AS orders
        ...     FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(order_time), INTERVAL '10' MINUTES))
        ...     GROUP BY window_start, window_end, currency''')      # doctest: +SKIP
        >>> DerivedTable(catalog, "orders_per_currency").run()       # doctest: +SKIP
    """

    def __init__(self, view: ViewSpec, plan: WindowPlan | WindowRankPlan) -> None:
        # A window Top-N / deduplication ranks the window stage's rows (`windows.rank`).
        self.rank = plan if isinstance(plan, WindowRankPlan) else None
        self.plan: WindowPlan = plan.window if isinstance(plan, WindowRankPlan) else plan
        self.source = self.plan.source
        self.inputs = (self.source,)
        self.event_time = self.plan.event_time
        self.clock_driven = not self.event_time
        self.windows: Windows = self.plan.windows
        self.updating = is_updating(self.source)
        if self.updating and self.plan.rows:
            msg = (
                f"view {view.name!r}: a window Top-N over a window table function ranks "
                f"insert-only rows (Flink: Window rank does not support input RowKind -U/-D), "
                f"but {self.source.name!r} has updates and deletes; rank a window aggregate of "
                f"it instead (FROM (SELECT ... GROUP BY window_start, window_end, ...))"
            )
            raise DefinitionError(msg)
        # A retraction cancels the addition with the same stored values in the same window
        # (metadata and computed columns differ between the two: not compared).
        self.compared = (*(c.name for c in self.source.physical_columns), WINDOW_START, WINDOW_END)

    def step(
        self,
        context: RunContext,
        reads: Mapping[str, InputRead],
        watermark: Watermark,
        watermark_ms: int | None,
    ) -> Step:
        read = reads[self.source.name]
        rows = read.rows  # held: read by the output, side table, state and figures
        # The view's WHERE filters rows before their windows, as in Flink: never late.
        kept = rows if self.plan.where is None else self._filtered(rows)
        rowtime = self._rowtime(read, kept)
        started = context.checkpoint.watermark
        ending = LONG_MIN if watermark_ms is None else watermark_ms
        split = self._split(
            kept,
            rowtime=rowtime,
            started=LONG_MIN if started is None else started,
            ending=ending,
            state=context.state(OPEN_ROLE),
        )
        fired, late = split.fired, split.late
        if self.updating:
            fired, late = _retractions_applied(fired, self.compared), _retractions_named(late)
        output = self._output(fired)
        counts = count_figures({
            "rows_in": rows,
            "retractions_in": Where(rows, F.col(ROW_KIND).isin(*RETRACTIONS)),
            "late_rows": late,
            "null_rowtime_rows": Where(
                late, F.col(REASON_COLUMN) == LateReason.NULL_ROWTIME.value
            ),
            "windows_fired": split.fired.select(*self._window_identity()).distinct(),
            "open_windows": self._open_windows(split.open, rowtime=rowtime, ending=ending),
            "pending_rows": split.open,
        })
        figures = {**counts, "state_rows": counts["pending_rows"]}
        return Step(
            output=output,
            late=late,
            state={OPEN_ROLE: split.open},
            history=None,
            figures=figures,
        )

    def restates(self, source: str) -> bool:
        return self.plan.kind is not WindowKind.SESSION and self.rank is None and not self.plan.rows

    def restated_region(self, source: str, start_ms: int, end_ms: int) -> Region | None:
        """The windows overlapping [`start_ms`, `end_ms`) and every row of them; a TUMBLE, HOP
        or CUMULATE aggregate only (sessions merge; Top-N ranks across windows' keys)."""
        if not self.restates(source):
            return None
        windows = self.windows
        span = overlapping_span(windows, start_ms, end_ms)

        start, end = (self.plan.selected_as(name) for name in (WINDOW_START, WINDOW_END))
        assert start is not None and end is not None  # a view without them is refused

        def rows_of(output: DataFrame) -> DataFrame:
            start_ms_of, end_ms_of = (
                timestamp_millis(F.col(f"`{name}`"), output.schema[name].dataType)
                for name in (start, end)
            )
            overlapping = (start_ms_of < end_ms) & (end_ms_of > start_ms)
            return output.where(overlapping)

        # a window overlapping the range starts in [span start, range end)
        return Region(input_span=span, output_span=(first_end(windows, start_ms) - 1, span[1]),
                      rows_of=rows_of, stored_files=FileSpan(start, span[0], end_ms))

    def restate(
        self, context: RunContext, read: InputRead, region: Region, watermark_ms: int | None
    ) -> Restated:
        rows = read.rows
        kept = rows if self.plan.where is None else self._filtered(rows)
        rowtime = self._rowtime(read, kept)
        started = context.checkpoint.watermark
        before = LONG_MIN if started is None else started
        ending = LONG_MIN if watermark_ms is None else watermark_ms
        # As of the committed watermark, nothing fired before: the region's windows it closed
        # fire with all their rows (none late, as in a refresh's snapshot), the others stay
        # open, their rows replacing the span's in state.
        split = split_windows(kept, self.windows, rowtime=rowtime, started=LONG_MIN,
                              ending=before)
        fired = _retractions_applied(split.fired, self.compared) if self.updating else split.fired
        state = context.state(OPEN_ROLE)
        if state is not None:
            rowtime_type = state.select(rowtime).schema[0].dataType
            outside = ~within(rowtime, rowtime_type, *region.input_span)
            state = state.where(outside).unionByName(split.open)
        held = split.open if state is None else state
        # Then the watermark the rewrite's rows moved: the windows it closes fire, as in an
        # ordinary run without new rows.
        advanced = split_windows(held, self.windows, rowtime=rowtime, started=before,
                                 ending=ending)
        closed = advanced.fired
        if self.updating:
            closed = _retractions_applied(closed, self.compared)
        output = region.rows_of(self._output(fired)).unionByName(self._output(closed))
        counts = count_figures({"rows_in": rows, "pending_rows": advanced.open})
        figures = {**counts, "late_rows": 0, "state_rows": counts["pending_rows"]}
        return Restated(output=output, state={OPEN_ROLE: advanced.open}, figures=figures)

    def _split(
        self, rows: DataFrame, *, rowtime: Column, started: int, ending: int,
        state: DataFrame | None,
    ) -> WindowSplit:
        """The run's rows split by their windows' fate: sessions merge, the others are fixed."""
        if self.plan.kind is WindowKind.SESSION:
            assert self.plan.gap_ms is not None
            return split_sessions(
                rows, gap_ms=self.plan.gap_ms, partition_keys=self.plan.partition_keys,
                rowtime=rowtime, started=started, ending=ending, state=state,
            )
        return split_windows(
            rows, self.windows, rowtime=rowtime, started=started, ending=ending, state=state
        )

    def _open_windows(self, open_rows: DataFrame, *, rowtime: Column, ending: int) -> DataFrame:
        """The windows (sessions: per partition key) still open after this run."""
        if self.plan.kind is WindowKind.SESSION:
            assert self.plan.gap_ms is not None
            return open_sessions(open_rows, gap_ms=self.plan.gap_ms,
                                 partition_keys=self.plan.partition_keys, rowtime=rowtime)
        return open_windows(open_rows, self.windows, rowtime=rowtime, ending=ending)

    def _window_identity(self) -> list[str]:
        """What tells fired windows apart: a session is also its partition key's."""
        keys = self.plan.partition_keys if self.plan.kind is WindowKind.SESSION else ()
        return [*(f"`{key}`" for key in keys), *WINDOW_COLUMNS]

    def _filtered(self, rows: DataFrame) -> DataFrame:
        """The rows the view's WHERE keeps, `CURRENT_WATERMARK` being each row's `_watermark`:
        the source's watermark when the row arrived (in a ticked run, at its tick's start)."""
        assert self.plan.where is not None
        held = held_by(self.source, per_row=True)
        where = bind_spark_sql(self.plan.where, {self.source.name.lower(): held} if held else {},
                               where=f"window view over {self.source.name!r}")
        if held is None or FUNCTION not in self.plan.where.upper():
            return rows.where(F.expr(where))
        stamped = with_row_watermark(rows, held.rowtime)
        return stamped.where(F.expr(where)).drop(ROW_WATERMARK)

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

    def _output(self, fired: DataFrame) -> DataFrame:
        """The window stage (an aggregate, or a window TVF's rows), then the rank stage."""
        if not self.plan.rows:
            output = self._aggregate(fired)
        else:
            items = [F.expr(item.expression).alias(item.name) for item in self.plan.items]
            output = fired.select(*items, *ARRIVAL_ORDER)
        return output if self.rank is None else ranked_rows(output, self.rank)

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


def _retractions_applied(fired: DataFrame, compared: tuple[str, ...]) -> DataFrame:
    """The fired windows' additions (+I, +U) left after their retractions (-U, -D): each
    retraction cancels one addition with the same values in the same window, the earliest."""
    same = Window.partitionBy(*(F.col(f"`{c}`") for c in compared))
    retracting = F.col(ROW_KIND).isin(*RETRACTIONS)
    counted = fired.withColumn(_RETRACTED, F.sum(retracting.cast("int")).over(same))
    additions = counted.where(~retracting).withColumn(
        _NTH, F.row_number().over(same.orderBy(*ARRIVAL_ORDER))
    )
    return additions.where(F.col(_NTH) > F.col(_RETRACTED)).drop(_RETRACTED, _NTH)


def _retractions_named(late: DataFrame) -> DataFrame:
    """Late retractions say so: they would have revised a window already emitted."""
    closed = (F.col(REASON_COLUMN) == LateReason.WINDOW_CLOSED.value) & F.col(ROW_KIND).isin(
        *RETRACTIONS
    )
    return late.withColumn(
        REASON_COLUMN,
        F.when(closed, F.lit(LateReason.RETRACTION_AFTER_EMIT.value)).otherwise(
            F.col(REASON_COLUMN)
        ),
    )
