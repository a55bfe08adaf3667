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
from chronolake.schema import TableSpec, ViewSpec
from chronolake.schema.spec import OPERATOR_KINDS
from chronolake.sql.operations import OperatorPlan, operation_of

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
    """The operator plan of `view`, bound against `inputs` (`Catalog.operator_inputs`) by
    its operation's planner."""
    planner = operation_of(view).planner
    if planner is None:
        raise _plain_error(view)
    return planner(view, inputs)


def refuse_plain(view: ViewSpec) -> None:
    """Refuse a view no operator runs: it has no plan to bind."""
    if operation_of(view).planner is None:
        raise _plain_error(view)


def _plain_error(view: ViewSpec) -> DefinitionError:
    return DefinitionError(
        f"view {view.name!r} has none of {OPERATOR_KINDS}: it is recomputed as a whole, "
        "not run incrementally; materialize it with chronolake.runtime.views.materialize_view"
    )
