"""Which operator runs a view: the one its bound plan (`sql.operator_plan`) is for."""

from __future__ import annotations

from chronolake.catalog import Catalog
from chronolake.runtime.dedup_operator import DeduplicateOperator
from chronolake.runtime.interval_operator import IntervalJoinOperator
from chronolake.runtime.join_operator import TemporalJoinOperator
from chronolake.runtime.operator import Operator
from chronolake.runtime.window_operator import WindowAggregateOperator
from chronolake.schema import ViewSpec
from chronolake.sql.interval import IntervalJoinPlan
from chronolake.sql.operator_plan import DeduplicationPlan, OperatorPlan
from chronolake.sql.temporal import TemporalJoinPlan


def operator_for(catalog: Catalog, view: ViewSpec, plan: OperatorPlan) -> Operator:
    """The operator that runs `view` incrementally by `plan` (`Catalog.operator_plan`)."""
    if isinstance(plan, TemporalJoinPlan):
        return TemporalJoinOperator(catalog, plan)
    if isinstance(plan, IntervalJoinPlan):
        return IntervalJoinOperator(catalog, view, plan)
    if isinstance(plan, DeduplicationPlan):
        return DeduplicateOperator(view, plan)
    return WindowAggregateOperator(view, plan)
