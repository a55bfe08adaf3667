"""Flink SQL on sqlglot: DDL into specs, queries into Spark SQL and temporal joins."""

from chronolake.schema.join_kind import JoinKind
from chronolake.sql.ddl import (
    DropStatement,
    QueryStatement,
    Statement,
    parse_statements,
    parse_table,
    parse_view,
)
from chronolake.sql.query import (
    TemporalJoinRef,
    referenced_tables,
    temporal_joins,
    to_spark,
)

__all__ = [
    "DropStatement",
    "JoinKind",
    "QueryStatement",
    "Statement",
    "TemporalJoinRef",
    "parse_statements",
    "parse_table",
    "parse_view",
    "referenced_tables",
    "temporal_joins",
    "to_spark",
]
