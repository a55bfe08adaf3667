"""A declared table's changelog and state: cdf, append and op-column tables."""

from __future__ import annotations

from pathlib import Path

import pytest
from deltatables import update_rows, write_commits
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession

from chronolake.errors import DefinitionError
from chronolake.lake import (
    ARRIVAL_ORDER,
    DeltaRsBackend,
    LakeBackend,
    read_changelog,
    read_table_state,
)
from chronolake.lake.layout import table_location
from chronolake.location import Location, as_location
from chronolake.schema import ChangelogMode, DeltaOptions, PhysicalColumn, TableSpec

pytestmark = pytest.mark.spark


def _spec(name: str, *, primary_key: tuple[str, ...] = ("currency",), **options: str) -> TableSpec:
    return TableSpec(
        name=name,
        columns=(
            PhysicalColumn(name="currency", type="STRING"),
            PhysicalColumn(name="rate", type="DOUBLE"),
        ),
        primary_key=primary_key,
        options=DeltaOptions.from_map({"path": name, **options}, table=name),
    )


@pytest.fixture(scope="module")
def backend(spark: SparkSession) -> LakeBackend:
    return DeltaRsBackend(spark)


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`cdc`: an op-column changelog mixing Flink and Debezium codes over two commits."""
    root = tmp_path_factory.mktemp("lake")
    write_commits(
        root / "cdc",
        [
            [
                {"currency": "EUR", "rate": 1.0, "op": "c"},
                {"currency": "USD", "rate": 2.0, "op": "+I"},
                {"currency": "CHF", "rate": 5.0, "op": "r"},
            ],
            [
                {"currency": "EUR", "rate": 1.0, "op": "-U"},
                {"currency": "EUR", "rate": 11.0, "op": "u"},
                {"currency": "USD", "rate": 2.0, "op": "d"},
                {"currency": "CHF", "rate": 5.0, "op": "-D"},
                {"currency": "CHF", "rate": 6.0, "op": "+I"},
                {"currency": "GBP", "rate": 3.0, "op": "+U"},
            ],
        ],
        cdf=False,
    )
    return root


CDC = _spec("cdc", **{"changelog": "op-column", "changelog.op-column": "op"})


def test_op_column_maps_flink_and_debezium_codes(
    spark: SparkSession, backend: LakeBackend, lake: Path
) -> None:
    rows = read_changelog(spark, backend, CDC, lake, 0).orderBy(*ARRIVAL_ORDER).collect()
    assert "op" not in rows[0].asDict()
    assert [(r.currency, r.rate, r._row_kind, r._commit_version) for r in rows] == [
        ("EUR", 1.0, "+I", 0),
        ("USD", 2.0, "+I", 0),
        ("CHF", 5.0, "+I", 0),
        ("EUR", 1.0, "-U", 1),
        ("EUR", 11.0, "+U", 1),
        ("USD", 2.0, "-D", 1),
        ("CHF", 5.0, "-D", 1),
        ("CHF", 6.0, "+I", 1),
        ("GBP", 3.0, "+U", 1),
    ]


def test_op_column_state_is_the_last_change_per_key(
    spark: SparkSession, backend: LakeBackend, lake: Path
) -> None:
    state = read_table_state(spark, backend, CDC, lake)
    assert state.columns == ["currency", "rate"]
    assert sorted(map(tuple, state.collect())) == [("CHF", 6.0), ("EUR", 11.0), ("GBP", 3.0)]
    at_zero = sorted(map(tuple, read_table_state(spark, backend, CDC, lake, 0).collect()))
    assert at_zero == [("CHF", 5.0), ("EUR", 1.0), ("USD", 2.0)]


def test_unknown_operation_fails_the_read_naming_the_value(
    spark: SparkSession, backend: LakeBackend, tmp_path: Path
) -> None:
    write_commits(tmp_path / "cdc", [[{"currency": "EUR", "rate": 1.0, "op": "upsert"}]])
    changes = read_changelog(spark, backend, CDC, tmp_path, 0)
    with pytest.raises(
        PySparkException,
        match=r"table 'cdc': operation column 'op' holds 'upsert', expected one of \+I, -U, "
        r"\+U, -D, c, r, u, d",
    ):
        changes.collect()


def test_op_column_state_needs_a_primary_key(
    spark: SparkSession, backend: LakeBackend, lake: Path
) -> None:
    options = {"changelog": "op-column", "changelog.op-column": "op"}
    keyless = _spec("cdc", primary_key=(), **options)
    with pytest.raises(DefinitionError, match=r"table 'cdc': .*needs a key; expected PRIMARY KEY"):
        read_table_state(spark, backend, keyless, lake)


def test_op_column_option_is_required(
    spark: SparkSession, backend: LakeBackend, lake: Path
) -> None:
    spec = TableSpec(
        name="cdc",
        columns=(PhysicalColumn(name="currency", type="STRING"),),
        options=DeltaOptions(path="cdc", changelog=ChangelogMode.OP_COLUMN),
    )
    with pytest.raises(DefinitionError, match="expected e.g. 'changelog.op-column' = 'op'"):
        read_changelog(spark, backend, spec, lake, 0)


def test_cdf_and_append_tables_read_by_their_changelog_option(
    spark: SparkSession, backend: LakeBackend, tmp_path: Path
) -> None:
    write_commits(tmp_path / "rates", [[{"currency": "EUR", "rate": 1.0}]])
    update_rows(tmp_path / "rates", "currency = 'EUR'", {"rate": "2.0"})
    cdf = _spec("rates", changelog="cdf")
    kinds = read_changelog(spark, backend, cdf, tmp_path, 1).orderBy(*ARRIVAL_ORDER).collect()
    assert [(r.rate, r._row_kind) for r in kinds] == [(1.0, "-U"), (2.0, "+U")]
    appended = _spec("rates", changelog="append")
    inserts = read_changelog(spark, backend, appended, tmp_path, 0, 0).collect()
    assert [(r.rate, r._row_kind) for r in inserts] == [(1.0, "+I")]
    state = read_table_state(spark, None, cdf, tmp_path, 0).collect()  # default backend
    assert [tuple(r) for r in state] == [("EUR", 1.0)]


def test_a_table_path_resolves_against_a_folder_lake(tmp_path: Path) -> None:
    rates = Location(str(tmp_path / "rates"))
    assert table_location(tmp_path, "rates") == rates
    assert table_location(str(tmp_path), "fx/../rates") == rates
    assert table_location(tmp_path.as_uri(), "rates") == rates
    assert table_location(tmp_path, "/data/rates") == Location("/data/rates")
    assert table_location(tmp_path, "s3://other/rates") == Location("s3://other/rates")
    assert table_location(tmp_path, "rates").path == tmp_path / "rates"


def test_a_table_path_under_a_bucket_lake_stays_a_uri() -> None:
    """`Path(root) / path` turned `s3://lake1/lake` into `s3:/lake1/lake/orders`, which no
    store recognises: a run on a bucket failed at its first read."""
    assert str(table_location("s3://lake1/lake", "orders")) == "s3://lake1/lake/orders"
    assert str(table_location("s3://lake1/lake/", "cdc/rates")) == "s3://lake1/lake/cdc/rates"
    assert str(table_location("s3://lake1/lake", "gs://other/rates")) == "gs://other/rates"
    assert table_location("s3://lake1/lake", "file:///data/rates").path == Path("/data/rates")


def test_a_uri_location_is_never_taken_for_a_local_path(tmp_path: Path) -> None:
    """One location type for folders and URIs: joined with `/` as each needs, shown to
    Dagster as a URI, and only a folder has a local path."""
    bucket = as_location("s3://lake1/lake/") / "_chronolake/views/orders"
    assert not bucket.is_local and bucket.uri == "s3://lake1/lake/_chronolake/views/orders"
    with pytest.raises(TypeError, match="s3://lake1/lake/_chronolake/views/orders"):
        bucket.path  # noqa: B018
    folder = as_location(tmp_path) / "orders"
    assert folder.is_local and folder.uri == (tmp_path / "orders").as_uri()
    assert as_location(folder) is folder and as_location(folder.uri) == folder


def test_reads_of_a_declared_table_go_through_the_one_resolver(
    spark: SparkSession, tmp_path: Path
) -> None:
    """A relative `path` under a lake given as a `file://` URI: read where `table_location`
    says, which the catalog's source checks ask too."""
    write_commits(tmp_path / "rates", [[{"currency": "EUR", "rate": 1.0}]])
    state = read_table_state(spark, None, _spec("rates"), tmp_path.as_uri()).collect()
    assert [tuple(r) for r in state] == [("EUR", 1.0)]
