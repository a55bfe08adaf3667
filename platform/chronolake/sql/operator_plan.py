"""A derived table's operator plan: its query bound to the specs of what it reads, once.

Binding a view's query parses it, checks it against its inputs with Flink's rules, and
for a plain view it reads through (`Catalog.operator_inputs`) asks Spark for that view's
schema. The result does not change while the registrations it was bound against stay
the same, so the catalog keeps it in the view's entry (`StoredPlan`), with a digest of
each registration it read, and a run binds anew only when one of them changed. Flink
keeps the catalog objects a compiled plan was compiled against in the plan the same way
(`table.plan.compile.catalog-objects`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from functools import cache
from importlib.metadata import PackageNotFoundError, version

import pyspark
from pydantic import BaseModel, ConfigDict, Field

from chronolake.errors import DefinitionError
from chronolake.schema import TableSpec, ViewKind, ViewSpec
from chronolake.schema.spec import OPERATOR_KINDS
from chronolake.sql.interval import IntervalJoinPlan, plan_interval_join
from chronolake.sql.temporal import TemporalJoinPlan, plan_temporal_join
from chronolake.sql.view_kinds import view_kind
from chronolake.sql.views import kept_row_selects
from chronolake.sql.window import WindowPlan, plan_window_aggregate
from chronolake.sql.window_rank import WindowRankPlan, is_window_rank, plan_window_rank

Spec = TableSpec | ViewSpec

PLAN_FORMAT = 1
"""Bumped when a plan's fields change meaning, so that a plan stored before is bound anew."""


@cache
def _binder() -> str:
    """The code a plan is bound by: its SQL and types come from chronolake's planners and
    Spark's analysis, so a plan kept by other versions of either is bound anew."""
    try:
        chronolake = version("chronolake")
    except PackageNotFoundError:  # run from a source tree on PYTHONPATH
        chronolake = "from source"
    return f"chronolake {chronolake}, pyspark {pyspark.__version__}"


class DeduplicationPlan(BaseModel):
    """A deduplication view bound: the table whose changes it ranks, and what it keeps."""

    model_config = ConfigDict(frozen=True)

    source: TableSpec = Field(..., description="The table, derived table or plain view of one.")
    selects: tuple[str, str] = Field(
        ..., description="The inner and outer SELECT applied to each kept row (`kept_row_selects`)."
    )


OperatorPlan = TemporalJoinPlan | WindowRankPlan | WindowPlan | IntervalJoinPlan | DeduplicationPlan


class StoredPlan(BaseModel):
    """An operator plan with the registrations it was bound against."""

    model_config = ConfigDict(frozen=True)

    format: int = Field(PLAN_FORMAT, description="`PLAN_FORMAT` when it was bound.")
    bound_by: str = Field(default_factory=_binder, description="The code that bound it.")
    bound_against: dict[str, str] = Field(
        ..., description="Each table and view the query reads, directly or through views, "
        "with the digest of its registration then (`registration_digest`)."
    )
    plan: OperatorPlan

    def holds_for(self, specs: Mapping[str, Spec]) -> bool:
        """Whether the plan still holds: same format and code, every registration it read
        unchanged."""
        return self.format == PLAN_FORMAT and self.bound_by == _binder() and all(
            name in specs and registration_digest(specs[name]) == digest
            for name, digest in self.bound_against.items()
        )


def registration_digest(spec: Spec) -> str:
    """A digest of what a table or view was registered as."""
    return hashlib.sha256(spec.model_dump_json().encode()).hexdigest()[:16]


def bind_plan(view: ViewSpec, inputs: Mapping[str, Spec]) -> OperatorPlan:
    """The operator plan of `view`, bound against `inputs` (`Catalog.operator_inputs`)."""
    kind = view_kind(view)
    if kind is ViewKind.TEMPORAL_JOIN:
        return plan_temporal_join(view.query, inputs)
    if kind is ViewKind.WINDOW_AGGREGATE:
        # A window Top-N / deduplication ranks the window stage's rows (`windows.rank`).
        if is_window_rank(view.query):
            return plan_window_rank(view.query, inputs)
        return plan_window_aggregate(view.query, inputs)
    if kind is ViewKind.INTERVAL_JOIN:
        return plan_interval_join(view.query, inputs, view=view.name)
    refuse_plain(view)
    return _deduplication_plan(view, inputs)


def refuse_plain(view: ViewSpec) -> None:
    """Refuse a view no operator runs: it has no plan to bind."""
    if view_kind(view) is ViewKind.PLAIN:
        raise DefinitionError(
            f"view {view.name!r} has none of {OPERATOR_KINDS}: it is recomputed as a whole, "
            "not run incrementally; materialize it with chronolake.runtime.views.materialize_view"
        )


def _deduplication_plan(view: ViewSpec, inputs: Mapping[str, Spec]) -> DeduplicationPlan:
    assert view.deduplication is not None, "a deduplication view has its deduplication"
    source = inputs[view.deduplication.source.lower()]
    if not isinstance(source, TableSpec):
        msg = (
            f"deduplication view {view.name!r} reads {source.name!r}, a view computed as a "
            "whole on read, whose changes no operator can follow; deduplicate a table, a "
            "derived table, or a projection or filter of one"
        )
        raise DefinitionError(msg)
    return DeduplicationPlan(source=source, selects=kept_row_selects(view.query))
