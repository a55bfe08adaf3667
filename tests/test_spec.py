"""Table and view specs built in Python: canonical text, validation, FLIP-66 properties."""

from __future__ import annotations

import pytest

from chronolake.errors import DefinitionError
from chronolake.schema import (
    ComputedColumn,
    DeltaOptions,
    MetadataColumn,
    MetadataKey,
    PhysicalColumn,
    TableKind,
    TableSpec,
    ViewSpec,
    WatermarkSpec,
)

OPTIONS = DeltaOptions(path="t")


def _table(*columns: object, watermark: WatermarkSpec | None = None,
           primary_key: tuple[str, ...] = ()) -> TableSpec:
    return TableSpec(name="t", columns=columns, watermark=watermark, primary_key=primary_key,
                     options=OPTIONS)


def _ts(name: str = "ts", type_: str = "TIMESTAMP(3)") -> PhysicalColumn:
    return PhysicalColumn(name=name, type=type_)


@pytest.mark.parametrize(
    ("written", "canonical"),
    [
        ("decimal(38,10)", "DECIMAL(38, 10)"),
        ("DECIMAL(38, 10)", "DECIMAL(38, 10)"),
        ("decimal", "DECIMAL(10, 0)"),
        ("string", "STRING"),
        ("integer", "INT"),
        ("timestamp(3)", "TIMESTAMP(3)"),
        ("TIMESTAMP", "TIMESTAMP(6)"),
        ("TIMESTAMP(3) WITHOUT TIME ZONE", "TIMESTAMP(3)"),
        ("timestamp_ltz(3)", "TIMESTAMP_LTZ(3)"),
        ("TIMESTAMP(3) WITH LOCAL TIME ZONE", "TIMESTAMP_LTZ(3)"),
        ("row<log_ts timestamp(3), `message` string>", "ROW<log_ts TIMESTAMP(3), message STRING>"),
        ("ROW(a INT, b ROW<c BIGINT>)", "ROW<a INT, b ROW<c BIGINT>>"),
        ("ROW<`type` INT, `select` INT>", "ROW<type INT, `select` INT>"),
        ("array<map<string, bigint>>", "ARRAY<MAP<STRING, BIGINT>>"),
        ("bytes", "BYTES"),
    ],
)
def test_types_are_canonical(written: str, canonical: str) -> None:
    assert PhysicalColumn(name="c", type=written).type == canonical


@pytest.mark.parametrize("written", ["TIME(0)", "foo", "TIMESTAMP WITH TIME ZONE",
                                     "ROW<a INTERVAL>", "DECIMAL(38,"])
def test_unsupported_types_are_refused_with_the_supported_list(written: str) -> None:
    with pytest.raises(DefinitionError, match=r"unsupported type .*supported types are STRING"):
        PhysicalColumn(name="c", type=written)


@pytest.mark.parametrize(
    ("written", "canonical"),
    [
        ("ts - interval '5' second", "ts - INTERVAL '5' SECOND"),
        ("`ts`   -   INTERVAL '0.001' SECOND", "ts - INTERVAL '0.001' SECOND"),
        ("`f1`.`q2` - INTERVAL '5' SECOND", "f1.q2 - INTERVAL '5' SECOND"),
        ("to_timestamp(ts_string)", "TO_TIMESTAMP(ts_string)"),
        ("proctime()", "PROCTIME()"),
        ("`timestamp` + 1", "`timestamp` + 1"),
        ("cast(x as row<a int>)", "CAST(x AS ROW<a INT>)"),
    ],
)
def test_expressions_are_canonical(written: str, canonical: str) -> None:
    assert ComputedColumn(name="c", expression=written).expression == canonical


def test_computed_column_recognises_proctime_and_system_rowtime() -> None:
    assert ComputedColumn(name="pt", expression="proctime()").is_proctime
    assert not ComputedColumn(name="pt", expression="PROCTIME_X()").is_proctime
    assert ComputedColumn(name="rt", expression="SYSTEM_ROWTIME()").is_system_rowtime


def test_equal_specs_from_differently_written_text_compare_equal() -> None:
    left = _table(PhysicalColumn(name="rate", type="decimal(38,10)"), _ts(type_="timestamp(3)"),
                  watermark=WatermarkSpec(rowtime="`ts`", expression="ts - interval '5' second"))
    right = _table(PhysicalColumn(name="rate", type="DECIMAL(38, 10)"), _ts(),
                   watermark=WatermarkSpec(rowtime="ts", expression="ts - INTERVAL '5' SECOND"))
    assert left == right and hash(left) == hash(right)


