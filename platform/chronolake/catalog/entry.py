"""What the catalog stores per name (`CatalogEntry`), and what a drop removed (`Dropped`)."""

from __future__ import annotations

from typing import Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidatorFunctionWrapHandler,
    field_validator,
)

from chronolake.catalog.removal import RemovedData
from chronolake.errors import ChronolakeError
from chronolake.schema import TableSpec, ViewSpec
from chronolake.schema.persisted import Persisted
from chronolake.sql.existing import Kind
from chronolake.sql.operator_plan import StoredPlan

Spec = TableSpec | ViewSpec


class CatalogEntry(Persisted):
    """What the catalog stores per name: the spec and the statement that declared it."""

    model_config = ConfigDict(frozen=True)

    kind: Literal["table", "view"]
    table: TableSpec | None = Field(None, description="Set for tables.")
    view: ViewSpec | None = Field(None, description="Set for views.")
    statement: str | None = Field(None, description="The DDL text, when declared in SQL.")
    plan: StoredPlan | None = Field(
        None, description="A derived table's operator plan, kept by a run (`operator_plan`)."
    )

    @field_validator("plan", mode="wrap")
    @classmethod
    def _plan_or_none(cls, value: object, handler: ValidatorFunctionWrapHandler) -> object:
        """A plan stored by another chronolake version that no longer loads is bound anew: it
        never keeps the view's registration from loading."""
        try:
            return handler(value)
        except (ValidationError, ChronolakeError):  # a spec's own validators raise the latter
            return None

    @classmethod
    def of(cls, spec: Spec) -> CatalogEntry:
        """The entry of `spec`, as a script declaring it would be stored (no statement)."""
        if isinstance(spec, TableSpec):
            return cls(kind="table", table=spec)
        return cls(kind="view", view=spec)

    @property
    def spec(self) -> Spec:
        spec = self.table if self.kind == "table" else self.view
        assert spec is not None
        return spec


class Dropped(BaseModel):
    """What `Catalog.drop` removed: a registration, and for a view chronolake's data of it."""

    model_config = ConfigDict(frozen=True)

    name: str
    kind: Kind | None = Field(None, description="None for a registration that no longer loads.")
    existed: bool = Field(True, description="False: IF EXISTS found nothing to drop.")
    removed: RemovedData = Field(default_factory=RemovedData)
    replaced_by: Spec | None = Field(
        None, description="What CREATE OR REPLACE registered in its place."
    )

    def describe(self) -> str:
        """One line for a person: what went, and what stayed."""
        what = self.kind or ("registration" if self.existed else "table or view")
        verb = "replaced" if self.replaced_by else "dropped"
        if not self.existed:
            return (f"registered {what} {self.name}" if self.replaced_by else
                    f"{what} {self.name} does not exist: nothing dropped")
        if self.kind == "table":
            return f"{verb} table {self.name} (its Delta table is untouched)"
        data = self.removed.describe()
        if not data:
            return f"{verb} {what} {self.name} (it had never run: no data to remove)"
        after = "; its next run starts from scratch" if self.replaced_by else ""
        return f"{verb} {what} {self.name}: {data} removed{after}"
