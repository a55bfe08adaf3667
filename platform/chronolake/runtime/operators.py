"""Which operator runs a view: the one registered for the type of its bound plan
(`chronolake.sql.operations` registers the plan types; a test checks each has one here)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from chronolake.catalog import Catalog
from chronolake.runtime.dedup_operator import DeduplicateOperator
from chronolake.runtime.history_operator import HistoryOperator
from chronolake.runtime.interval_operator import IntervalJoinOperator
from chronolake.runtime.join_operator import TemporalJoinOperator
from chronolake.runtime.operator import Operator
from chronolake.runtime.window_operator import WindowAggregateOperator
from chronolake.schema import ViewSpec
from chronolake.sql.deduplication import DeduplicationPlan
from chronolake.sql.history import HistoryPlan
from chronolake.sql.interval import IntervalJoinPlan
from chronolake.sql.operations import OperatorPlan
from chronolake.sql.temporal import TemporalJoinPlan
from chronolake.sql.window import WindowPlan
from chronolake.sql.window_rank import WindowRankPlan

OPERATORS: Mapping[type[OperatorPlan], Callable[[Catalog, ViewSpec, Any], Operator]] = {
    TemporalJoinPlan: lambda catalog, view, plan: TemporalJoinOperator(
        catalog, plan, output_rowtime=view.rowtime),
    WindowRankPlan: lambda catalog, view, plan: WindowAggregateOperator(view, plan),
    WindowPlan: lambda catalog, view, plan: WindowAggregateOperator(view, plan),
    DeduplicationPlan: lambda catalog, view, plan: DeduplicateOperator(view, plan),
    IntervalJoinPlan: IntervalJoinOperator,
    HistoryPlan: lambda catalog, view, plan: HistoryOperator(view, plan),
}
"""The operator of each plan type, built from the catalog, the view and its plan."""


def operator_for(catalog: Catalog, view: ViewSpec, plan: OperatorPlan) -> Operator:
    """The operator that runs `view` incrementally by `plan` (`Catalog.operator_plan`)."""
    return OPERATORS[type(plan)](catalog, view, plan)
