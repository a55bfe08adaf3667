"""Session windows: Flink's `SESSION(TABLE t [PARTITION BY k], DESCRIPTOR(c), gap)`.

A row at t opens the window [t, t + gap); windows of one partition key that
overlap or touch merge (Flink's `TimeWindow.intersects` is inclusive: a row at
exactly last + gap joins the session), so a session is [first rowtime, last
rowtime + gap) and a row that bridges two sessions merges them. Sessions are
per PARTITION BY key, one over all rows without it (Flink keys the SESSION
window by its partition keys; the GROUP BY then aggregates within sessions).

A session fires once, when the watermark reaches its end − 1 ms; its rows stay
in state until then, so merging works across runs. Lateness as in Flink's
`MergingWindowProcessFunction`: the row's window is first merged with the open
sessions, then the merged window is checked. So a row is late only when its own
window [t, t + gap) had closed on arrival and it touches no session still open
then; a fired session is gone, and a row touching it (own window open) starts a
new one, as in Flink.

One simplification, for rows late to the source (rowtime behind the watermark):
within a run, sessions are merged over all the run's on-time rows, so a session
whose end the watermark passes mid-run still takes a later on-time row of the
same run that touches it, where Flink would have fired it first and opened a new
one. Across runs it is exact: only open sessions are kept in state.

All of it is Spark window functions and joins: a running max of t + gap per key
ordered by time, a new-session flag, a cumulative sum for the session id. Lazy.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.errors import AnalysisException
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from chronolake.errors import RunError
from chronolake.lake.changelog import ARRIVAL_ORDER
from chronolake.watermarks.assigner import LATE_COLUMN, WATERMARK_COLUMN
from chronolake.watermarks.late import LateReason, side_table_rows
from chronolake.watermarks.millis import millis_timestamp, timestamp_millis
from chronolake.windows.tvf import WINDOW_END, WINDOW_START, WINDOW_TIME, WindowSplit

_T = "__s_t"
_HELD = "__s_held"
_SID = "__s_sid"
_START = "__s_start"
_END = "__s_end"
_KEY = "__s_key_"


def split_sessions(
    rows: DataFrame,
    *,
    gap_ms: int,
    partition_keys: Sequence[str],
    rowtime: Column,
    started: int,
    ending: int,
    state: DataFrame | None = None,
) -> WindowSplit:
    """Split a run's rows (changelog columns and `_watermark`) by their sessions' fate, as
    `chronolake.windows.tvf.split_windows` does for TUMBLE / HOP / CUMULATE.

    `started`: the watermark the previous run ended at; `ending`: this run's. The
    sessions whose end − 1 ms is at or below `ending` fire now, with this run's rows
    and the `state` rows (earlier runs' open sessions). Fired rows carry
    `window_start`, `window_end`, `window_time` typed as the rowtime.
    """
    rows = rows.drop(LATE_COLUMN).withColumn(
        WATERMARK_COLUMN, F.greatest(F.col(WATERMARK_COLUMN), F.lit(started))
    )
    columns = rows.columns
    rowtime_type = rows.select(rowtime).schema[0].dataType
    null_rows = side_table_rows(rows.filter(rowtime.isNull()), LateReason.NULL_ROWTIME)
    current = rows.filter(rowtime.isNotNull()).withColumn(_HELD, F.lit(False))
    pending = current if state is None else _with_state(current, state)
    pending = pending.withColumn(_T, timestamp_millis(rowtime, rowtime_type).cast("long"))
    # A state row was accepted before; a new row whose own window is open never is late.
    own_late = ~F.col(_HELD) & (F.col(_T) + gap_ms - 1 <= F.col(WATERMARK_COLUMN))
    on_time, doubtful = pending.filter(~own_late), pending.filter(own_late)
    anchored = _sessions(on_time, gap_ms, partition_keys)
    condition, members = _joins_open_session(anchored, partition_keys, gap_ms)
    late = side_table_rows(
        doubtful.join(members, condition, "left_anti").select(*columns), LateReason.WINDOW_CLOSED
    )
    kept = [*(F.col(f"`{c}`") for c in columns), F.col(_T), F.col(_SID), F.col(_END)]
    merged = _attached(doubtful.join(members, condition, "left_semi"), anchored, partition_keys,
                       gap_ms)
    sessions = anchored.select(*kept).unionByName(merged.select(*kept)).withColumn(
        _START, F.min(_T).over(Window.partitionBy(*_keys(partition_keys), F.col(_SID)))
    ).localCheckpoint(eager=False)  # fired and open rows both read it: computed once, lazily
    fires = F.col(_END) - 1 <= F.lit(ending)
    inputs = [F.col(f"`{c}`") for c in columns]
    fired = sessions.filter(fires).select(
        *inputs,
        millis_timestamp(F.col(_START), rowtime_type).alias(WINDOW_START),
        millis_timestamp(F.col(_END), rowtime_type).alias(WINDOW_END),
        millis_timestamp(F.col(_END) - 1, rowtime_type).alias(WINDOW_TIME),
    )
    return WindowSplit(
        fired=fired,
        late=null_rows.unionByName(late),
        open=sessions.filter(~fires).select(*inputs),
    )


def open_sessions(
    open_rows: DataFrame, *, gap_ms: int, partition_keys: Sequence[str], rowtime: Column
) -> DataFrame:
    """The distinct sessions (partition keys, `window_start`, `window_end`) the state rows
    `split_sessions` returned hold (lazy)."""
    rowtime_type = open_rows.select(rowtime).schema[0].dataType
    timed = open_rows.withColumn(_T, timestamp_millis(rowtime, rowtime_type).cast("long"))
    return _sessions(timed, gap_ms, partition_keys).select(
        *_keys(partition_keys),
        millis_timestamp(F.col(_START), rowtime_type).alias(WINDOW_START),
        millis_timestamp(F.col(_END), rowtime_type).alias(WINDOW_END),
    ).distinct()


def _sessions(rows: DataFrame, gap_ms: int, partition_keys: Sequence[str]) -> DataFrame:
    """`rows` (with `_T`, epoch ms) with their session: `_SID` within the partition key,
    `_START` (first t) and `_END` (last t + gap). A row opens a new session when it is
    beyond the end of every earlier row's window (t > max(t' + gap)): touching merges."""
    keys = _keys(partition_keys)
    by_time = Window.partitionBy(*keys).orderBy(_T)
    before = by_time.rowsBetween(Window.unboundedPreceding, -1)
    reach = F.max(F.col(_T) + gap_ms).over(before)
    opens = (reach.isNull() | (F.col(_T) > reach)).cast("long")
    numbered = rows.withColumn(
        _SID, F.sum(opens).over(by_time.rowsBetween(Window.unboundedPreceding, 0))
    )
    session = Window.partitionBy(*keys, F.col(_SID))
    return numbered.withColumn(_START, F.min(_T).over(session)).withColumn(
        _END, F.max(_T).over(session) + gap_ms
    )


def _keys(partition_keys: Sequence[str]) -> list[Column]:
    return [F.col(f"`{key}`") for key in partition_keys]


def _same_key(partition_keys: Sequence[str]) -> list[Column]:
    """Join conditions: the row's partition key is the renamed one (nulls are one key)."""
    return [F.col(f"`{key}`").eqNullSafe(F.col(f"{_KEY}{i}"))
            for i, key in enumerate(partition_keys)]