def test_watermark_datatype_is_taken_from_the_rowtime_column() -> None:
    spec = _table(_ts(type_="TIMESTAMP_LTZ(3)"), watermark=WatermarkSpec(rowtime="ts",
                                                                          expression="ts"))
    assert spec.watermark is not None and spec.watermark.datatype == "TIMESTAMP_LTZ(3)"


def test_an_explicit_watermark_datatype_must_match_the_column() -> None:
    with pytest.raises(DefinitionError, match=r"datatype TIMESTAMP\(3\) does not match .*"
                       r"TIMESTAMP_LTZ\(3\); leave datatype out"):
        _table(_ts(type_="TIMESTAMP_LTZ(3)"),
               watermark=WatermarkSpec(rowtime="ts", expression="ts", datatype="TIMESTAMP(3)"))


def test_nested_rowtime_takes_the_field_type() -> None:
    spec = _table(PhysicalColumn(name="event", type="ROW<log_ts TIMESTAMP_LTZ(3), msg STRING>"),
                  watermark=WatermarkSpec(rowtime="event.log_ts", expression="event.log_ts"))
    assert spec.rowtime == "event.log_ts"
    assert spec.watermark is not None and spec.watermark.datatype == "TIMESTAMP_LTZ(3)"


@pytest.mark.parametrize(
    ("columns", "rowtime", "expression", "message"),
    [
        ((_ts(),), "missing", "missing", r"column 'missing' does not exist; use one of: ts"),
        ((_ts(),), "ts", "ts - late", r"the strategy reads 'late', which does not exist"),
        ((_ts("ts", "STRING"),), "ts", "ts", r"must be TIMESTAMP\(p\) or TIMESTAMP_LTZ\(p\) with "
                                            r"p <= 3, got STRING; .*CAST\(ts AS TIMESTAMP\(3\)\)"),
        ((_ts("ts", "TIMESTAMP"),), "ts", "ts", r"got TIMESTAMP\(6\)"),
        ((PhysicalColumn(name="e", type="ROW<a INT>"),), "e.ts", "e.ts", r"has no field 'ts'"),
        ((PhysicalColumn(name="e", type="ROW<a INT>"),), "e.a", "e.a", r"got INT"),
        ((ComputedColumn(name="pt", expression="PROCTIME()"),), "pt", "pt",
         r"a PROCTIME\(\) column cannot be a rowtime attribute"),
        ((_ts("s", "STRING"), ComputedColumn(name="rt", expression="CAST(s AS BIGINT)")),
         "rt", "rt", r"got BIGINT"),
        ((_ts(),), "ts", "SYSTEM_WATERMARK()",
         r"SYSTEM_WATERMARK\(\) needs a rowtime derived with SYSTEM_ROWTIME\(\); declare "
         r"`ts AS SYSTEM_ROWTIME\(\)`"),
    ],
)
def test_bad_watermarks_are_refused(columns: tuple[object, ...], rowtime: str, expression: str,
                                    message: str) -> None:
    with pytest.raises(DefinitionError, match=message):
        _table(*columns, watermark=WatermarkSpec(rowtime=rowtime, expression=expression))


def test_system_watermark_on_a_system_rowtime_column_is_accepted() -> None:
    spec = _table(ComputedColumn(name="rt", expression="SYSTEM_ROWTIME()"),
                  watermark=WatermarkSpec(rowtime="rt", expression="SYSTEM_WATERMARK()"))
    assert spec.watermark is not None and spec.watermark.datatype == "TIMESTAMP(3)"


def test_computed_rowtime_type_is_inferred_from_to_timestamp() -> None:
    spec = _table(PhysicalColumn(name="s", type="STRING"),
                  ComputedColumn(name="rt", expression="TO_TIMESTAMP(s)"),
                  watermark=WatermarkSpec(rowtime="rt", expression="rt - INTERVAL '1' SECOND"))
    assert spec.rowtime == "rt" and spec.kind is TableKind.REGULAR


@pytest.mark.parametrize(
    ("columns", "key", "message"),
    [
        ((_ts(),), ("id",),
         r"primary key column 'id' does not exist; declare it or use one of: ts"),
        ((_ts(), ComputedColumn(name="pt", expression="PROCTIME()")), ("pt",),
         r"primary key column 'pt' is a computed column; a primary key may only use physical"),
    ],
)
def test_bad_primary_keys_are_refused(columns: tuple[object, ...], key: tuple[str, ...],
                                      message: str) -> None:
    with pytest.raises(DefinitionError, match=message):
        _table(*columns, primary_key=key)


