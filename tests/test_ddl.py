"""The Flink DDL parser: seeds' DDL, views, queries, temporal joins, Spark translation, errors."""

from __future__ import annotations

import datetime as dt

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import types as T

from chronolake.errors import DefinitionError
from chronolake.schema import (
    ComputedColumn,
    DeltaOptions,
    MetadataColumn,
    MetadataKey,
    PhysicalColumn,
    TableKind,
    TableSpec,
    WatermarkSpec,
)
from chronolake.schema.dialect import to_spark_sql
from chronolake.schema.spec import KeepRow
from chronolake.spark.types import spark_type
from chronolake.sql import (
    JoinKind,
    QueryStatement,
    parse_statements,
    parse_table,
    parse_view,
    referenced_tables,
    temporal_joins,
    to_spark,
)

DELTA = "WITH ('connector' = 'delta', 'path' = 'p')"

RATES_DDL = """
CREATE TABLE rates (
  currency STRING,
  rate DECIMAL(38, 10),
  currency_time TIMESTAMP(3),
  changelog_time TIMESTAMP(3) METADATA FROM 'commit_timestamp' VIRTUAL,
  WATERMARK FOR currency_time AS currency_time - INTERVAL '5' SECOND,
  PRIMARY KEY (currency) NOT ENFORCED
) WITH ('connector' = 'delta', 'path' = 'rates', 'changelog' = 'cdf')
"""

# The seeds' CREATE statements, with their Kafka/format options replaced by Delta options.
SEED_TABLES = {
    "flip66_bounded": f"""CREATE TABLE kafka_source (
        user_id STRING,
        log_ts TIMESTAMP(3),
        ingestion_ts TIMESTAMP(3),
        WATERMARK FOR log_ts AS log_ts - INTERVAL '5' SECOND
    ) {DELTA}""",
    "flip66_system_watermark": f"""CREATE TABLE myTable (
        rowtime AS SYSTEM_ROWTIME(),
        WATERMARK FOR rowtime AS SYSTEM_WATERMARK()
    ) {DELTA}""",
    "flip66_udf_strategy": f"""CREATE TABLE myTable (
        log_ts TIMESTAMP(3),
        flag BOOLEAN,
        WATERMARK FOR log_ts AS watermarkOnFlag(log_ts, flag)
    ) {DELTA}""",
    "flip66_nested": f"""CREATE TABLE kafka_source (
        order_id STRING,
        event ROW<log_ts TIMESTAMP(3), message STRING, type INT>,
        WATERMARK FOR event.log_ts AS event.log_ts - '5' SECOND
    ) {DELTA}""",
    "flip66_computed": f"""CREATE TABLE kafka_source (
        order_id STRING,
        ts STRING,
        -- to_timestamp can be a built-in function or UDF
        rowtime AS to_timestamp(ts),
        WATERMARK FOR rowtime AS rowtime - '5' SECOND
    ) {DELTA}""",
    "flip132_versioned_rates": f"""CREATE TABLE versioned_rates (
        currency STRING,
        rate DECIMAL(38, 10),
    currency_time TIMESTAMP(3),
    WATERMARK FOR currency_time AS currency_time, -- event time (currency_time)
        PRIMARY KEY(currency) NOT ENFORCED        -- primary key (currency)
    ) {DELTA}""",
    "flip132_versioned_rates2": f"""CREATE TABLE versioned_rates2 (
        currency STRING,
        rate DECIMAL(38, 10),
    currency_time TIMESTAMP(3),
    changelog_time TIMESTAMP(3) METADATA FROM 'commit_timestamp' VIRTUAL,
    WATERMARK FOR changelog_time AS changelog_time,
        PRIMARY KEY(currency) NOT ENFORCED
    ) {DELTA}""",
    "flip132_latest_rates": f"""CREATE TABLE latest_rates (  -- No event time and No primary key
        currency STRING,
        rate DECIMAL(38, 10),
    currency_time TIMESTAMP(3)
    ) {DELTA}""",
    "flip132_latest_rates3_trailing_comma": f"""CREATE TABLE latest_rates3 ( -- No primary key
        currency STRING,
        rate DECIMAL(38, 10),
    currency_time TIMESTAMP(3),
    WATERMARK FOR currency_time AS currency_time,
    ) {DELTA}""",
    "flip132_latest_rates4": f"""CREATE TABLE latest_rates4 ( -- No event time
        currency STRING,
        rate DECIMAL(38, 10),
    proctime AS PROCTIME(),
        PRIMARY KEY(currency) NOT ENFORCED
    ) {DELTA}""",
    "flip132_orders": f"""CREATE TABLE orders (
        order_id STRING,
        currency STRING,
        amount INT,
        proctime as PROCTIME(),
        order_time TIMESTAMP(3),
    WATERMARK FOR order_time AS order_time - INTERVAL '30' SECOND
    ) {DELTA}""",
    "flip132_rejected_temporal_ddl_without_keyword": f"""CREATE TABLE versioned_rates (
         currency CHAR(3) NOT NULL PRIMARY KEY NOT ENFORCED,
         rate DOUBLE,
         currency_time TIMESTAMP(3),
         WATERMARK FOR currency_time AS currency_time - INTERVAL '5' MINUTE
    ) {DELTA}""",
}

