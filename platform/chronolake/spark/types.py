"""Flink's types as Spark's: the type that holds a declared column's values, and the Flink
type a stored Spark column is declared as when a derived table is read as a source."""

from __future__ import annotations

from pyspark.sql import types as T
from sqlglot import exp

from chronolake.schema.dialect import Flink, normalize_type, parse_type


def flink_type(data_type: T.DataType) -> str:
    """The Flink type of a Spark type (`TimestampNTZType` -> `TIMESTAMP(6)`): how a derived
    table's stored columns are declared when it is read as a source."""
    text = data_type.simpleString()
    node = exp.DataType.build(text, dialect="spark")
    for inner in node.find_all(exp.DataType):
        if inner.this is exp.DType.TIMESTAMPNTZ:
            inner.set("this", exp.DType.TIMESTAMP)
        elif inner.this is exp.DType.TIMESTAMPTZ:
            inner.set("this", exp.DType.TIMESTAMPLTZ)
    return normalize_type(node.sql(dialect=Flink))


def spark_type(flink_type: str) -> T.DataType:
    """The Spark type that holds values of a Flink type (`TIMESTAMP(3)` -> `TimestampNTZType`)."""
    return _spark_type(parse_type(flink_type))


def _spark_type(data_type: exp.DataType) -> T.DataType:
    kind = data_type.this
    if kind is exp.DType.STRUCT:
        return T.StructType([
            T.StructField(column.name, _spark_type(column.args["kind"]))
            for column in data_type.expressions
        ])
    if kind is exp.DType.ARRAY:
        return T.ArrayType(_spark_type(data_type.expressions[0]))
    if kind is exp.DType.MAP:
        key, value = data_type.expressions
        return T.MapType(_spark_type(key), _spark_type(value))
    if kind is exp.DType.DECIMAL:
        precision, scale = (int(p.name) for p in data_type.expressions)
        return T.DecimalType(precision, scale)
    return _SPARK_TYPES[kind]()


_SPARK_TYPES: dict[exp.DType, type[T.DataType]] = {
    exp.DType.TEXT: T.StringType,
    exp.DType.VARCHAR: T.StringType,
    exp.DType.CHAR: T.StringType,
    exp.DType.BOOLEAN: T.BooleanType,
    exp.DType.TINYINT: T.ByteType,
    exp.DType.SMALLINT: T.ShortType,
    exp.DType.INT: T.IntegerType,
    exp.DType.BIGINT: T.LongType,
    exp.DType.FLOAT: T.FloatType,
    exp.DType.DOUBLE: T.DoubleType,
    exp.DType.DECIMAL: T.DecimalType,
    exp.DType.DATE: T.DateType,
    exp.DType.TIMESTAMP: T.TimestampNTZType,
    exp.DType.TIMESTAMPLTZ: T.TimestampType,
    exp.DType.VARBINARY: T.BinaryType,
    exp.DType.BINARY: T.BinaryType,
    exp.DType.ARRAY: T.ArrayType,
    exp.DType.MAP: T.MapType,
}
