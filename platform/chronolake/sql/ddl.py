"""Flink SQL scripts: `CREATE TABLE` -> `TableSpec`, `CREATE VIEW` -> `ViewSpec`, `DROP`, queries.

Example:
    >>> [rates] = parse_statements('''
    ...     CREATE TABLE rates (
    ...       currency STRING,
    ...       rate DECIMAL(38, 10),
    ...       currency_time TIMESTAMP(3),
    ...       WATERMARK FOR currency_time AS currency_time - INTERVAL '5' SECOND,
    ...       PRIMARY KEY (currency) NOT ENFORCED
    ...     ) WITH ('connector' = 'delta', 'path' = 'rates', 'changelog' = 'cdf')''')
    >>> rates.kind
    <TableKind.VERSIONED: 'versioned'>
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field
from sqlglot import exp

from chronolake.errors import DefinitionError
from chronolake.schema import TableSpec, ViewSpec
from chronolake.schema.dialect import canonical_sql, parse_flink
from chronolake.sql._names import relation_name
from chronolake.sql._tables import table_spec
from chronolake.sql.existing import (
    readers_error,
    readers_of,
    same_definition,
    taken_error,
    unknown_error,
    wrong_kind_error,
)
from chronolake.sql.inspection import InspectionStatement, inspection_statement
from chronolake.sql.views import view_spec


class QueryStatement(BaseModel):
    """A statement of a script that is not DDL (SELECT, INSERT, ...), as canonical Flink SQL."""

    model_config = ConfigDict(frozen=True)

    sql: str = Field(..., description="The statement, canonical Flink SQL.")


Spec = TableSpec | ViewSpec


class DropStatement(BaseModel):
    """`DROP TABLE|VIEW [IF EXISTS] name`: forget a table, or a view and all its data; or a
    `CREATE OR REPLACE` of a name registered with another definition: the same drop, then
    `replaced_by` registered."""

    model_config = ConfigDict(frozen=True)

    kind: Literal["table", "view"]
    name: str
    if_exists: bool = Field(False, description="An absent name is nothing to do, not an error.")
    replaced_by: Spec | None = Field(None, description="The new definition of a replacement.")


Statement = TableSpec | ViewSpec | QueryStatement | DropStatement | InspectionStatement
SpecT = TypeVar("SpecT", TableSpec, ViewSpec)


def parse_statements(
    script: str,
    *,
    catalog: Mapping[str, Spec] | None = None,
    droppable: Collection[str] = (),
) -> list[Statement]:
    """Parse a `;`-separated script into specs, drops, queries and the statements that inspect
    the catalog (`chronolake.sql.inspection`), one per statement, in order.

    `catalog` holds the tables and views already known; a view may read those and
    the tables declared before it in the script. `droppable` names registrations
    without a spec in `catalog` that may still be dropped (one that no longer loads, or
    a drop a crash interrupted). The whole script is checked before anything is
    returned, so one error means no statement is used.

    A name taken already (see `chronolake.sql.existing`): `CREATE` with the same
    definition is kept (running a script again changes nothing); `IF NOT EXISTS` keeps
    what is there; `OR REPLACE` with a different definition becomes a `DropStatement`
    with `replaced_by`; any other `CREATE` is refused. `DROP` of a name other views read
    is refused, naming them.
    """
    known = {name.lower(): spec for name, spec in (catalog or {}).items()}
    unloaded = {name.lower() for name in droppable}
    statements: list[Statement] = []
    for node in parse_flink(script, what="SQL script"):
        if isinstance(node, exp.Drop):
            drop = _drop(node)
            _check_drop(drop, known, unloaded)
            statements.append(drop)
        elif isinstance(node, exp.Create):
            statements.append(_create(node, known))
        elif inspection := inspection_statement(
            node, {name: _kind(spec) for name, spec in known.items()}
        ):
            statements.append(inspection)
        else:
            statements.append(QueryStatement(sql=canonical_sql(node)))
    return statements


def parse_table(ddl: str) -> TableSpec:
    """The spec of a single `CREATE TABLE` statement."""
    return _single(parse_statements(ddl), TableSpec, "CREATE TABLE")


def parse_view(ddl: str, *, catalog: Mapping[str, TableSpec | ViewSpec] | None = None) -> ViewSpec:
    """The spec of a single `CREATE VIEW name AS SELECT ...`, reading tables in `catalog`."""
    return _single(parse_statements(ddl, catalog=catalog), ViewSpec, "CREATE VIEW")


def _create(node: exp.Create, known: dict[str, Spec]) -> Statement:
    """What one CREATE does, given what is known under its name."""
    replace, if_not_exists = bool(node.args.get("replace")), bool(node.args.get("exists"))
    node.set("replace", False)  # the modifiers are this module's: the spec builders see none
    node.set("exists", False)
    spec = _spec(node, known)
    current = known.get(spec.name.lower())
    if current is None or same_definition(current, spec):
        known[spec.name.lower()] = spec
        return spec
    if if_not_exists:
        return current
    kind, actual = _kind(spec), _kind(current)
    if not replace:
        raise taken_error(spec.name, actual, kind)
    if actual != kind:
        raise wrong_kind_error(current.name, actual, f"CREATE OR REPLACE {kind.upper()}")
    readers = readers_of(spec.name, _queries(known))
    if readers:
        raise readers_error(current.name, kind, readers, replacing=True)
    known[spec.name.lower()] = spec
    return DropStatement(kind=kind, name=current.name, if_exists=True, replaced_by=spec)


def _spec(node: exp.Create, known: Mapping[str, Spec]) -> Spec:
    kind = str(node.args.get("kind") or "").upper()
    if kind == "TABLE":
        return table_spec(node)
    if kind == "VIEW":
        return view_spec(node, known)
    msg = f"CREATE {kind} is not supported; a script declares tables and views and runs queries"
    raise DefinitionError(msg)


def _drop(node: exp.Drop) -> DropStatement:
    kind = str(node.args.get("kind") or "").upper()
    names = [relation_name(table) for table in node.args.get("tables") or []]
    if kind not in ("TABLE", "VIEW"):
        msg = (
            f"DROP {kind} is not supported; a script drops tables and views: "
            "DROP TABLE|VIEW [IF EXISTS] name"
        )
        raise DefinitionError(msg)
    if len(names) != 1:
        msg = f"DROP {kind} {', '.join(names)}: drop one {kind.lower()} per statement"
        raise DefinitionError(msg)
    for flag in ("temporary", "materialized", "cascade", "purge"):
        if node.args.get(flag):
            msg = (
                f"{flag.upper()} in DROP {kind} is not supported; write DROP {kind} "
                f"[IF EXISTS] {names[0]}"
                + (" after dropping the views that read it" if flag == "cascade" else "")
            )
            raise DefinitionError(msg)
    which: Literal["table", "view"] = "table" if kind == "TABLE" else "view"
    return DropStatement(kind=which, name=names[0], if_exists=bool(node.args.get("exists")))


def _check_drop(drop: DropStatement, known: dict[str, Spec], unloaded: set[str]) -> None:
    """Refuse a DROP the catalog would refuse, before any statement runs (`known` by
    lower-case name, as the catalog stores names)."""
    current = known.get(drop.name.lower())
    if current is None:
        if drop.name.lower() in unloaded:
            unloaded.discard(drop.name.lower())  # no spec to check: dropped as it is
        elif not drop.if_exists:
            raise unknown_error(drop.name, drop.kind, [*known, *unloaded])
        return
    actual = _kind(current)
    if actual != drop.kind:
        raise wrong_kind_error(current.name, actual, f"DROP {drop.kind.upper()}")
    readers = readers_of(current.name, _queries(known))
    if readers:
        raise readers_error(current.name, actual, readers)
    del known[drop.name.lower()]


def _kind(spec: Spec) -> Literal["table", "view"]:
    return "table" if isinstance(spec, TableSpec) else "view"


def _queries(known: Mapping[str, Spec]) -> dict[str, str]:
    return {spec.name: spec.query for spec in known.values() if isinstance(spec, ViewSpec)}


def _single(
    statements: list[Statement], expected: type[SpecT], words: str
) -> SpecT:
    if len(statements) != 1 or not isinstance(statements[0], expected):
        found = ", ".join(type(s).__name__ for s in statements) or "nothing"
        msg = f"expected exactly one {words} statement, found {found}"
        raise DefinitionError(msg)
    return statements[0]
