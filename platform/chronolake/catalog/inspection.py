"""The catalog's answers to the statements that look at it (`chronolake.sql.inspection`):
`SHOW TABLES` / `SHOW VIEWS` and `DESCRIBE` as small DataFrames, `SHOW CREATE` and `EXPLAIN`
as text (`Shown`).

The DataFrames are built from catalog metadata, a row per table or per column: a handful of
rows, made on the driver so that they print and pipe like any query's.
"""

from __future__ import annotations

import io
from contextlib import redirect_stdout
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict
from pyspark.sql import DataFrame
from pyspark.sql.types import BooleanType, StringType, StructField, StructType, TimestampType

from chronolake.catalog.watermarks import CurrentWatermark, current_watermarks
from chronolake.schema import ComputedColumn, MetadataColumn, TableSpec, ViewSpec
from chronolake.schema.dialect import expression_type
from chronolake.spark.types import flink_type
from chronolake.sql.create_statement import create_statement
from chronolake.sql.ddl import parse_view
from chronolake.sql.inspection import (
    DescribeStatement,
    ExplainStatement,
    InspectionStatement,
    ShowCreateStatement,
    ShowStatement,
)
from chronolake.sql.operations import operation_of
from chronolake.sql.query import referenced_tables
from chronolake.sql.view_kinds import is_updating

if TYPE_CHECKING:
    from chronolake.catalog.catalog import Catalog

Spec = TableSpec | ViewSpec
EXPLAINED = "(query)"
"""The name an explained query goes by while it is read as a view."""


class Shown(BaseModel):
    """A statement's answer as text (`SHOW CREATE`, `EXPLAIN`)."""

    model_config = ConfigDict(frozen=True)

    text: str


def answer(catalog: Catalog, statement: InspectionStatement) -> DataFrame | Shown:
    """What `statement` shows of `catalog`."""
    if isinstance(statement, ShowStatement):
        return _show(catalog, views_only=statement.what == "views")
    if isinstance(statement, DescribeStatement):
        return _describe(catalog, catalog.spec(statement.name))
    if isinstance(statement, ShowCreateStatement):
        return Shown(text=create_statement(catalog.spec(statement.name)) + ";")
    return Shown(text=_explain(catalog, statement))


def changelog_kind(spec: Spec) -> str:
    """What the changes of `spec` are: `append` (inserts only), `upsert (key)` (updates and
    deletes of a unique key) or `retract` (updates and deletes, no key)."""
    if not is_updating(spec):
        return "append"
    return f"upsert ({', '.join(spec.primary_key)})" if spec.primary_key else "retract"


def flink_changelog_mode(spec: Spec) -> str:
    """The row kinds its changes hold, as Flink's EXPLAIN CHANGELOG_MODE writes them."""
    return "changelogMode=[I,UB,UA,D]" if is_updating(spec) else "changelogMode=[I]"


_SHOW_SCHEMA = StructType([
    StructField("name", StringType(), False),
    StructField("what", StringType(), False),
    StructField("kind", StringType(), False),
    StructField("rowtime", StringType(), True),
    StructField("watermark", TimestampType(), True),
    StructField("watermark_from", StringType(), True),
])


def _show(catalog: Catalog, *, views_only: bool) -> DataFrame:
    entries = catalog.registry.entries()
    watermarks = current_watermarks(catalog.root, entries)
    rows = [
        (entry.spec.name, entry.kind, entry.spec.kind.value, entry.spec.rowtime,
         _instant(watermarks[name]), watermarks[name].watermark_from)
        for name, entry in sorted(entries.items())
        if entry.kind == "view" or not views_only
    ]
    return catalog.spark.createDataFrame(rows, _SHOW_SCHEMA)  # metadata: a row per name


_DESCRIBE_SCHEMA = StructType([
    StructField("name", StringType(), False),
    StructField("type", StringType(), False),
    StructField("null", BooleanType(), False),
    StructField("key", StringType(), True),
    StructField("extras", StringType(), True),
    StructField("watermark", StringType(), True),
    StructField("changelog", StringType(), True),
])


