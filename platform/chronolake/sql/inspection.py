"""The statements that look at a catalog rather than change it: `SHOW TABLES`, `SHOW VIEWS`,
`DESCRIBE t`, `SHOW CREATE TABLE|VIEW t` and `EXPLAIN [CHANGELOG_MODE] <query>`, in Flink's
syntax. sqlglot keeps SHOW and EXPLAIN as commands; this module reads them. The catalog
answers them (`chronolake.catalog.inspection`).
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field
from sqlglot import exp

from chronolake.errors import DefinitionError
from chronolake.schema.dialect import canonical_sql, parse_expression
from chronolake.sql._names import relation_name
from chronolake.sql.existing import Kind, unknown_error, wrong_kind_error

EXPLAIN_DETAILS = ("CHANGELOG_MODE",)
"""The details of Flink's `EXPLAIN <detail>, ... <query>` chronolake shows."""
_FLINK_DETAILS = ("ESTIMATED_COST", "CHANGELOG_MODE", "JSON_EXECUTION_PLAN", "PLAN_ADVICE")


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True)


class ShowStatement(_Frozen):
    """`SHOW TABLES` (tables and views, as Flink lists both) or `SHOW VIEWS`."""

    what: Literal["tables", "views"]

    @property
    def written(self) -> str:
        return f"SHOW {self.what.upper()}"


class DescribeStatement(_Frozen):
    """`DESCRIBE name` / `DESC name`."""

    name: str

    @property
    def written(self) -> str:
        return f"DESCRIBE {self.name}"


class ShowCreateStatement(_Frozen):
    """`SHOW CREATE TABLE name` / `SHOW CREATE VIEW name`."""

    kind: Kind
    name: str

    @property
    def written(self) -> str:
        return f"SHOW CREATE {self.kind.upper()} {self.name}"


class ExplainStatement(_Frozen):
    """`EXPLAIN [CHANGELOG_MODE] <query>`."""

    query: str = Field(..., description="The query explained, canonical Flink SQL.")
    changelog_mode: bool = Field(False, description="Show each node's changelogMode.")

    @property
    def written(self) -> str:
        return f"EXPLAIN {'CHANGELOG_MODE ' if self.changelog_mode else ''}{self.query}"


InspectionStatement = ShowStatement | DescribeStatement | ShowCreateStatement | ExplainStatement


def inspection_statement(
    node: exp.Expr, known: dict[str, Kind]
) -> InspectionStatement | None:
    """The inspection statement `node` is (names checked against `known`, lower-case name to
    kind), or None when it is none."""
    if isinstance(node, exp.Describe):
        name = relation_name(node.this) if isinstance(node.this, exp.Table) else str(node.this)
        _check_name(name, None, known, "DESCRIBE")
        return DescribeStatement(name=name)
    if not isinstance(node, exp.Command):
        return None
    keyword, rest = node.name.upper(), node.text("expression").strip()
    if keyword == "SHOW":
        return _show(rest, known)
    if keyword == "EXPLAIN":
        return _explain(rest)
    return None


def _show(rest: str, known: dict[str, Kind]) -> InspectionStatement:
    words = rest.split()
    upper = [word.upper() for word in words]
    if upper in (["TABLES"], ["VIEWS"]):
        return ShowStatement(what="tables" if upper == ["TABLES"] else "views")
    if len(words) == 3 and upper[:2] in (["CREATE", "TABLE"], ["CREATE", "VIEW"]):
        kind: Kind = "table" if upper[1] == "TABLE" else "view"
        name = words[2].strip("`")
        _check_name(name, kind, known, f"SHOW CREATE {kind.upper()}")
        return ShowCreateStatement(kind=kind, name=name)
    msg = (
        f"SHOW {rest} is not supported; chronolake shows: SHOW TABLES, SHOW VIEWS, "
        "SHOW CREATE TABLE name, SHOW CREATE VIEW name (and DESCRIBE name)"
    )
    raise DefinitionError(msg)


_DETAILS = re.compile(r"^\s*((?:[A-Za-z_]+\s*,\s*)*[A-Za-z_]+)\s+(?=SELECT\b|WITH\b|\()",
                      re.IGNORECASE)


def _explain(rest: str) -> ExplainStatement:
    details: list[str] = []
    found = _DETAILS.match(rest)
    if found and found.group(1).upper() not in ("SELECT", "WITH"):
        details = [word.strip().upper() for word in found.group(1).split(",")]
        rest = rest[found.end():]
    refused = [detail for detail in details if detail not in EXPLAIN_DETAILS]
    if refused:
        flink = [detail for detail in refused if detail in _FLINK_DETAILS]
        what = "is" if len(refused) == 1 else "are"
        msg = (
            f"EXPLAIN {', '.join(refused)}: {', '.join(refused)} {what} not supported "
            f"{'by chronolake' if flink else '(not an EXPLAIN detail)'}; write EXPLAIN "
            f"[{' | '.join(EXPLAIN_DETAILS)}] <query>"
        )
        raise DefinitionError(msg)
    query = parse_expression(rest, what="EXPLAIN query")
    if not isinstance(query, exp.Query):
        msg = f"EXPLAIN {rest[:60]!r}: EXPLAIN takes a query (SELECT ...)"
        raise DefinitionError(msg)
    return ExplainStatement(query=canonical_sql(query), changelog_mode=bool(details))


def _check_name(name: str, kind: Kind | None, known: dict[str, Kind], statement: str) -> None:
    """Refuse a name nothing is registered under, or one of the other kind."""
    actual = known.get(name.lower())
    if actual is None:
        raise unknown_error(name, kind, known, statement=statement)
    if kind is not None and actual != kind:
        raise wrong_kind_error(name, actual, statement)
