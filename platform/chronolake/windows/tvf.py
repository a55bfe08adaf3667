"""Event-time window aggregation: Flink's `TUMBLE`, `HOP` and `CUMULATE` window table functions.

`tumble(orders, size=timedelta(minutes=10), aggregations=[...])` is
`SELECT window_start, window_end, ... FROM TABLE(TUMBLE(TABLE orders,
DESCRIPTOR(order_time), INTERVAL '10' MINUTES)) GROUP BY window_start,
window_end`, run over one run's rows with state carried between runs.
`split_windows` is the core both these functions and the window views of
`chronolake.runtime.window_operator` use: it takes watermark values, not an
assignment, so it serves event-time and processing-time watermarks alike.

Semantics, as in Flink's window aggregate operator:

- Windows are aligned to the epoch (UTC), shifted by the optional offset o:
  a tumbling window is [k·size + o, (k+1)·size + o); a hopping window of
  `size` every `slide` covers [k·slide + o, k·slide + o + size); a cumulation
  of `size` by `step` is [s, s + step), [s, s + 2·step), … [s, s + size) with
  s = k·size + o (`chronolake.windows.assign`). A row belongs to every window
  with start <= rowtime < end.
- A window fires when the watermark reaches end − 1 ms (its max
  timestamp). It is emitted exactly once: in the run whose watermark crosses
  end − 1 ms; the windows still open at the end of a run keep their raw rows in
  the returned `state`, which the next run takes back. `final=True` (a bounded
  input ending) closes the run with a watermark of +infinity: every open
  window fires.
- A row arriving when its window has already fired (end − 1 <= the watermark
  in force on arrival) is not usable. For hopping and cumulating windows the
  row still counts in the windows that have not fired; only a row all of whose
  windows fired goes to the side table (Flink drops such a row when its last
  window fired: for a cumulation, the one ending at s + size). A row whose
  rowtime is late for the source but whose window is still open is aggregated
  normally.
- Under processing-time watermarks the watermark is the clock's time: a run's
  rows arrive at the time of the previous run's watermark, and the windows
  whose end − 1 ms the clock has passed fire.
- Rows with a null rowtime cannot be placed in a window: side table, reason
  `null_rowtime`. Late rows: reason `window_closed`.
- The input is expected append-only (+I rows), as Flink's window aggregation
  requires; every row is aggregated as given.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

from pyspark.errors import AnalysisException
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import DataType

from chronolake.errors import DefinitionError, RunError
from chronolake.schema.windows import WINDOW_END, WINDOW_START, WINDOW_TIME, WindowKind, Windows
from chronolake.watermarks.assigner import LATE_COLUMN, WATERMARK_COLUMN, AssignedChangelog
from chronolake.watermarks.late import LateReason, count_by_reason, side_table_rows
from chronolake.watermarks.millis import millis_timestamp, timestamp_millis
from chronolake.watermarks.watermark import LONG_MAX
from chronolake.windows.assign import END, START, bounds, last_end

_WINDOW = "__window"
_LAST_END_MS = "__window_last_end_ms"


@dataclass(frozen=True)
class WindowResult:
    """What one run of a window aggregation produces.

    `output`: one row per (keys, window) fired in this run: the keys,
    `window_start`, `window_end`, `window_time` (end − 1 ms) and the
    aggregations. `late_rows`: the side table (input columns, `_watermark`,
    `_late_reason`). `state`: raw rows of windows still open, to pass as
    `state=` to the next run (persist it before overwriting what it was read
    from: it is lazy). `watermark`: the input watermark the run ended at.
    """

    output: DataFrame
    late_rows: DataFrame
    state: DataFrame
    watermark: int

    def late_counts(self) -> dict[str, int]:
        """Side-table rows per reason, for the run's metadata (one small job)."""
        return count_by_reason(self.late_rows)