def _describe(catalog: Catalog, spec: Spec) -> DataFrame:
    """Flink's DESCRIBE columns (the rowtime's type marked `*ROWTIME*`, the key as
    `PRI(...)`, the watermark on its rowtime), and the changes' kind on the first row."""
    key = f"PRI({', '.join(spec.primary_key)})" if spec.primary_key else None
    keyed = {name.lower() for name in spec.primary_key}
    rows: list[tuple[str, str, bool, str | None, str | None, str | None, str | None]] = []
    for name, type_text, nullable, extras in _columns(catalog, spec):
        rowtime = spec.rowtime is not None and spec.rowtime.split(".")[0].lower() == name.lower()
        watermark = (spec.watermark.expression
                     if rowtime and isinstance(spec, TableSpec) and spec.watermark else None)
        rows.append((
            name, type_text + (" *ROWTIME*" if rowtime else ""),
            nullable and name.lower() not in keyed, key if name.lower() in keyed else None,
            extras, watermark, None,
        ))
    if rows:
        rows[0] = (*rows[0][:-1], changelog_kind(spec))
    return catalog.spark.createDataFrame(rows, _DESCRIBE_SCHEMA)  # metadata: a row per column


def _columns(catalog: Catalog, spec: Spec) -> list[tuple[str, str, bool, str | None]]:
    """(name, Flink type, nullable, extras) of each column: a table's as declared, a view's
    from the schema of its query over its inputs (planned by Spark, not run; so a derived view
    that has not run yet is described too)."""
    if isinstance(spec, ViewSpec):
        return [(field.name, flink_type(field.dataType), field.nullable, None)
                for field in catalog.sql(spec.query).schema.fields]
    columns: list[tuple[str, str, bool, str | None]] = []
    for column in spec.columns:
        if isinstance(column, ComputedColumn):
            columns.append((column.name, expression_type(column.expression) or "", True,
                            f"AS {column.expression}"))
        elif isinstance(column, MetadataColumn):
            virtual = " VIRTUAL" if column.virtual else ""
            columns.append((column.name, column.type, True,
                            f"METADATA FROM '{column.key}'{virtual}"))
        else:
            columns.append((column.name, column.type, True, None))
    return columns


def _explain(catalog: Catalog, statement: ExplainStatement) -> str:
    """chronolake's plan of the query, as a tree of the derived views it reads, then Spark's
    physical plan of it."""
    specs = catalog.specs()
    query = parse_view(f"CREATE VIEW `{EXPLAINED}` AS {statement.query}", catalog=specs)
    watermarks = current_watermarks(catalog.root, catalog.registry.entries())
    lines = ["== chronolake plan =="]
    _node(lines, "query", query, specs, watermarks, statement.changelog_mode, depth=0)
    buffer = io.StringIO()
    with redirect_stdout(buffer):  # pyspark prints its plan: no API returns it as text
        catalog.sql(statement.query).explain(mode="formatted")
    return "\n".join([*lines, "", "== Spark physical plan ==", buffer.getvalue().rstrip()])


def _node(lines: list[str], label: str, spec: Spec, specs: dict[str, Spec],
          watermarks: dict[str, CurrentWatermark], changelog_mode: bool, *, depth: int) -> None:
    """One node of the tree: a view's operation, output, state and inputs (recursively), or a
    table's kind and changelog; each with its current watermark."""
    pad = "  " * depth
    mode = f", {flink_changelog_mode(spec)}" if changelog_mode else ""
    watermark = _watermark_text(watermarks.get(spec.name.lower()))
    if isinstance(spec, TableSpec):
        lines.append(f"{pad}{label}: table, {spec.kind.value}, rowtime "
                     f"{spec.rowtime or 'none'}{watermark}")
        lines.append(f"{pad}  changes: {changelog_kind(spec)}{mode}")
        return
    operation = operation_of(spec)
    lines.append(f"{pad}{label}: {operation.name} ({operation.summary}){watermark}")
    lines.append(f"{pad}  output: {changelog_kind(spec)}{mode}, key "
                 f"{', '.join(spec.primary_key) or 'none'}, rowtime {spec.rowtime or 'none'}")
    lines.append(f"{pad}  state: {operation.state}")
    lines.append(f"{pad}  inputs:")
    for name in referenced_tables(spec.query):
        source = specs.get(name.lower())
        if source is not None:
            _node(lines, source.name, source, specs, watermarks, changelog_mode, depth=depth + 2)


def _watermark_text(watermark: CurrentWatermark | None) -> str:
    instant = _instant(watermark) if watermark is not None else None
    if watermark is None or instant is None:
        return ""
    return f", watermark {instant:%Y-%m-%d %H:%M:%S.%f}"[:-3] + (
        f" ({watermark.watermark_from})" if watermark.watermark_from else "")


def _instant(watermark: CurrentWatermark) -> datetime | None:
    millis = watermark.watermark_ms
    return None if millis is None else datetime.fromtimestamp(millis / 1000, tz=UTC)
