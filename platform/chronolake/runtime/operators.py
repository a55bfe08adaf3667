"""Which operator runs a view: chosen from the shape of its query."""

from __future__ import annotations

from chronolake.catalog import Catalog
from chronolake.errors import DefinitionError
from chronolake.runtime.dedup_operator import DeduplicateOperator
from chronolake.runtime.interval_operator import IntervalJoinOperator
from chronolake.runtime.join_operator import TemporalJoinOperator
from chronolake.runtime.operator import Operator
from chronolake.runtime.window_operator import WindowAggregateOperator
from chronolake.schema import ViewKind, ViewSpec
from chronolake.sql.view_kinds import view_kind


def operator_for(catalog: Catalog, view: ViewSpec) -> Operator:
    """The operator of an incrementally materialized view."""
    kind = view_kind(view)
    if kind is ViewKind.TEMPORAL_JOIN:
        return TemporalJoinOperator(catalog, view)
    if kind is ViewKind.WINDOW_AGGREGATE:
        return WindowAggregateOperator(catalog, view)
    if kind is ViewKind.DEDUPLICATION:
        return DeduplicateOperator(catalog, view)
    if kind is ViewKind.INTERVAL_JOIN:
        return IntervalJoinOperator(catalog, view)
    raise DefinitionError(
        f"view {view.name!r} has no temporal join, window aggregate, deduplication or interval "
        "join: it is recomputed as a whole, not run incrementally; materialize it with "
        "chronolake.runtime.views.materialize_view"
    )