@dataclass(frozen=True)
class WindowSplit:
    """One run's rows, split by what the watermark did to their windows.

    `fired`: one row per (input row, window that fires in this run): the input
    columns plus `window_start`, `window_end` and `window_time` (end − 1 ms),
    ready to be grouped by window. `late`: side-table rows (null rowtime, or
    every window already fired on arrival). `open`: the input rows, as given,
    that still belong to an open window: the state for the next run.
    """

    fired: DataFrame
    late: DataFrame
    open: DataFrame


def tumble(
    assigned: AssignedChangelog,
    *,
    size: timedelta,
    aggregations: Sequence[Column],
    keys: Sequence[str] = (),
    time_col: str | None = None,
    offset: timedelta = timedelta(0),
    state: DataFrame | None = None,
    final: bool = False,
) -> WindowResult:
    """Tumbling event-time windows of `size`, grouped by `keys`, `window_start`, `window_end`.

    `time_col` is the DESCRIPTOR column and must be the rowtime the input was
    stamped for (default). `aggregations` are Spark columns such as
    `F.sum("price").alias("total")`. `offset` shifts the windows (Flink's
    optional last argument): |offset| < size, negative allowed.

    Example:
        >>> result = tumble(assigned, size=timedelta(minutes=10),       # doctest: +SKIP
        ...                 aggregations=[F.sum("price").alias("total")])
    """
    size_ms = _millis(size, what="TUMBLE size")
    offset_ms = _offset_millis(offset, what="TUMBLE")
    if abs(offset_ms) >= size_ms:
        msg = (
            f"TUMBLE offset {offset} must be shorter than the size {size} (Flink: abs(offset) < "
            f"size); offset={offset % size} gives the same windows"
        )
        raise DefinitionError(msg)
    return _aggregate(
        assigned,
        Windows(kind=WindowKind.TUMBLE, size_ms=size_ms, slide_ms=size_ms, offset_ms=offset_ms),
        aggregations=aggregations,
        keys=keys,
        time_col=time_col,
        state=state,
        final=final,
    )


def hop(
    assigned: AssignedChangelog,
    *,
    size: timedelta,
    slide: timedelta,
    aggregations: Sequence[Column],
    keys: Sequence[str] = (),
    time_col: str | None = None,
    offset: timedelta = timedelta(0),
    state: DataFrame | None = None,
    final: bool = False,
) -> WindowResult:
    """Hopping event-time windows of `size` every `slide` (Flink's `HOP(..., slide, size)`).

    `size` must be a whole multiple of `slide`, as Flink requires. Otherwise as `tumble`
    (any offset: the windows repeat every slide).

    Example:
        >>> result = hop(assigned, size=timedelta(minutes=10),          # doctest: +SKIP
        ...              slide=timedelta(minutes=5), aggregations=[F.count("*").alias("n")])
    """
    size_ms = _millis(size, what="HOP size")
    slide_ms = _millis(slide, what="HOP slide")
    _require_multiple(size, slide, what="HOP", part="slide")
    return _aggregate(
        assigned,
        Windows(kind=WindowKind.HOP, size_ms=size_ms, slide_ms=slide_ms,
                offset_ms=_offset_millis(offset, what="HOP")),
        aggregations=aggregations,
        keys=keys,
        time_col=time_col,
        state=state,
        final=final,
    )


def cumulate(
    assigned: AssignedChangelog,
    *,
    step: timedelta,
    size: timedelta,
    aggregations: Sequence[Column],
    keys: Sequence[str] = (),
    time_col: str | None = None,
    offset: timedelta = timedelta(0),
    state: DataFrame | None = None,
    final: bool = False,
) -> WindowResult:
    """Cumulating event-time windows (Flink's `CUMULATE(..., step, size)`): every `size`, a
    cumulation whose windows share their start and end at each `step` up to `size`.

    A day by the hour gives [00:00, 01:00), [00:00, 02:00), … [00:00, 24:00), each
    emitted once, when the watermark passes its end. `size` must be a whole
    multiple of `step`, as Flink requires. Otherwise as `tumble` (any offset).

    Example:
        >>> result = cumulate(assigned, step=timedelta(hours=1),        # doctest: +SKIP
        ...                   size=timedelta(days=1), aggregations=[F.count("*").alias("n")])
    """
    step_ms = _millis(step, what="CUMULATE step")
    size_ms = _millis(size, what="CUMULATE size")
    _require_multiple(size, step, what="CUMULATE", part="step")
    return _aggregate(
        assigned,
        Windows(kind=WindowKind.CUMULATE, size_ms=size_ms, slide_ms=step_ms,
                offset_ms=_offset_millis(offset, what="CUMULATE")),
        aggregations=aggregations,
        keys=keys,
        time_col=time_col,
        state=state,
        final=final,
    )