SEED_EXPECTATIONS = {
    "flip66_bounded": ("log_ts", "log_ts - INTERVAL '5' SECOND", TableKind.REGULAR),
    "flip66_system_watermark": ("rowtime", "SYSTEM_WATERMARK()", TableKind.REGULAR),
    "flip66_udf_strategy": ("log_ts", "WATERMARKONFLAG(log_ts, flag)", TableKind.REGULAR),
    "flip66_nested": ("event.log_ts", "event.log_ts - INTERVAL '5' SECOND", TableKind.REGULAR),
    "flip66_computed": ("rowtime", "rowtime - INTERVAL '5' SECOND", TableKind.REGULAR),
    "flip132_versioned_rates": ("currency_time", "currency_time", TableKind.VERSIONED),
    "flip132_versioned_rates2": ("changelog_time", "changelog_time", TableKind.VERSIONED),
    "flip132_latest_rates": (None, None, TableKind.REGULAR),
    "flip132_latest_rates3_trailing_comma": ("currency_time", "currency_time", TableKind.REGULAR),
    "flip132_latest_rates4": (None, None, TableKind.REGULAR),
    "flip132_orders": ("order_time", "order_time - INTERVAL '30' SECOND", TableKind.REGULAR),
    "flip132_rejected_temporal_ddl_without_keyword": (
        "currency_time", "currency_time - INTERVAL '5' MINUTE", TableKind.VERSIONED),
}


@pytest.mark.parametrize("seed", sorted(SEED_TABLES))
def test_seed_tables_parse(seed: str) -> None:
    spec = parse_table(SEED_TABLES[seed])
    rowtime, expression, kind = SEED_EXPECTATIONS[seed]
    assert spec.rowtime == rowtime
    assert (spec.watermark.expression if spec.watermark else None) == expression
    assert spec.kind is kind


def test_design_example_parses_into_the_spec_built_in_python() -> None:
    expected = TableSpec(
        name="rates",
        columns=(
            PhysicalColumn(name="currency", type="STRING"),
            PhysicalColumn(name="rate", type="decimal(38,10)"),
            PhysicalColumn(name="currency_time", type="timestamp(3)"),
            MetadataColumn(name="changelog_time", type="TIMESTAMP(3)",
                           key=MetadataKey.COMMIT_TIMESTAMP),
        ),
        watermark=WatermarkSpec(rowtime="currency_time",
                                expression="currency_time - interval '5' second"),
        primary_key=("currency",),
        options=DeltaOptions.from_map({"path": "rates", "changelog": "cdf"}),
    )
    assert parse_table(RATES_DDL) == expected
    assert expected.kind is TableKind.VERSIONED


