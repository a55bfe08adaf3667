"""`CURRENT_WATERMARK(rowtime)`: the watermark a query's input holds, as a value in the query.

Flink's idiom for separating late rows is a filter on it:

    CREATE VIEW on_time AS SELECT * FROM orders
    WHERE CURRENT_WATERMARK(order_time) IS NULL OR order_time > CURRENT_WATERMARK(order_time)

The argument must be the rowtime attribute of the input (the column of its `WATERMARK
FOR`), and the value has that column's type. chronolake evaluates a query in runs, so the
value is the watermark the input holds when the run starts: a view fed to a derived table
sees its source's watermark as the previous run left it, an ad-hoc query the watermark the
table holds now. Before the first watermark the value is NULL, as in Flink. The call is
replaced by that value before Spark sees the query (a literal: no Spark job, no UDF).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TypeVar

import sqlglot
from sqlglot import exp

from chronolake.errors import DefinitionError
from chronolake.schema import ComputedColumn, TableSpec
from chronolake.schema.dialect import expression_type, parse_expression, parse_type, spark_sql
from chronolake.watermarks.watermark import LONG_MIN

FUNCTION = "CURRENT_WATERMARK"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
Node = TypeVar("Node", bound=exp.Expr)


@dataclass(frozen=True)
class HeldWatermark:
    """What one input holds: its rowtime attribute, its type and its watermark (epoch ms)."""

    table: str
    rowtime: str
    watermark_ms: int | None
    local_time_zone: bool = False
    """True when the rowtime is a TIMESTAMP_LTZ (the value is one too)."""

    def literal(self) -> exp.Expr:
        """The watermark as a Flink SQL value of the rowtime's type; NULL before the first."""
        if self.watermark_ms is None or self.watermark_ms == LONG_MIN:
            kind = "TIMESTAMP_LTZ(3)" if self.local_time_zone else "TIMESTAMP(3)"
            return parse_expression(f"CAST(NULL AS {kind})")
        if self.local_time_zone:
            return parse_expression(f"TO_TIMESTAMP_LTZ({self.watermark_ms}, 3)")
        instant = _EPOCH + timedelta(milliseconds=self.watermark_ms)
        text = instant.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
        return parse_expression(f"CAST('{text}' AS TIMESTAMP(3))")


def held_by(spec: TableSpec, watermark_ms: int | None) -> HeldWatermark | None:
    """What `spec` holds at `watermark_ms`; None when it has no rowtime attribute."""
    rowtime = spec.rowtime
    declared = spec.column(rowtime) if rowtime is not None else None
    if rowtime is None or declared is None:
        return None
    if isinstance(declared, ComputedColumn):
        type_text = expression_type(declared.expression) or "TIMESTAMP(3)"
    else:
        type_text = declared.type
    local = parse_type(type_text).this is exp.DType.TIMESTAMPLTZ
    return HeldWatermark(spec.name, rowtime, watermark_ms, local_time_zone=local)


def calls(node: exp.Expr) -> list[exp.Anonymous]:
    """The `CURRENT_WATERMARK(...)` calls in a parsed query or expression."""
    return [call for call in node.find_all(exp.Anonymous) if call.name.upper() == FUNCTION]


def uses_current_watermark(query: str) -> bool:
    """Whether a query calls `CURRENT_WATERMARK` (cheap: a text test, then the parse)."""
    return FUNCTION in query.upper() and bool(calls(parse_expression(query, what="query")))


def refuse_current_watermark(
    query: exp.Expr, view: str, *, kind: str, filter_only: bool
) -> None:
    """Refuse `CURRENT_WATERMARK` where a derived table's operator cannot give it a value:
    anywhere in a join or deduplication, outside the WHERE of a window view."""
    for call in calls(query):
        if filter_only and call.find_ancestor(exp.Where) is not None:
            continue
        place = "outside its WHERE clause" if filter_only else f"in a {kind} view"
        msg = (
            f"view {view!r}: {call.sql(dialect='spark')} {place} is not supported; filter the "
            "input in a plain view first, e.g. CREATE VIEW on_time AS SELECT * FROM t WHERE "
            "CURRENT_WATERMARK(ts) IS NULL OR ts > CURRENT_WATERMARK(ts), and read that view"
        )
        raise DefinitionError(msg)


def bind(node: Node, held: Mapping[str, HeldWatermark], *, where: str) -> Node:
    """A copy of `node` (Flink AST) with each `CURRENT_WATERMARK(t.c)` replaced by the value
    its input holds. `held` maps the names a column may be qualified with (table names and
    aliases, lower case) to what that input holds; `where` names the query, for errors."""
    bound = node.copy()
    for call in calls(bound):
        call.replace(_held_for(call, held, where=where).literal())
    return bound


def bind_spark_sql(text: str, held: Mapping[str, HeldWatermark], *, where: str) -> str:
    """`bind` over Spark SQL text (an operator's filter planned earlier)."""
    if FUNCTION not in text.upper():
        return text
    tree = sqlglot.parse_one(text, dialect="spark")
    for call in calls(tree):
        value = spark_sql(_held_for(call, held, where=where).literal())
        call.replace(sqlglot.parse_one(value, dialect="spark"))
    return tree.sql(dialect="spark")


def _held_for(
    call: exp.Anonymous, held: Mapping[str, HeldWatermark], *, where: str
) -> HeldWatermark:
    """The input whose rowtime attribute the call names (Flink's rule: the argument must be
    a rowtime attribute)."""
    written = call.sql(dialect="spark")
    arguments = call.expressions
    column = arguments[0] if len(arguments) == 1 else None
    if not isinstance(column, exp.Column):
        msg = (
            f"{where}: {written}: CURRENT_WATERMARK takes one argument, a rowtime attribute, "
            "e.g. CURRENT_WATERMARK(order_time)"
        )
        raise DefinitionError(msg)
    qualifier = column.table.lower()
    inputs = [held[qualifier]] if qualifier in held else list(dict.fromkeys(held.values()))
    matches = [h for h in inputs if h.rowtime.lower() == column.name.lower()]
    if len(matches) == 1:
        return matches[0]
    rowtimes = ", ".join(
        f"{h.table}.{h.rowtime}" for h in dict.fromkeys(held.values())
    ) or "none: no input declares WATERMARK FOR"
    if matches:
        msg = (
            f"{where}: {written}: {column.name!r} is the rowtime of several inputs; qualify "
            f"it with the table it belongs to (rowtime attributes: {rowtimes})"
        )
        raise DefinitionError(msg)
    msg = (
        f"{where}: {written}: The argument of CURRENT_WATERMARK must be a rowtime attribute, "
        f"but {column.sql(dialect='spark')!r} is not one; rowtime attributes here: {rowtimes}"
    )
    raise DefinitionError(msg)
