"""Flink SELECT queries: the tables they read, their temporal joins, their Spark SQL form.

Example:
    >>> sql = '''SELECT o.id, r.rate FROM orders AS o
    ...          JOIN rates FOR SYSTEM_TIME AS OF o.order_time AS r ON o.currency = r.currency'''
    >>> referenced_tables(sql)
    ['orders', 'rates']
    >>> temporal_joins(sql)[0].time_attribute
    'o.order_time'
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field
from sqlglot import exp

from chronolake.errors import DefinitionError
from chronolake.schema.dialect import canonical_sql, parse_expression, spark_sql
from chronolake.schema.join_kind import JoinKind
from chronolake.sql._names import relation_name


class TemporalJoinRef(BaseModel):
    """One `[LEFT] JOIN build FOR SYSTEM_TIME AS OF probe.time AS alias ON ...` of a query."""

    model_config = ConfigDict(frozen=True)

    build_table: str = Field(..., description="The versioned (or regular) table joined.")
    build_alias: str = Field(..., description="Its alias in the query (its name if none).")
    time_attribute: str = Field(..., description="The AS OF expression, e.g. 'o.order_time'.")
    probe_alias: str = Field(..., description="Alias of the probe side the time belongs to.")
    probe_table: str | None = Field(None, description="The probe side's table, if it is one.")
    kind: JoinKind = Field(..., description="inner or left (temporal joins are no other kind).")
    condition: str = Field(..., description="The ON condition, canonical Flink SQL.")


def parse_query(sql: str) -> exp.Query:
    """The AST of one Flink query (SELECT, UNION, WITH ...); anything else is an error."""
    node = parse_expression(sql, what="query")
    if not isinstance(node, exp.Query):
        msg = f"expected a query (SELECT ...), got {canonical_sql(node)[:60]!r}"
        raise DefinitionError(msg)
    return node


def referenced_tables(sql: str) -> list[str]:
    """The tables and views a query reads, in order of first appearance (CTE names excluded)."""
    return tables_of(parse_query(sql))


def tables_of(query: exp.Expr) -> list[str]:
    """`referenced_tables` for an already parsed query."""
    ctes = {cte.alias_or_name.lower() for cte in query.find_all(exp.CTE)}
    tables = [
        table for table in query.find_all(exp.Table)
        if isinstance(table.this, exp.Identifier) and table.name.lower() not in ctes
    ]
    tables.sort(key=lambda table: table.this.meta.get("start", 0))  # as written in the text
    return list(dict.fromkeys(relation_name(table) for table in tables))


def to_spark(sql: str) -> str:
    """Spark SQL text of a Flink query (types, `PROCTIME()`, `TO_TIMESTAMP`, see `to_spark_sql`).

    Temporal joins and window table functions have no Spark form and raise
    `DefinitionError`; they are planned by chronolake's operators.
    """
    return spark_sql(parse_query(sql))


def temporal_joins(sql: str) -> list[TemporalJoinRef]:
    """Every `FOR SYSTEM_TIME AS OF` join of a query, in query order.

    Only `[INNER] JOIN` and `LEFT [OUTER] JOIN` with an ON condition are temporal
    joins in Flink; other uses of `FOR SYSTEM_TIME AS OF` raise `DefinitionError`.
    """
    query = parse_query(sql)
    aliases = {
        table.alias_or_name: relation_name(table)
        for table in query.find_all(exp.Table)
        if isinstance(table.this, exp.Identifier)
    }
    joins: list[TemporalJoinRef] = []
    for table in query.find_all(exp.Table, bfs=False):
        version = table.args.get("version")
        if version is None or not is_temporal_join_read(version):
            continue
        join = table.parent
        as_of = canonical_sql(version.expression)
        written = f"{relation_name(table)} FOR SYSTEM_TIME AS OF {as_of}"
        if not isinstance(join, exp.Join) or not join.args.get("on"):
            msg = (
                f"{written}: a temporal table is only read in a join; write "
                f"`FROM probe AS p [LEFT] JOIN {written} AS x ON p.key = x.key`"
            )
            raise DefinitionError(msg)
        joins.append(_temporal_join(table, join, version, written, aliases))
    return joins


def is_temporal_join_read(version: exp.Version | None) -> bool:
    """Whether a table's `FOR SYSTEM_TIME` clause is a temporal join's: `AS OF` a column of
    the probe side. `AS OF` a constant travels in time and `ALL`, `FROM`, `BETWEEN` and
    `CONTAINED IN` read the history (`chronolake.sql.history`)."""
    return (
        version is not None and version.text("kind").upper() == "AS OF"
        and version.expression is not None and version.expression.find(exp.Column) is not None
    )


def single_relation(query: str) -> exp.Table | None:
    """The one table a query projects and filters, row by row (Flink's Calc: its changes keep
    their kinds); None for a query that joins, groups, orders, ranks or nests queries."""
    select = parse_query(query)
    if not isinstance(select, exp.Select):
        return None
    source = select.args.get("from_")
    table = source.this if source is not None else None
    if not isinstance(table, exp.Table):
        return None
    clauses = ("joins", "group", "having", "distinct", "order", "limit", "offset", "qualify",
               "with_")
    if any(select.args.get(clause) for clause in clauses):
        return None
    nested = (exp.Window, exp.AggFunc, exp.Subquery, exp.Select)  # ranks, aggregates, queries
    if any(node is not select for node in select.find_all(*nested)):
        return None
    return table


def _temporal_join(
    table: exp.Table, join: exp.Join, version: exp.Version, written: str,
    aliases: dict[str, str],
) -> TemporalJoinRef:
    side, kind = (join.side or "").upper(), (join.kind or "").upper()
    if side not in ("", "LEFT") or kind not in ("", "INNER", "OUTER"):
        msg = (
            f"{' '.join(filter(None, (side, kind)))} JOIN {written}: temporal joins are INNER "
            "or LEFT; write JOIN or LEFT JOIN"
        )
        raise DefinitionError(msg)
    time = version.expression
    if not isinstance(time, exp.Column):
        msg = (
            f"{written}: AS OF must name the probe side's time attribute, e.g. "
            "FOR SYSTEM_TIME AS OF o.order_time"
        )
        raise DefinitionError(msg)
    probe_alias = time.table or _first_relation(join)
    return TemporalJoinRef(
        build_table=relation_name(table),
        build_alias=table.alias_or_name,
        time_attribute=canonical_sql(time),
        probe_alias=probe_alias,
        probe_table=aliases.get(probe_alias),
        kind=JoinKind.LEFT if side == "LEFT" else JoinKind.INNER,
        condition=canonical_sql(join.args["on"]),
    )


def _first_relation(join: exp.Join) -> str:
    """Alias of the FROM relation of the SELECT holding `join` (an unqualified AS OF column)."""
    select = join.parent
    source = select.args.get("from_") if isinstance(select, exp.Select) else None
    return source.this.alias_or_name if source else ""