def _millis(duration: timedelta, *, what: str) -> int:
    millis, rest = divmod(duration, timedelta(milliseconds=1))
    if rest or millis <= 0:
        msg = (
            f"{what} must be a positive whole number of milliseconds, got {duration!r}; "
            "e.g. timedelta(minutes=10)"
        )
        raise DefinitionError(msg)
    return millis


def _offset_millis(offset: timedelta, *, what: str) -> int:
    millis, rest = divmod(offset, timedelta(milliseconds=1))
    if rest:
        msg = (
            f"{what} offset must be a whole number of milliseconds, got {offset!r}; "
            "e.g. timedelta(minutes=16) or timedelta(minutes=-16)"
        )
        raise DefinitionError(msg)
    return millis


def _require_multiple(size: timedelta, part_length: timedelta, *, what: str, part: str) -> None:
    """Flink's rule: a HOP size is k × slide, a CUMULATE size k × step."""
    if size % part_length:
        msg = (
            f"{what} size {size} is not a whole multiple of {part} {part_length}; choose a "
            f"size that is k × {part}, e.g. size={part_length * max(1, size // part_length)}"
        )
        raise DefinitionError(msg)


def _aggregate(
    assigned: AssignedChangelog,
    windows: Windows,
    *,
    aggregations: Sequence[Column],
    keys: Sequence[str],
    time_col: str | None,
    state: DataFrame | None,
    final: bool,
) -> WindowResult:
    kind = windows.kind
    rowtime_name = assigned.assigner.rowtime
    if time_col is not None and time_col != rowtime_name:
        msg = (
            f"{kind}(DESCRIPTOR({time_col})): an event-time window needs the rowtime attribute "
            f"the input's watermark is defined on, {rowtime_name!r}; use DESCRIPTOR({rowtime_name})"
        )
        raise DefinitionError(msg)
    if not aggregations:
        msg = (
            f"{kind} window aggregation needs at least one aggregation, "
            'e.g. aggregations=[F.count("*").alias("rows")]'
        )
        raise DefinitionError(msg)
    columns = assigned.rows.drop(LATE_COLUMN).columns
    missing = [key for key in keys if key not in columns]
    if missing:
        msg = (
            f"{kind} window keys {', '.join(map(repr, missing))} are not input columns; "
            f"use some of: {', '.join(columns)}"
        )
        raise DefinitionError(msg)
    # The watermark this run ends at: known from the assignment, no Spark job.
    ending = LONG_MAX if final else assigned.state().watermark
    split = split_windows(
        assigned.rows,
        windows,
        rowtime=assigned.assigner.rowtime_column(),
        started=assigned.start.watermark,
        ending=ending,
        state=state,
    )
    window = (WINDOW_START, WINDOW_END, WINDOW_TIME)
    output = split.fired.groupBy(*keys, *window).agg(*aggregations)
    return WindowResult(
        output=output.select(*keys, *window, *[c for c in output.columns
                                               if c not in {*keys, *window}]),
        late_rows=split.late,
        state=split.open,
        watermark=ending,
    )


