"""`CURRENT_WATERMARK(rowtime)`: the watermark in force when a row arrived, as a value in the query.

Flink's idiom for separating late rows is a filter on it:

    CREATE VIEW on_time AS SELECT * FROM orders
    WHERE CURRENT_WATERMARK(order_time) IS NULL OR order_time > CURRENT_WATERMARK(order_time)

The argument must be the rowtime attribute of the input (the column of its `WATERMARK
FOR`), and the value has that column's type. Flink's value moves on between rows: it is
the last watermark its source emitted before the row. chronolake's is the watermark each
row is stamped with (`_watermark`, `chronolake.watermarks.assigner`): the table's strategy
applied over its commits in order, a row seeing the watermark after the commits before its
own, so all rows of one commit see the same value (with `'scan.watermark.emit.strategy' =
'on-event'`, the watermark after the rows before it, as in Flink). In a run cut into ticks
(`'scan.max-rows-per-tick'`) a window view's rows see the watermark at their tick's start.
A derived table's rows see the watermark the commit before theirs recorded. An ad-hoc
query reads a table as its changes applied: a keyed table's row is its key's last change,
seeing the watermark that change arrived under. Before the first watermark the value is
NULL, as in Flink; a table without event time gives NULL.

The call is replaced before Spark sees the query: by a reference to `ROW_WATERMARK`, the
column `with_row_watermark` adds to the rows (the row's `_watermark` in the rowtime's
type), or by a NULL literal for an input without event time.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TypeVar

import sqlglot
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from sqlglot import exp

from chronolake.errors import DefinitionError
from chronolake.schema import ComputedColumn, TableSpec
from chronolake.schema.dialect import expression_type, parse_expression, parse_type, spark_sql
from chronolake.watermarks.assigner import WATERMARK_COLUMN
from chronolake.watermarks.millis import millis_timestamp
from chronolake.watermarks.watermark import LONG_MIN

FUNCTION = "CURRENT_WATERMARK"
ROW_WATERMARK = "__chronolake_current_watermark"
"""The column `CURRENT_WATERMARK` reads on each row (`with_row_watermark`); never shown."""
Node = TypeVar("Node", bound=exp.Expr)


@dataclass(frozen=True)
class HeldWatermark:
    """What `CURRENT_WATERMARK` is over one input: its rowtime attribute and type, and whether
    each row carries its value (`per_row`) or the input has no event time (NULL)."""

    table: str
    rowtime: str
    local_time_zone: bool = False
    """True when the rowtime is a TIMESTAMP_LTZ (the value is one too)."""
    per_row: bool = False
    """Each row carries its own value in `ROW_WATERMARK` (`with_row_watermark`)."""
    qualifier: str = ""
    """The name the query reads the input by, for `ROW_WATERMARK` (empty: unqualified)."""

    def value(self) -> exp.Expr:
        """The value as a Flink SQL expression of the rowtime's type: `ROW_WATERMARK` (qualified
        by the input's name) per row, else NULL."""
        if self.per_row:
            return exp.column(ROW_WATERMARK, table=self.qualifier or None, quoted=True)
        kind = "TIMESTAMP_LTZ(3)" if self.local_time_zone else "TIMESTAMP(3)"
        return parse_expression(f"CAST(NULL AS {kind})")


def held_by(spec: TableSpec, *, per_row: bool, qualifier: str = "") -> HeldWatermark | None:
    """What `CURRENT_WATERMARK` is over `spec`: per row (read by `qualifier`), or NULL for
    every row; None when it has no rowtime attribute."""
    rowtime = spec.rowtime
    declared = spec.column(rowtime) if rowtime is not None else None
    if rowtime is None or declared is None:
        return None
    if isinstance(declared, ComputedColumn):
        type_text = expression_type(declared.expression) or "TIMESTAMP(3)"
    else:
        type_text = declared.type
    local = parse_type(type_text).this is exp.DType.TIMESTAMPLTZ
    return HeldWatermark(spec.name, rowtime, local_time_zone=local, per_row=per_row,
                         qualifier=qualifier)


def with_row_watermark(rows: DataFrame, rowtime: str) -> DataFrame:
    """`rows` (stamped with `_watermark`) plus `ROW_WATERMARK`: the watermark in force when each
    row arrived as a value of the `rowtime` column's type, NULL before the first watermark."""
    data_type = rows.select(F.col(rowtime)).schema[0].dataType  # analysis only, no job
    stamped = F.col(WATERMARK_COLUMN)
    value = F.when(stamped != F.lit(LONG_MIN), millis_timestamp(stamped, data_type))
    return rows.withColumn(ROW_WATERMARK, value)


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
    """A copy of `node` (Flink AST) with each `CURRENT_WATERMARK(t.c)` replaced by its value
    over its input. `held` maps the names a column may be qualified with (table names and
    aliases, lower case) to that input's; `where` names the query, for errors."""
    bound = node.copy()
    for call in calls(bound):
        call.replace(_held_for(call, held, where=where).value())
    return bound


def bind_spark_sql(text: str, held: Mapping[str, HeldWatermark], *, where: str) -> str:
    """`bind` over Spark SQL text (an operator's filter planned earlier)."""
    if FUNCTION not in text.upper():
        return text
    tree = sqlglot.parse_one(text, dialect="spark")
    for call in calls(tree):
        value = spark_sql(_held_for(call, held, where=where).value())
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