def test_ddl_with_every_column_kind_equals_the_python_spec() -> None:
    ddl = """
    create table `Orders` (
      id BIGINT NOT NULL COMMENT 'the order',
      `event` row<log_ts timestamp_ltz(3), `type` int>,
      ts_string string,
      rowtime as to_timestamp(ts_string),
      pt as proctime(),
      version bigint metadata from 'commit_version' virtual,
      commit_timestamp timestamp_ltz(3) metadata virtual,
      watermark for `event`.`log_ts` as `event`.log_ts - interval '0.001' second,
      constraint pk primary key (id) not enforced
    ) with ('path' = '/lake/orders', 'scan.watermark.emit.strategy' = 'on-event')
    """
    expected = TableSpec(
        name="Orders",
        columns=(
            PhysicalColumn(name="id", type="BIGINT"),
            PhysicalColumn(name="event", type="ROW<log_ts TIMESTAMP_LTZ(3), type INT>"),
            PhysicalColumn(name="ts_string", type="STRING"),
            ComputedColumn(name="rowtime", expression="TO_TIMESTAMP(ts_string)"),
            ComputedColumn(name="pt", expression="PROCTIME()"),
            MetadataColumn(name="version", type="BIGINT", key=MetadataKey.COMMIT_VERSION),
            MetadataColumn(name="commit_timestamp", type="TIMESTAMP_LTZ(3)",
                           key=MetadataKey.COMMIT_TIMESTAMP),
        ),
        watermark=WatermarkSpec(rowtime="event.log_ts",
                                expression="event.log_ts - INTERVAL '0.001' SECOND"),
        primary_key=("id",),
        options=DeltaOptions(path="/lake/orders", emit_strategy="on-event"),
    )
    spec = parse_table(ddl)
    assert spec == expected
    assert spec.watermark is not None and spec.watermark.datatype == "TIMESTAMP_LTZ(3)"
    assert spec.proctime == "pt" and spec.kind is TableKind.VERSIONED


def test_parsed_watermark_round_trips_through_flip66_properties() -> None:
    spec = parse_table(SEED_TABLES["flip66_nested"])
    properties = spec.properties()
    assert properties["schema.watermark.0.rowtime"] == "event.log_ts"
    assert properties["schema.watermark.0.strategy.expression"] == (
        "event.log_ts - INTERVAL '5' SECOND")
    assert properties["schema.watermark.0.strategy.datatype"] == "TIMESTAMP(3)"
    assert WatermarkSpec.from_properties(properties) == spec.watermark


def test_temporary_tables_and_views_are_accepted() -> None:
    table, view = parse_statements(
        f"CREATE TEMPORARY TABLE t (a INT) {DELTA}; CREATE TEMPORARY VIEW v AS SELECT a FROM t")
    assert table.name == "t" and view.name == "v"


# -- errors ------------------------------------------------------------------------------------

