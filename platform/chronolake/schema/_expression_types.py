"""The Flink type of a column expression, told at definition time where it can be told.

A watermark strategy is checked against its rowtime before any Spark job runs, so its
type comes from the declared column types, through sqlglot's type annotation. Only
expressions whose type sqlglot derives as Flink does are typed: columns, literals,
intervals, casts, arithmetic, comparisons, CASE and COALESCE. A function call (a UDF,
CURRENT_TIMESTAMP, TO_TIMESTAMP_LTZ, ...) or a column of unknown type leaves the type
unknown (None): Spark checks it on read.
"""

from __future__ import annotations

from collections.abc import Mapping

from sqlglot import exp
from sqlglot.errors import OptimizeError
from sqlglot.optimizer.annotate_types import annotate_types
from sqlglot.optimizer.qualify import qualify
from sqlglot.schema import MappingSchema

from chronolake.errors import DefinitionError
from chronolake.schema.dialect import Flink, normalize_type, parse_expression

_TYPED = (
    exp.Column, exp.Dot, exp.Identifier, exp.Literal, exp.Null, exp.Boolean, exp.Interval,
    exp.Var, exp.Cast, exp.DataType, exp.DataTypeParam, exp.Paren, exp.Neg, exp.Add, exp.Sub,
    exp.Mul, exp.Div, exp.Coalesce, exp.Case, exp.If, exp.EQ, exp.NEQ, exp.GT, exp.GTE,
    exp.LT, exp.LTE, exp.And, exp.Or, exp.Not, exp.Is,
)
"""The nodes whose type sqlglot annotates as Flink types them."""
_TABLE = "t"


def expression_type_over(expression: str, column_types: Mapping[str, str]) -> str | None:
    """The canonical Flink type of `expression` over columns of `column_types` (name to
    type text), or None when it cannot be told here (see the module docstring)."""
    node = parse_expression(expression)
    if isinstance(node, exp.Alias):  # FLIP-66's `ts - '5' SECOND` parses as an alias
        node = node.this
    if any(not isinstance(part, _TYPED) or _is_typed_literal(part) for part in node.walk()):
        return None
    known = {name.lower(): type_ for name, type_ in column_types.items()}
    heads = {column.parts[0].name.lower() for column in node.find_all(exp.Column)}
    if not heads <= known.keys():
        return None
    node = node.copy()
    for column in node.find_all(exp.Column):  # names are matched case-insensitively
        for part in column.parts:
            part.set("this", part.name.lower())
    schema = MappingSchema({_TABLE: known}, dialect=Flink)
    select = exp.select(node.as_("expr")).from_(_TABLE)
    try:
        typed = annotate_types(
            qualify(select, schema=schema, dialect=Flink, quote_identifiers=False),
            schema=schema, dialect=Flink,
        )
    except OptimizeError:
        return None
    data_type = typed.selects[0].type
    if data_type is None or data_type.is_type(exp.DType.UNKNOWN):
        return None
    try:
        return normalize_type(data_type.sql(dialect=Flink))
    except DefinitionError:  # a type chronolake does not declare: not one to compare
        return None


def _is_typed_literal(node: exp.Expr) -> bool:
    """`TIMESTAMP '...'` (parsed as a cast): Flink takes its precision from its digits."""
    return (
        isinstance(node, exp.Cast) and isinstance(node.this, exp.Literal)
        and not node.to.expressions
    )