def _renamed_keys(partition_keys: Sequence[str]) -> list[Column]:
    return [F.col(f"`{key}`").alias(f"{_KEY}{i}") for i, key in enumerate(partition_keys)]


def _joins_open_session(
    anchored: DataFrame, partition_keys: Sequence[str], gap_ms: int
) -> tuple[Column, DataFrame]:
    """(condition, on-time rows) joining a row whose own window had closed on arrival to the
    on-time rows that let it in: same key, windows touching (|t - t'| <= gap), arrived
    before it, in a session still open on its arrival. Flink merges it into that session."""
    member = "__s_member_"
    arrival = [c for c in ARRIVAL_ORDER if c in anchored.columns]
    members = anchored.select(
        *_renamed_keys(partition_keys),
        *[F.col(c).alias(f"{member}{c}") for c in (_T, _HELD, _END, *arrival)],
    )
    before = F.lit(False)
    for name in reversed(arrival):  # (commit version, position), compared in that order
        mine, theirs = F.col(f"{member}{name}"), F.col(name)
        before = (mine < theirs) | ((mine == theirs) & before)
    condition = (
        (F.abs(F.col(f"{member}{_T}") - F.col(_T)) <= gap_ms)
        & (F.col(f"{member}{_END}") - 1 > F.col(WATERMARK_COLUMN))
        & (F.col(f"{member}{_HELD}") | before)
    )
    for same in _same_key(partition_keys):
        condition = condition & same
    return condition, members


def _attached(
    merged: DataFrame, anchored: DataFrame, partition_keys: Sequence[str], gap_ms: int
) -> DataFrame:
    """The merged rows with the session they joined (`_SID`, `_END`): the one open session
    their window touches. There is one: its end is past the watermark, and the row's
    window ends at or before it, so a second, later session could not touch the row."""
    bound_sid, bound_start, bound_end = "__s_bound_sid", "__s_bound_start", "__s_bound_end"
    bounds = anchored.groupBy(*_renamed_keys(partition_keys), F.col(_SID).alias(bound_sid)).agg(
        F.min(_START).alias(bound_start), F.max(_END).alias(bound_end)
    )
    touches = (F.col(bound_start) <= F.col(_T) + gap_ms) & (F.col(bound_end) >= F.col(_T)) & (
        F.col(bound_end) - 1 > F.col(WATERMARK_COLUMN)
    )
    for same in _same_key(partition_keys):
        touches = touches & same
    return merged.join(bounds, touches, "inner").withColumn(_SID, F.col(bound_sid)).withColumn(
        _END, F.col(bound_end)
    )


def _with_state(current: DataFrame, state: DataFrame) -> DataFrame:
    """This run's rows after the open sessions' rows of earlier runs (same columns)."""
    try:
        return state.withColumn(_HELD, F.lit(True)).unionByName(current)
    except AnalysisException as error:
        msg = (
            f"session state columns {state.columns} do not match the input's "
            f"{[c for c in current.columns if c != _HELD]}: {error.getMessage()}; pass the "
            "`state` the previous run of this query returned"
        )
        raise RunError(msg) from None