TABLE_ERRORS = [
    ("CREATE TABLE t (\n  a INT,\n  b STRANGE STRING\n) " + DELTA,
     r"syntax error at line 3, column 5: expected '\)', found 'STRANGE'\n    b STRANGE STRING\n"
     r" {6}\^\nfix the statement at the marked position"),
    ("CREATE TABLE t (a INT, PRIMARY KEY (a) ENFORCED) " + DELTA,
     r"line 1, column 40: PRIMARY KEY \.\.\. ENFORCED is not supported: .* write PRIMARY KEY "
     r"\(\.\.\.\) NOT ENFORCED"),
    ("CREATE TABLE t (a INT, PRIMARY KEY (a)) " + DELTA,
     r"PRIMARY KEY \(a\) must be declared NOT ENFORCED .*; write PRIMARY KEY \(a\) NOT ENFORCED"),
    ("CREATE TABLE t (a INT PRIMARY KEY) " + DELTA, r"a \.\.\. PRIMARY KEY must be declared NOT"),
    ("CREATE TABLE t (a INT, PRIMARY KEY (b) NOT ENFORCED) " + DELTA,
     r"primary key column 'b' does not exist; declare it or use one of: a"),
    ("CREATE TABLE t (a INT, WATERMARK FOR ts AS ts) " + DELTA,
     r"WATERMARK FOR ts: column 'ts' does not exist; use one of: a"),
    ("CREATE TABLE t (a INT, WATERMARK FOR a AS a) " + DELTA,
     r"WATERMARK FOR a: the rowtime must be TIMESTAMP\(p\) or TIMESTAMP_LTZ\(p\) .*got INT"),
    ("CREATE TABLE t (e ROW<x INT>, WATERMARK FOR e.ts AS e.ts) " + DELTA,
     r"WATERMARK FOR e\.ts: ROW<x INT> has no field 'ts'"),
    ("CREATE TABLE t (ts TIMESTAMP(3), WATERMARK FOR ts AS SYSTEM_WATERMARK()) " + DELTA,
     r"SYSTEM_WATERMARK\(\) needs a rowtime derived with SYSTEM_ROWTIME\(\)"),
    ("CREATE TABLE t (ts TIMESTAMP(3), WATERMARK FOR ts AS ts, WATERMARK FOR ts AS ts) " + DELTA,
     r"2 WATERMARK clauses; a table has at most one rowtime attribute"),
    ("CREATE TABLE t (a INT PRIMARY KEY NOT ENFORCED, PRIMARY KEY (a) NOT ENFORCED) " + DELTA,
     r"more than one PRIMARY KEY"),
    ("CREATE TABLE t (a INT) WITH ('path' = 'p', 'scan.startup.mod' = 'x')",
     r"unknown option\(s\) 'scan.startup.mod'; known options are: .*scan.startup.mode"),
    ("CREATE TABLE t (a INT) WITH ('connector' = 'kafka', 'topic' = 'x')",
     r"connector 'kafka' is not supported; .*'connector' = 'delta'"),
    ("CREATE TABLE t (a INT) WITH ('path' = 'p', 'changelog' = 'upsert')",
     r"option 'changelog': Input should be 'append', 'cdf' or 'op-column'"),
    ("CREATE TABLE t (a INT)", r"option 'path' is required, e.g. WITH \('path' = 't'\)"),
    ("CREATE TABLE t (a INT) WITH ('path' = 5)",
     r"option 'path' = 5: values are quoted strings, e.g. 'path' = '\.\.\.'"),
    ("CREATE TABLE t (a TIME(0)) " + DELTA,
     r"table 't', column 'a': unsupported type TIME\(0\) .*supported types are STRING"),
    ("CREATE TABLE t (a INT, b AS nope * 2) " + DELTA,
     r"computed column `b AS nope \* 2` reads 'nope', which does not exist; use one of: a"),
    ("CREATE TABLE t (a INT, b TIMESTAMP(3) AS SYSTEM_METADATA('x')) " + DELTA,
     r"column 'b': a computed column has no declared type; write `b AS SYSTEM_METADATA\('x'\)`"),
    ("CREATE TABLE t (a TIMESTAMP_LTZ(3) METADATA FROM 'offset' VIRTUAL) " + DELTA,
     r"unknown metadata key 'offset'; a Delta changelog provides 'commit_timestamp', "
     r"'commit_version'"),
    ("CREATE TABLE t (commit_version BIGINT METADATA) " + DELTA,
     r"metadata columns are read-only here; add VIRTUAL, e.g. `commit_version BIGINT "
     r"METADATA FROM 'commit_version' VIRTUAL`"),
    ("CREATE TABLE t (a INT, UNIQUE (a)) " + DELTA, r"UNIQUE \(a\) is not supported"),
    ("CREATE TABLE t AS SELECT 1 AS a", r"CREATE TABLE needs a column list"),
    ("CREATE TABLE t (a INT) PARTITIONED BY (a) " + DELTA,
     r"PARTITIONED_BY=\(a\) is not supported; the only clause after the name or column list is "
     r"WITH"),
    ("CREATE TABLE t (a INT) " + DELTA + " ; CREATE FUNCTION f AS 'x'",
     r"CREATE FUNCTION is not supported"),
    ("CREATE TABLE t (\n  a STRING COMMENT 'unclosed\n)",
     r"syntax error at line 2, column 20: expected a closing '"),
]