def test_duplicate_columns_are_refused() -> None:
    with pytest.raises(DefinitionError, match=r"column\(s\) 'ts' declared more than once"):
        _table(_ts(), _ts("TS"))


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("nope + 1", r"reads 'nope', which does not exist; use one of: s, ts"),
        ("rt2", r"reads 'rt2', which is another computed column; computed columns may only read"),
    ],
)
def test_computed_columns_must_read_physical_or_metadata_columns(expression: str,
                                                                 message: str) -> None:
    with pytest.raises(DefinitionError, match=message):
        _table(PhysicalColumn(name="s", type="STRING"), _ts(),
               ComputedColumn(name="rt2", expression="TO_TIMESTAMP(s)"),
               ComputedColumn(name="c", expression=expression))


def test_computed_column_may_read_a_nested_field_and_metadata() -> None:
    spec = _table(PhysicalColumn(name="e", type="ROW<s STRING>"),
                  MetadataColumn(name="v", type="BIGINT", key=MetadataKey.COMMIT_VERSION),
                  ComputedColumn(name="c", expression="CONCAT(e.s, CAST(v AS STRING))"))
    assert [c.kind for c in spec.columns] == ["physical", "metadata", "computed"]


@pytest.mark.parametrize(
    ("key", "type_", "expected"),
    [(MetadataKey.COMMIT_VERSION, "INT", "BIGINT"),
     (MetadataKey.COMMIT_TIMESTAMP, "STRING", r"TIMESTAMP_LTZ\(3\)")],
)
def test_metadata_column_type_must_fit_its_key(key: MetadataKey, type_: str, expected: str) -> None:
    with pytest.raises(DefinitionError, match=rf"'{key}' is read as {expected}, not {type_}"):
        MetadataColumn(name="m", type=type_, key=key)


def test_versioned_needs_both_primary_key_and_rowtime() -> None:
    watermark = WatermarkSpec(rowtime="ts", expression="ts")
    assert _table(_ts(), watermark=watermark, primary_key=("ts",)).kind is TableKind.VERSIONED
    assert _table(_ts(), watermark=watermark).kind is TableKind.REGULAR
    assert _table(_ts(), primary_key=("ts",)).kind is TableKind.REGULAR


def test_flip66_properties_have_the_exact_keys_and_round_trip() -> None:
    spec = _table(PhysicalColumn(name="f1", type="ROW<q2 TIMESTAMP(3)>"),
                  watermark=WatermarkSpec(rowtime="f1.q2",
                                          expression="f1.q2 - INTERVAL '5' SECOND"))
    properties = spec.properties()
    assert {k: v for k, v in properties.items() if k.startswith("schema.")} == {
        "schema.watermark.0.rowtime": "f1.q2",
        "schema.watermark.0.strategy.expression": "f1.q2 - INTERVAL '5' SECOND",
        "schema.watermark.0.strategy.datatype": "TIMESTAMP(3)",
    }
    assert WatermarkSpec.from_properties(properties) == spec.watermark


def test_flip66_quoted_property_form_reads_back_as_the_same_spec() -> None:
    """FLIP-66 writes the expression with quoted identifiers: `f1`.`q2`."""
    stored = {
        "schema.watermark.0.rowtime": "f1.q2",
        "schema.watermark.0.strategy.expression": "`f1`.`q2` - INTERVAL '5' SECOND",
        "schema.watermark.0.strategy.datatype": "TIMESTAMP(3)",
    }
    assert WatermarkSpec.from_properties(stored) == WatermarkSpec(
        rowtime="f1.q2", expression="f1.q2 - INTERVAL '5' SECOND")
    assert WatermarkSpec.from_properties({"connector": "delta"}) is None


def test_table_spec_survives_a_json_round_trip() -> None:
    spec = _table(_ts(type_="TIMESTAMP_LTZ(3)"), PhysicalColumn(name="k", type="STRING"),
                  watermark=WatermarkSpec(rowtime="ts", expression="ts"), primary_key=("k",))
    assert TableSpec.model_validate_json(spec.model_dump_json()) == spec


def test_view_query_is_canonical() -> None:
    view = ViewSpec(name="v", query="select  a from   t where `a` > 1")
    assert view.query == "SELECT a FROM t WHERE a > 1"
    assert view.kind is TableKind.REGULAR


def test_rowtime_must_be_a_column_path() -> None:
    with pytest.raises(DefinitionError, match=r"'ts \+ 1' is not a column path"):
        WatermarkSpec(rowtime="ts + 1", expression="ts")
