"""A deduplication view bound for its operator: the table whose changes it ranks, and the
SELECTs that turn the row each key keeps into the view's row."""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field
from sqlglot import exp

from chronolake.errors import DefinitionError
from chronolake.schema import TableSpec, ViewSpec
from chronolake.schema.dialect import canonical_sql
from chronolake.sql.query import parse_query


class DeduplicationPlan(BaseModel):
    """A deduplication view bound: the table whose changes it ranks, and what it keeps."""

    model_config = ConfigDict(frozen=True)

    source: TableSpec = Field(..., description="The table, derived table or plain view of one.")
    selects: tuple[str, str] = Field(
        ..., description="The inner and outer SELECT applied to each kept row (`kept_row_selects`)."
    )


def plan_deduplication(view: ViewSpec, inputs: Mapping[str, TableSpec | ViewSpec]
                       ) -> DeduplicationPlan:
    """The plan of deduplication view `view`, bound against `inputs`."""
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


def kept_row_selects(query: str) -> tuple[str, str]:
    """A deduplication view's two SELECTs without the ranking, each over one relation: the
    inner one over the source, the outer one over the inner's rows. Applied to the row each
    key keeps, they give the view's row (`chronolake.catalog.relations.through_view_rows`)."""
    outer = parse_query(query)
    assert isinstance(outer, exp.Select)
    source = outer.args["from_"].this
    assert isinstance(source, exp.Subquery) and isinstance(source.this, exp.Select)
    inner = source.this.copy()
    inner.set("expressions", [
        item for item in inner.expressions if not any(item.find_all(exp.Window))
    ])
    alias = source.alias_or_name or "kept"
    outer = outer.copy()
    outer.set("where", None)
    outer.set("from_", exp.From(this=exp.to_table("kept").as_(alias)))
    return canonical_sql(inner), canonical_sql(outer)