def split_windows(
    rows: DataFrame,
    windows: Windows,
    *,
    rowtime: Column,
    started: int,
    ending: int,
    state: DataFrame | None = None,
) -> WindowSplit:
    """Split a run's rows (changelog columns and `_watermark`) by their windows' fate.

    `started` is the watermark the previous run ended at (windows whose end − 1 ms
    is at or below it fired then), `ending` the one this run ends at: the windows
    with `started < end − 1 <= ending` fire now, with this run's rows and the
    `state` rows of earlier runs. A row arriving in this run is judged against the
    watermark in force on its arrival, and never less than `started`: with
    processing-time watermarks (rows stamped Long.MIN_VALUE) that is the clock's
    time at the previous run, so windows close by the clock. Lazy: no Spark job.
    """
    rows = rows.drop(LATE_COLUMN).withColumn(
        WATERMARK_COLUMN, F.greatest(F.col(WATERMARK_COLUMN), F.lit(started))
    )
    rowtime_type = rows.select(rowtime).schema[0].dataType
    null_rows = side_table_rows(rows.filter(rowtime.isNull()), LateReason.NULL_ROWTIME)
    current = rows.filter(rowtime.isNotNull())
    pending = current if state is None else _with_state(current, state)
    # A row is unusable when even its last window (the one with the largest end) has fired.
    rowtime_ms = timestamp_millis(rowtime, rowtime_type)
    pending = pending.withColumn(_LAST_END_MS, last_end(windows, rowtime_ms))
    fully_late = F.col(_LAST_END_MS) - 1 <= F.col(WATERMARK_COLUMN)
    closed_rows = side_table_rows(
        pending.filter(fully_late).drop(_LAST_END_MS), LateReason.WINDOW_CLOSED
    )
    live = pending.filter(~fully_late)

    def fires_now(window: Column) -> Column:
        """Open on the row's arrival and before this run, closed by this run's end."""
        last = window.getField(END) - 1
        return (last > F.col(WATERMARK_COLUMN)) & (last > F.lit(started)) & (
            last <= F.lit(ending)
        )

    inputs = [F.col(f"`{c}`") for c in current.columns]
    fired = live.select(
        *inputs, F.explode(F.filter(bounds(windows, rowtime_ms), fires_now)).alias(_WINDOW)
    ).select(*inputs, *_window_columns(F.col(_WINDOW), rowtime_type))
    open_rows = live.filter(F.col(_LAST_END_MS) - 1 > F.lit(ending)).drop(_LAST_END_MS)
    return WindowSplit(
        fired=fired, late=null_rows.unionByName(closed_rows), open=open_rows
    )


def open_windows(
    open_rows: DataFrame, windows: Windows, *, rowtime: Column, ending: int
) -> DataFrame:
    """The distinct windows (`window_start`, `window_end`) still open after watermark
    `ending`, from the state rows `split_windows` returned (lazy)."""
    rowtime_type = open_rows.select(rowtime).schema[0].dataType
    held = bounds(windows, timestamp_millis(rowtime, rowtime_type))
    still_open = F.filter(held, lambda window: window.getField(END) - 1 > F.lit(ending))
    return (
        open_rows.select(F.explode(still_open).alias(_WINDOW))
        .distinct()
        .select(*_window_columns(F.col(_WINDOW), rowtime_type)[:2])
    )


def _window_columns(window: Column, rowtime_type: DataType) -> list[Column]:
    """`window_start`, `window_end`, `window_time` of a (start, end) ms struct, typed as the
    rowtime (TIMESTAMP_NTZ read as UTC, as Flink does)."""
    return [
        millis_timestamp(window.getField(START), rowtime_type).alias(WINDOW_START),
        millis_timestamp(window.getField(END), rowtime_type).alias(WINDOW_END),
        millis_timestamp(window.getField(END) - 1, rowtime_type).alias(WINDOW_TIME),
    ]


def _with_state(current: DataFrame, state: DataFrame) -> DataFrame:
    """This run's rows after the open windows' rows of earlier runs (same columns)."""
    try:
        return state.unionByName(current)
    except AnalysisException as error:
        msg = (
            f"window state columns {state.columns} do not match the input's {current.columns}: "
            f"{error.getMessage()}; pass the `state` the previous run of this query returned"
        )
        raise RunError(msg) from None
