"""Which declared type may read which stored type: the one owner of that rule.

A table's physical columns are read by casting the stored Delta column to the
declared type, so a declaration that does not match the data would silently change
values: `INT` over a `bigint` overflows, `DOUBLE` over a `decimal(10,2)` rounds,
`TIMESTAMP(3)` over a `string` turns text that is not a timestamp into NULL.
`CREATE TABLE` over an existing Delta table refuses those.

The reference is Flink's implicit casts (`LogicalTypeCasts.supportsImplicitCast`),
kept where they are widenings: TINYINT -> SMALLINT -> INT -> BIGINT -> DECIMAL with
room for the integer's digits, integers -> FLOAT -> DOUBLE, a DECIMAL with at least
the stored integer digits and scale, any string type -> STRING/VARCHAR/CHAR, and
TIMESTAMP <-> TIMESTAMP_LTZ. Flink's DECIMAL -> FLOAT/DOUBLE and TIMESTAMP -> DATE
are implicit but round or truncate, so they are refused. Timestamp precision is not
compared: Delta stores microseconds, and chronolake reads every timestamp at that
precision whatever the declaration says. Nullability is not compared either: a NOT
NULL declaration changes no value.
"""

from __future__ import annotations

from typing import NamedTuple

from pyspark.sql.types import StructField, StructType
from sqlglot import exp
from sqlglot.errors import SqlglotError

from chronolake.errors import DefinitionError
from chronolake.schema.dialect import canonical_sql, parse_type
from chronolake.schema.spec import TableSpec
from chronolake.spark.types import flink_type

_INTEGERS = (exp.DType.TINYINT, exp.DType.SMALLINT, exp.DType.INT, exp.DType.BIGINT)
_DIGITS = {exp.DType.TINYINT: 3, exp.DType.SMALLINT: 5, exp.DType.INT: 10, exp.DType.BIGINT: 19}
_FLOATS = (exp.DType.FLOAT, exp.DType.DOUBLE)
_STRINGS = (exp.DType.TEXT, exp.DType.VARCHAR, exp.DType.CHAR)
_TIMESTAMPS = (exp.DType.TIMESTAMP, exp.DType.TIMESTAMPLTZ)
_BINARIES = (exp.DType.BINARY, exp.DType.VARBINARY)
_CONSTRUCTED = (exp.DType.ARRAY, exp.DType.MAP, exp.DType.STRUCT)


class Mismatch(NamedTuple):
    """Why a declared type would change a stored column's values, and what to declare."""

    reason: str
    fix: str


def check_stored_types(spec: TableSpec, stored: StructType) -> None:
    """Raise `DefinitionError` naming each physical column of `spec` whose declared type
    would change the values `stored` (the Delta table's schema) holds."""
    fields = {field.name: field for field in stored.fields}
    lowered = {field.name.lower(): field for field in stored.fields}
    problems = []
    for column in spec.physical_columns:
        field = fields.get(column.name) or lowered.get(column.name.lower())
        mismatch = _field_mismatch(column.name, column.type, field) if field else None
        if mismatch is not None and field is not None:
            problems.append(
                f"CREATE TABLE {spec.name}: column {column.name} is declared {column.type} but "
                f"the Delta table at {spec.options.path} stores {field.dataType.simpleString()}; "
                f"{mismatch.reason}. {mismatch.fix}."
            )
    if problems:
        raise DefinitionError("\n".join(problems))


def mismatch(declared: str, stored: str) -> Mismatch | None:
    """Why reading a `stored` column as `declared` (Flink types) would change its values;
    None when `declared` reads it as it is."""
    return _mismatch(parse_type(declared), parse_type(stored))


def _field_mismatch(name: str, declared: str, field: StructField) -> Mismatch | None:
    try:
        stored = flink_type(field.dataType)
    except (DefinitionError, SqlglotError, ValueError):
        return None  # a stored type chronolake cannot name: nothing to compare with
    found = mismatch(declared, stored)
    if found is None or parse_type(stored).this not in _STRINGS:
        return found
    convert = "TO_TIMESTAMP" if parse_type(declared).this in _TIMESTAMPS else "CAST"
    call = f"TO_TIMESTAMP({name})" if convert == "TO_TIMESTAMP" else f"CAST({name} AS {declared})"
    return found._replace(
        fix=f"Declare it STRING and convert it in a computed column, e.g. `{name}_value AS {call}`"
    )


