"""The Flink DDL of a registered table or view, as `SHOW CREATE TABLE|VIEW` prints it: what
`parse_statements` reads back into an equal spec, in the canonical form the spec keeps (so
a table declared in Python prints as well as one declared in SQL)."""

from __future__ import annotations

from sqlglot import exp

from chronolake.schema import (
    ComputedColumn,
    MetadataColumn,
    PhysicalColumn,
    TableSpec,
    ViewSpec,
)
from chronolake.schema.dialect import canonical_sql


def create_statement(spec: TableSpec | ViewSpec) -> str:
    """`CREATE TABLE ... WITH (...)` or `CREATE VIEW ... AS ...` declaring `spec`."""
    if isinstance(spec, ViewSpec):
        return f"CREATE VIEW {_name(spec.name)} AS\n{spec.query}"
    lines = [_column(column) for column in spec.columns]
    if spec.watermark is not None:
        lines.append(f"WATERMARK FOR {spec.watermark.rowtime} AS {spec.watermark.expression}")
    if spec.primary_key:
        lines.append(f"PRIMARY KEY ({', '.join(map(_name, spec.primary_key))}) NOT ENFORCED")
    options = ",\n".join(f"  {_string(key)} = {_string(value)}"
                         for key, value in spec.options.to_map().items())
    body = ",\n".join(f"  {line}" for line in lines)
    return f"CREATE TABLE {_name(spec.name)} (\n{body}\n) WITH (\n{options}\n)"


def _column(column: PhysicalColumn | ComputedColumn | MetadataColumn) -> str:
    if isinstance(column, ComputedColumn):
        return f"{_name(column.name)} AS {column.expression}"
    if isinstance(column, MetadataColumn):
        virtual = " VIRTUAL" if column.virtual else ""
        return f"{_name(column.name)} {column.type} METADATA FROM {_string(column.key)}{virtual}"
    return f"{_name(column.name)} {column.type}"


def _name(name: str) -> str:
    """An identifier, back-quoted where Flink needs it."""
    return canonical_sql(exp.to_identifier(name))


def _string(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"