@pytest.mark.parametrize(("ddl", "message"), TABLE_ERRORS)
def test_bad_ddl_is_refused_with_a_clear_message(ddl: str, message: str) -> None:
    with pytest.raises(DefinitionError, match=message):
        parse_statements(ddl)


def test_syntax_error_names_the_statement_line_in_a_script() -> None:
    script = f"CREATE TABLE a (x INT) {DELTA};\n\nSELECT x FROM a WHERE;\n"
    with pytest.raises(DefinitionError, match=r"SQL script: syntax error at line 3, column 17: "
                                              r"incomplete WHERE: expected an expression"):
        parse_statements(script)


def test_parse_table_wants_exactly_one_create_table() -> None:
    with pytest.raises(DefinitionError, match=r"expected exactly one CREATE TABLE statement, "
                                              r"found QueryStatement"):
        parse_table("SELECT 1")


# -- views -------------------------------------------------------------------------------------

RAW = f"""CREATE TABLE raw_rates (
  currency STRING, rate DECIMAL(38, 10), currency_time TIMESTAMP(3), pt AS PROCTIME(),
  WATERMARK FOR currency_time AS currency_time) {DELTA}"""


def _dedup(select: str, order: str = "currency_time DESC", where: str = "rn = 1",
           inner: str = "*") -> str:
    return (f"CREATE VIEW v AS SELECT {select} FROM (SELECT {inner}, ROW_NUMBER() OVER "
            f"(PARTITION BY currency ORDER BY {order}) AS rn FROM raw_rates) WHERE {where}")


@pytest.mark.parametrize(
    ("ddl", "key", "rowtime", "keep"),
    [
        (_dedup("currency, rate, currency_time"), ("currency",), "currency_time", KeepRow.LAST),
        (_dedup("*", where="rn <= 1"), ("currency",), "currency_time", KeepRow.LAST),
        (_dedup("*", where="1 = rn"), ("currency",), "currency_time", KeepRow.LAST),
        (_dedup("*", where="2 > rn"), ("currency",), "currency_time", KeepRow.LAST),
        (_dedup("currency AS c, currency_time AS t", inner="currency, currency_time"),
         ("c",), "t", KeepRow.LAST),
        (_dedup("currency, rate"), ("currency",), None, KeepRow.LAST),
        (_dedup("currency, currency_time", order="currency_time ASC"), ("currency",),
         "currency_time", KeepRow.FIRST),
        (_dedup("currency, rate, pt", order="pt DESC"), ("currency",), None, KeepRow.LAST),
    ],
)
def test_deduplication_views_infer_key_and_rowtime(
    ddl: str, key: tuple[str, ...], rowtime: str | None, keep: KeepRow
) -> None:
    view = parse_view(ddl, catalog={"raw_rates": parse_table(RAW)})
    assert (view.primary_key, view.rowtime) == (key, rowtime)
    assert view.deduplication is not None and view.deduplication.keep is keep
    assert view.deduplication.source == "raw_rates"
    assert view.kind is (TableKind.VERSIONED if rowtime else TableKind.REGULAR)


