"""Which operator runs a view: chosen from the shape of its query."""

from __future__ import annotations

from chronolake.catalog import Catalog
from chronolake.errors import DefinitionError
from chronolake.runtime.join_operator import TemporalJoinOperator
from chronolake.runtime.operator import Operator
from chronolake.schema import ViewSpec
from chronolake.sql.query import temporal_joins


def operator_for(catalog: Catalog, view: ViewSpec) -> Operator:
    """The operator of an incrementally materialized view."""
    if temporal_joins(view.query):
        return TemporalJoinOperator(catalog, view)
    raise DefinitionError(
        f"view {view.name!r} has no temporal join: it is recomputed as a whole, not run "
        "incrementally; materialize it with chronolake.runtime.views.materialize_view"
    )
