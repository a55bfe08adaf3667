"""Flink SQL scripts: `CREATE TABLE` -> `TableSpec`, `CREATE VIEW` -> `ViewSpec`, queries.

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

from collections.abc import Mapping
from typing import TypeVar

from pydantic import BaseModel, ConfigDict, Field
from sqlglot import exp

from chronolake.dialect import canonical_sql, parse_flink
from chronolake.errors import DefinitionError
from chronolake.schema import TableSpec, ViewSpec
from chronolake.sql._tables import table_spec
from chronolake.sql._views import view_spec


class QueryStatement(BaseModel):
    """A statement of a script that is not DDL (SELECT, INSERT, ...), as canonical Flink SQL."""

    model_config = ConfigDict(frozen=True)

    sql: str = Field(..., description="The statement, canonical Flink SQL.")


Statement = TableSpec | ViewSpec | QueryStatement
SpecT = TypeVar("SpecT", TableSpec, ViewSpec)


def parse_statements(
    script: str, *, catalog: Mapping[str, TableSpec | ViewSpec] | None = None
) -> list[Statement]:
    """Parse a `;`-separated script into specs and queries, in script order.

    `catalog` holds the tables and views already known; a view may read those and
    the tables declared before it in the script. The whole script is checked
    before anything is returned, so one error means no statement is used.
    """
    known: dict[str, TableSpec | ViewSpec] = dict(catalog or {})
    statements: list[Statement] = []
    for node in parse_flink(script, what="SQL script"):
        statement = _statement(node, known)
        if not isinstance(statement, QueryStatement):
            known[statement.name] = statement
        statements.append(statement)
    return statements


def parse_table(ddl: str) -> TableSpec:
    """The spec of a single `CREATE TABLE` statement."""
    return _single(parse_statements(ddl), TableSpec, "CREATE TABLE")


def parse_view(ddl: str, *, catalog: Mapping[str, TableSpec | ViewSpec] | None = None) -> ViewSpec:
    """The spec of a single `CREATE VIEW name AS SELECT ...`, reading tables in `catalog`."""
    return _single(parse_statements(ddl, catalog=catalog), ViewSpec, "CREATE VIEW")


def _statement(node: exp.Expr, known: Mapping[str, TableSpec | ViewSpec]) -> Statement:
    if not isinstance(node, exp.Create):
        return QueryStatement(sql=canonical_sql(node))
    kind = str(node.args.get("kind") or "").upper()
    if kind == "TABLE":
        return table_spec(node)
    if kind == "VIEW":
        return view_spec(node, known)
    msg = f"CREATE {kind} is not supported; a script declares tables and views and runs queries"
    raise DefinitionError(msg)


def _single(
    statements: list[Statement], expected: type[SpecT], words: str
) -> SpecT:
    if len(statements) != 1 or not isinstance(statements[0], expected):
        found = ", ".join(type(s).__name__ for s in statements) or "nothing"
        msg = f"expected exactly one {words} statement, found {found}"
        raise DefinitionError(msg)
    return statements[0]