@pytest.mark.parametrize(
    "ddl",
    [
        _dedup("*", order="rate DESC"),  # Top-1 by a value, not by a time attribute
        _dedup("*", where="rn = 2"),
        _dedup("*", where="rn > 0"),
        _dedup("rate, currency_time"),  # the key is projected away
        "CREATE VIEW v AS SELECT currency, rate FROM raw_rates",
        "CREATE VIEW v AS SELECT 1 AS one",
        "CREATE VIEW v AS SELECT * FROM raw_rates UNION ALL SELECT * FROM raw_rates",
        "CREATE VIEW v AS SELECT currency, MAX(currency_time) AS t FROM raw_rates "
        "GROUP BY currency",
    ],
)
def test_other_views_are_regular_without_key(ddl: str) -> None:
    view = parse_view(ddl, catalog={"raw_rates": parse_table(RAW)})
    assert view.kind is TableKind.REGULAR and view.rowtime is None
    assert view.primary_key == () or view.deduplication is None


def test_flip132_versioned_view_over_a_table_declared_earlier_in_the_script() -> None:
    script = f"""
    CREATE TABLE rates (
        currency STRING,
        rate DECIMAL(38, 10),
    currency_time TIMESTAMP(3),
    WATERMARK FOR currency_time AS currency_time -- event time
    ) {DELTA};
    CREATE VIEW versioned_rates4 AS -- inferred primary key (currency), event time
    SELECT currency, rate, currency_time
      FROM (
          SELECT *,
          ROW_NUMBER() OVER (PARTITION BY currency ORDER BY currency_time DESC) AS rowNum
    FROM rates )
    WHERE rowNum = 1;
    CREATE VIEW latest_rates2 AS -- No event time and No primary key
    SELECT currency, rate
    FROM rates;
    SELECT * FROM versioned_rates4
    """
    rates, versioned, latest, query = parse_statements(script)
    assert isinstance(rates, TableSpec)
    assert versioned.kind is TableKind.VERSIONED and versioned.primary_key == ("currency",)
    assert latest.kind is TableKind.REGULAR
    assert query == QueryStatement(sql="SELECT * FROM versioned_rates4")


@pytest.mark.parametrize(
    ("ddl", "message"),
    [
        ("CREATE VIEW v AS SELECT * FROM nowhere",
         r"view 'v' reads unknown table 'nowhere'; declare it first"),
        ("CREATE VIEW v (a) AS SELECT currency FROM raw_rates",
         r"a column list after the view name is not supported"),
    ],
)
def test_bad_views_are_refused(ddl: str, message: str) -> None:
    with pytest.raises(DefinitionError, match=message):
        parse_view(ddl, catalog={"raw_rates": parse_table(RAW)})


def test_catalog_lookup_is_case_insensitive_like_spark() -> None:
    view = parse_view("CREATE VIEW v AS SELECT * FROM RAW_RATES",
                      catalog={"raw_rates": parse_table(RAW)})
    assert view.query == "SELECT * FROM RAW_RATES"


# -- queries -----------------------------------------------------------------------------------

JOIN = """SELECT o.order_id, o.amount * r.rate AS amount
FROM orders AS o
{kind} JOIN rates FOR SYSTEM_TIME AS OF {time} AS r
ON o.currency = r.currency AND r.rate > 0"""


@pytest.mark.parametrize(
    ("kind", "time", "expected_kind", "probe"),
    [
        ("", "o.order_time", JoinKind.INNER, "o"),
        ("INNER", "o.proctime", JoinKind.INNER, "o"),
        ("LEFT", "o.order_time", JoinKind.LEFT, "o"),
        ("LEFT OUTER", "`o`.`order_time`", JoinKind.LEFT, "o"),
        ("", "order_time", JoinKind.INNER, "o"),
    ],
)
def test_temporal_joins_are_found(kind: str, time: str, expected_kind: JoinKind,
                                  probe: str) -> None:
    [join] = temporal_joins(JOIN.format(kind=kind, time=time))
    assert join.build_table == "rates" and join.build_alias == "r"
    assert join.probe_alias == probe and join.probe_table == "orders"
    assert join.time_attribute == time.replace("`", "")
    assert join.kind is expected_kind
    assert join.condition == "o.currency = r.currency AND r.rate > 0"


