"""What runs a view: one registration per operation, the one list every tier dispatches on.

A view is recognized by the first registration, in this order, whose test its query
passes: a temporal join, a window Top-N (a rank over a window table function), a window
aggregate, a deduplication, an interval join, a history; any other view is plain, computed
as a whole on read. A registration holds the kind recorded in the view's catalog entry, the plan its
query binds to, the planner that binds it, and the figures its runs count besides those
every run counts (`chronolake.runtime.figures`, which refuses any other). The runs' tier
registers each plan type's operator (`chronolake.runtime.operators`), and Dagster's each
kind's op (`chronolake.dagster.derived_assets`), described from here; their tests check that
none is missing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from chronolake.schema import TableSpec, ViewKind, ViewSpec
from chronolake.sql.deduplication import DeduplicationPlan, plan_deduplication
from chronolake.sql.history import HistoryPlan, history_read, plan_history
from chronolake.sql.interval import IntervalJoinPlan, is_interval_join, plan_interval_join
from chronolake.sql.query import temporal_joins
from chronolake.sql.temporal import TemporalJoinPlan, plan_temporal_join
from chronolake.sql.window import WindowPlan, is_window_aggregate, plan_window_aggregate
from chronolake.sql.window_rank import WindowRankPlan, is_window_rank, plan_window_rank

Spec = TableSpec | ViewSpec
OperatorPlan = (
    TemporalJoinPlan | WindowRankPlan | WindowPlan | IntervalJoinPlan | DeduplicationPlan
    | HistoryPlan
)
"""A derived table's query bound against what it reads: what its operator runs."""


@dataclass(frozen=True)
class Operation:
    """How one kind of view is recognized, recorded and planned."""

    kind: ViewKind
    """What the view's catalog entry records (a window Top-N records a window aggregate)."""
    name: str
    summary: str
    """What the operation does, in one line."""
    recognizes: Callable[[ViewSpec], bool]
    planner: Callable[[ViewSpec, Mapping[str, Spec]], OperatorPlan] | None
    """Binds the view's query against its inputs; None for a view no operator runs."""
    plan_type: type[OperatorPlan] | None
    figures: tuple[str, ...] = ()
    """The figures its runs count besides every run's (`runtime.figures.COMMON_FIGURES`)."""
    state: str = "none: computed as a whole on read"
    """What its operator keeps in state between runs, in one line (`EXPLAIN` shows it)."""


_WINDOW_FIGURES = ("retractions_in", "windows_fired", "open_windows")
"""What a window aggregate counts, ranked (Top-N) or not: one operator runs both."""

TEMPORAL_JOIN = Operation(
    ViewKind.TEMPORAL_JOIN, "temporal join",
    "joins each probe row with the version of a versioned table valid at its time",
    lambda view: bool(temporal_joins(view.query)),
    lambda view, inputs: plan_temporal_join(view.query, inputs), TemporalJoinPlan,
    ("probe_rows_in", "build_rows_in", "late_probe_rows", "late_build_rows",
     "emitted_probe_rows", "unmatched_rows"),
    "probe rows waiting for the watermark; per key, the build versions newer than the "
    "watermark and the latest at or below it; every build event in a history table",
)
WINDOW_TOP_N = Operation(
    ViewKind.WINDOW_AGGREGATE, "window Top-N",
    "ranks each window's rows and keeps the top ones once the watermark closes it",
    lambda view: is_window_rank(view.query),
    lambda view, inputs: plan_window_rank(view.query, inputs), WindowRankPlan,
    _WINDOW_FIGURES, "the rows of each window still open (role `open`)",
)
WINDOW_AGGREGATE = Operation(
    ViewKind.WINDOW_AGGREGATE, "window aggregate",
    "aggregates each window's rows once the watermark closes it",
    lambda view: is_window_aggregate(view.query),
    lambda view, inputs: plan_window_aggregate(view.query, inputs), WindowPlan,
    _WINDOW_FIGURES, "the rows of each window still open (role `open`)",
)
DEDUPLICATION = Operation(
    ViewKind.DEDUPLICATION, "deduplication",
    "keeps the first or last row of each key, as a changelog",
    lambda view: view.deduplication is not None, plan_deduplication, DeduplicationPlan,
    ("outdated_rows",), "the row each key keeps (role `kept`)",
)
INTERVAL_JOIN = Operation(
    ViewKind.INTERVAL_JOIN, "interval join",
    "joins rows of two inputs whose times lie within bounds of each other",
    lambda view: is_interval_join(view.query),
    lambda view, inputs: plan_interval_join(view.query, inputs, view=view.name),
    IntervalJoinPlan,
    ("left_rows_in", "right_rows_in", "matched_pairs", "padded_rows", "closed_on_arrival_rows",
     "left_state_rows", "right_state_rows"),
    "each input's rows whose join interval is still open (roles `left` and `right`)",
)
HISTORY = Operation(
    ViewKind.HISTORY, "history",
    "keeps every version of a versioned table as a row valid from one time to the next "
    "(FOR SYSTEM_TIME ALL)",
    lambda view: history_read(view.query) is not None, plan_history, HistoryPlan,
    ("versions_in", "touched_keys"),
    "every version event of the table in a history table, scanned for the keys a run touches",
)
PLAIN = Operation(
    ViewKind.PLAIN, "plain view",
    "any other query, computed as a whole on read (a projection or filter of one table "
    "follows its changes)",
    lambda view: True, None, None,
)
OPERATIONS = (
    TEMPORAL_JOIN, WINDOW_TOP_N, WINDOW_AGGREGATE, DEDUPLICATION, INTERVAL_JOIN, HISTORY, PLAIN
)
"""Every operation, in the order a view's query is recognized."""


def operation_of(view: ViewSpec, *, recorded: bool = True) -> Operation:
    """The operation that runs `view`: of the kind its entry records (unless not
    `recorded`), told from its query."""
    kind = view.view_kind if recorded else None
    candidates = [op for op in OPERATIONS if kind is None or op.kind is kind]
    if len(candidates) == 1:  # the kind recorded says it: no query to parse
        return candidates[0]
    return next((op for op in candidates if op.recognizes(view)), candidates[-1])


def operation_planned(plan: OperatorPlan) -> Operation:
    """The operation whose planner bound `plan` (each plan type is one operation's)."""
    return next(op for op in OPERATIONS if op.plan_type is type(plan))