def _mismatch(declared: exp.DataType, stored: exp.DataType) -> Mismatch | None:
    want, have = declared.this, stored.this
    shown = canonical_sql(declared)
    keep = Mismatch(reason="", fix=f"Declare it {_suggestion(stored)}")
    if have in _CONSTRUCTED or want in _CONSTRUCTED:
        return _constructed(declared, stored, keep)
    if have in _INTEGERS:
        return _from_integer(declared, have, keep)
    if have is exp.DType.DECIMAL:
        return _from_decimal(declared, stored, keep)
    if want is have or {want, have} <= set(_STRINGS) or {want, have} <= set(_BINARIES):
        return None
    if {want, have} <= set(_TIMESTAMPS) or (have is exp.DType.FLOAT and want in _FLOATS):
        return None  # Flink's implicit TIMESTAMP <-> TIMESTAMP_LTZ and FLOAT -> DOUBLE
    if have is exp.DType.DOUBLE and want is exp.DType.FLOAT:
        return keep._replace(reason=f"{shown} would round its values")
    if have in _TIMESTAMPS and want is exp.DType.DATE:
        return keep._replace(reason=f"{shown} would drop the time of day")
    if have in _STRINGS:
        return keep._replace(
            reason=f"{shown} would parse its text, and text that is not a {shown} would read "
            "as NULL"
        )
    return keep._replace(
        reason=f"{shown} is not an implicit widening of {canonical_sql(stored)} (Flink reads it "
        "only with an explicit CAST, which may change values)"
    )


def _from_integer(
    declared: exp.DataType, have: exp.DType, keep: Mismatch
) -> Mismatch | None:
    want, shown = declared.this, canonical_sql(declared)
    if want in _FLOATS:
        return None  # Flink's implicit widening of integers to approximate numbers
    if want in _INTEGERS:
        if _INTEGERS.index(want) >= _INTEGERS.index(have):
            return None
        return keep._replace(
            reason=f"{shown} cannot hold every {have.value} value, larger ones would overflow",
            fix=f"{keep.fix} (or a wider integer)",
        )
    if want is exp.DType.DECIMAL:
        precision, scale = _decimal(declared)
        if precision - scale >= _DIGITS[have]:
            return None
        return keep._replace(
            reason=f"{shown} holds {precision - scale} integer digits, fewer than a "
            f"{have.value}'s {_DIGITS[have]}, so larger values would overflow",
            fix=f"{keep.fix} or DECIMAL({_DIGITS[have] + scale}, {scale})",
        )
    return keep._replace(reason=f"{shown} is not an implicit widening of {have.value}")


def _from_decimal(
    declared: exp.DataType, stored: exp.DataType, keep: Mismatch
) -> Mismatch | None:
    want, shown = declared.this, canonical_sql(declared)
    wider = keep._replace(fix=f"{keep.fix} (or a wider DECIMAL)")
    if want in _FLOATS:
        return wider._replace(reason=f"{shown} would round its values")
    if want in _INTEGERS and _decimal(stored)[1] > 0:
        return wider._replace(reason=f"{shown} would drop its fractional digits")
    if want is not exp.DType.DECIMAL:
        return wider._replace(
            reason=f"{shown} is not an implicit widening of {canonical_sql(stored)}"
        )
    precision, scale = _decimal(declared)
    stored_precision, stored_scale = _decimal(stored)
    if scale < stored_scale:
        return wider._replace(reason=f"{shown} would round its values to {scale} decimal places")
    if precision - scale < stored_precision - stored_scale:
        return wider._replace(
            reason=f"{shown} holds {precision - scale} integer digits, fewer than the stored "
            f"{stored_precision - stored_scale}, so larger values would overflow"
        )
    return None


def _constructed(declared: exp.DataType, stored: exp.DataType, keep: Mismatch) -> Mismatch | None:
    """ARRAY, MAP and ROW read element by element (a ROW's fields by position)."""
    inner_declared, inner_stored = declared.expressions, stored.expressions
    if declared.this is not stored.this or len(inner_declared) != len(inner_stored):
        return keep._replace(
            reason=f"{canonical_sql(declared)} does not have the shape of "
            f"{canonical_sql(stored)}"
        )
    for want, have in zip(inner_declared, inner_stored, strict=True):
        want_type = want.args["kind"] if isinstance(want, exp.ColumnDef) else want
        have_type = have.args["kind"] if isinstance(have, exp.ColumnDef) else have
        found = _mismatch(want_type, have_type)
        if found is not None:
            return keep._replace(reason=found.reason)
    return None


def _decimal(data_type: exp.DataType) -> tuple[int, int]:
    precision, scale = (int(param.name) for param in data_type.expressions)
    return precision, scale


def _suggestion(stored: exp.DataType) -> str:
    """The declaration that reads `stored` as it is: its own type, timestamps at the
    millisecond precision a rowtime needs (precision changes nothing on read)."""
    copy = stored.copy()
    for node in copy.find_all(exp.DataType):
        if node.this in _TIMESTAMPS:
            node.set("expressions", [exp.DataTypeParam(this=exp.Literal.number(3))])
    return canonical_sql(copy)