def test_temporal_joins_of_a_query_with_two_of_them_keep_query_order() -> None:
    sql = """SELECT * FROM orders AS o
      JOIN rates FOR SYSTEM_TIME AS OF o.order_time AS r ON o.currency = r.currency
      LEFT JOIN customers FOR SYSTEM_TIME AS OF o.proctime AS c ON o.customer = c.id"""
    assert [(j.build_table, j.kind) for j in temporal_joins(sql)] == [
        ("rates", JoinKind.INNER), ("customers", JoinKind.LEFT)]
    assert temporal_joins("SELECT * FROM orders JOIN rates ON orders.c = rates.c") == []


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("SELECT * FROM orders AS o, rates FOR SYSTEM_TIME AS OF o.order_time AS r "
         "WHERE o.currency = r.currency", r"only read in a join; write `FROM probe AS p"),
        (JOIN.format(kind="RIGHT", time="o.order_time"), r"RIGHT JOIN rates .*temporal joins are "
                                                         r"INNER or LEFT"),
        (JOIN.format(kind="", time="o.order_time + INTERVAL '1' SECOND"),
         r"AS OF must name the probe side's time attribute"),
        ("CREATE TABLE t (a INT)", r"expected a query \(SELECT \.\.\.\)"),
    ],
)
def test_bad_temporal_joins_are_refused(sql: str, message: str) -> None:
    with pytest.raises(DefinitionError, match=message):
        temporal_joins(sql)


@pytest.mark.parametrize(
    ("sql", "tables"),
    [
        (JOIN.format(kind="", time="o.order_time"), ["orders", "rates"]),
        ("WITH x AS (SELECT * FROM a) SELECT * FROM x JOIN b ON x.k = b.k, c", ["a", "b", "c"]),
        ("SELECT * FROM (SELECT * FROM inner_t) AS s WHERE s.k IN (SELECT k FROM other)",
         ["inner_t", "other"]),
        ("SELECT * FROM a UNION ALL SELECT * FROM `b` UNION ALL SELECT * FROM a", ["a", "b"]),
        ("SELECT window_start, COUNT(*) FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(order_time), "
         "INTERVAL '10' MINUTES)) GROUP BY window_start, window_end", ["orders"]),
    ],
)
def test_referenced_tables(sql: str, tables: list[str]) -> None:
    assert referenced_tables(sql) == tables


@pytest.mark.parametrize(
    ("flink", "spark"),
    [
        ("CAST(ts AS TIMESTAMP(3))", "CAST(ts AS TIMESTAMP_NTZ)"),
        ("CAST(ts AS TIMESTAMP_LTZ(3))", "CAST(ts AS TIMESTAMP)"),
        ("CAST(e AS ROW<log_ts TIMESTAMP(3), msg STRING>)",
         "CAST(e AS STRUCT<log_ts: TIMESTAMP_NTZ, msg: STRING>)"),
        ("CAST(s AS VARCHAR(10))", "CAST(s AS STRING)"),
        ("ts - INTERVAL '5' SECOND", "ts - INTERVAL '5' SECOND"),
        ("ts - INTERVAL '0.001' SECOND", "ts - INTERVAL '0.001' SECOND"),
        ("TO_TIMESTAMP(s)", "TO_TIMESTAMP_NTZ(s)"),
        ("to_timestamp(s, 'yyyy-MM-dd')", "TO_TIMESTAMP_NTZ(s, 'yyyy-MM-dd')"),
        ("TO_TIMESTAMP_LTZ(ms, 3)", "TIMESTAMP_MILLIS(ms)"),
        ("TO_TIMESTAMP_LTZ(secs, 0)", "TIMESTAMP_SECONDS(secs)"),
        ("PROCTIME()", "CURRENT_TIMESTAMP()"),
        ("`event`.log_ts", "`event`.log_ts"),
        ("`my col` || 'it''s'", "`my col` || 'it\\'s'"),
        ("TIMESTAMP '2020-01-01 00:00:00'", "CAST('2020-01-01 00:00:00' AS TIMESTAMP_NTZ)"),
    ],
)
def test_flink_expressions_translate_to_spark(flink: str, spark: str) -> None:
    assert to_spark_sql(flink) == spark


def test_queries_translate_to_spark() -> None:
    sql = "SELECT id, PROCTIME() AS pt FROM orders WHERE CAST(ts AS TIMESTAMP(3)) > x"
    assert to_spark(sql) == (
        "SELECT id, CURRENT_TIMESTAMP() AS pt FROM orders WHERE CAST(ts AS TIMESTAMP_NTZ) > x")


@pytest.mark.parametrize(
    ("flink", "message"),
    [
        ("SYSTEM_ROWTIME()", r"SYSTEM_ROWTIME\(\) is provided by the source"),
        ("TO_TIMESTAMP_LTZ(x, 6)", r"precision must be 0 \(epoch seconds\) or 3"),
        ("CAST(x AS TIME)", r"unsupported type TIME|has no Spark equivalent"),
        (JOIN.format(kind="", time="o.order_time"),
         r"FOR SYSTEM_TIME AS OF o.order_time is a temporal join, which has no Spark SQL form"),
        ("SELECT * FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '1' MINUTE))",
         r"window table function over TABLE orders has no Spark SQL form"),
    ],
)
def test_untranslatable_flink_is_refused(flink: str, message: str) -> None:
    with pytest.raises(DefinitionError, match=message):
        to_spark_sql(flink)


def test_to_spark_wants_a_query() -> None:
    with pytest.raises(DefinitionError, match=r"expected one statement or expression, found 2"):
        to_spark("SELECT 1; SELECT 2")


def test_spark_types_of_flink_types() -> None:
    assert spark_type("ROW<log_ts TIMESTAMP(3), at TIMESTAMP_LTZ(3), n ARRAY<DECIMAL(5, 2)>>") == (
        T.StructType([
            T.StructField("log_ts", T.TimestampNTZType()),
            T.StructField("at", T.TimestampType()),
            T.StructField("n", T.ArrayType(T.DecimalType(5, 2))),
        ]))
    assert spark_type("MAP<STRING, BIGINT>") == T.MapType(T.StringType(), T.LongType())
    assert spark_type("BYTES") == T.BinaryType()


def test_translated_expressions_run_in_spark_with_flink_semantics(spark: SparkSession) -> None:
    expressions = {
        "strictly_ascending": "CAST('2024-01-01 00:00:05' AS TIMESTAMP(3)) "
                              "- INTERVAL '0.001' SECOND",
        "bounded": "TO_TIMESTAMP('2024-01-01 00:00:05') - INTERVAL '5' SECOND",
        "ltz": "TO_TIMESTAMP_LTZ(1704067200000, 3)",
        "nested": "CAST(ROW(TIMESTAMP '2024-01-01 00:00:00', 'm') AS ROW<log_ts TIMESTAMP(3), "
                  "msg STRING>).log_ts",
        "minutes": "TIMESTAMP '2024-01-01 00:00:00' + INTERVAL '10' MINUTE",
    }
    select = ", ".join(f"{to_spark_sql(text)} AS {name}" for name, text in expressions.items())
    frame = spark.sql(f"SELECT {select}")
    assert dict(frame.dtypes) == {"strictly_ascending": "timestamp_ntz", "bounded": "timestamp_ntz",
                                  "ltz": "timestamp", "nested": "timestamp_ntz",
                                  "minutes": "timestamp_ntz"}
    row = frame.first()
    assert row is not None
    assert row.strictly_ascending == dt.datetime(2024, 1, 1, 0, 0, 4, 999000)
    assert row.bounded == dt.datetime(2024, 1, 1)
    assert row.ltz.astimezone(dt.UTC) == dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
    assert row.nested == dt.datetime(2024, 1, 1)
    assert row.minutes == dt.datetime(2024, 1, 1, 0, 10)
