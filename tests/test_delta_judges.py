"""Delta Lake's own implementation judges chronolake's Delta tables, and chronolake reads
what Delta's own writer writes.

These need Delta's JVM classes in the session: they run in the delta-spark process of
`./dev test` (`CHRONOLAKE_BACKEND=delta-spark pytest -m lake_contract`).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from _orders_and_rates import ENRICHED, ORDERS_AND_RATES, order_row, rate_row
from deltatables import delete_rows, update_rows, write_commits
from pyspark.sql import DataFrame, SparkSession

from chronolake import Catalog
from chronolake.cli.output import print_feed
from chronolake.errors import SourceError
from chronolake.lake import ARRIVAL_ORDER, DeltaRsBackend, DeltaSparkBackend, delta_spark_available
from chronolake.location import as_location
from chronolake.runtime.derived import DerivedTable
from chronolake.spark.session import session_settings

pytestmark = [pytest.mark.spark, pytest.mark.lake_contract]

PIPELINE = ORDERS_AND_RATES + ENRICHED + """
CREATE VIEW per_currency AS
SELECT window_start, window_end, currency, COUNT(*) AS orders, SUM(usd) AS usd
FROM TABLE(TUMBLE(TABLE enriched, DESCRIPTOR(order_time), INTERVAL '10' MINUTES))
GROUP BY window_start, window_end, currency;
"""


@pytest.fixture(autouse=True)
def _needs_delta(spark: SparkSession) -> None:
    if not delta_spark_available(spark):
        pytest.skip("Delta's JVM classes are not in this session: run with "
                    "CHRONOLAKE_BACKEND=delta-spark (./dev test runs it so)")


def _same_rows(left: DataFrame, right: DataFrame) -> bool:
    return left.exceptAll(right).isEmpty() and right.exceptAll(left).isEmpty()


def _delta_tables(root: Path) -> list[Path]:
    return sorted(log.parent for log in root.rglob("_delta_log") if any(log.glob("*.json")))


def _run_pipeline(catalog: Catalog, lake: Path) -> None:
    """Orders, rates, a correction, a cancellation and a late rate: every table chronolake
    writes gets commits (outputs with change data, late rows, state)."""
    catalog.declare(PIPELINE)
    write_commits(lake / "rates", [[rate_row("EUR", 2, 0), rate_row("USD", 1, 0)]])
    write_commits(lake / "orders", [[order_row(i, 10 * i, i) for i in range(1, 9)]])
    write_commits(lake / "rates", [[rate_row("EUR", 3, 30), rate_row("USD", 1, 30)]])
    for view in ("enriched", "per_currency"):
        DerivedTable(catalog, view).run()
    update_rows(lake / "orders", "order_id = 2", {"amount": "99"})
    delete_rows(lake / "orders", "order_id = 3")
    write_commits(lake / "orders", [[order_row(20, 5, 35)]])
    write_commits(lake / "rates", [[rate_row("EUR", 4, 45), rate_row("USD", 1, 45)]])
    for view in ("enriched", "per_currency"):
        DerivedTable(catalog, view).run()


@pytest.fixture(scope="module")
def embedded_lake(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The pipeline run on the embedded backend, whose tables Delta then judges."""
    if not delta_spark_available(spark):
        pytest.skip("Delta's JVM classes are not in this session")
    lake = tmp_path_factory.mktemp("embedded")
    _run_pipeline(Catalog(lake, spark, backend="delta-rs"), lake)
    return lake


def test_delta_reads_every_table_chronolake_writes_with_delta_rs(
    spark: SparkSession, embedded_lake: Path
) -> None:
    """Outputs, late rows and state written by the embedded backend: Delta's reader returns
    the rows delta-rs's reader does, table by table."""
    tables = _delta_tables(embedded_lake / "_chronolake")
    assert len(tables) >= 4, tables  # two outputs and their state at least
    embedded = DeltaRsBackend(spark)
    for table in tables:
        by_delta = spark.read.format("delta").load(str(table))
        assert _same_rows(by_delta, embedded.snapshot(table)), table


def test_delta_change_feed_reads_the_row_kinds_chronolake_wrote(
    spark: SparkSession, embedded_lake: Path
) -> None:
    """The correction is `update_preimage`/`update_postimage` and the cancellation `delete`
    in Delta's own change-feed reader, as chronolake wrote them (`-U`/`+U`/`-D`)."""
    output = embedded_lake / "_chronolake" / "views" / "enriched"
    feed = (spark.read.format("delta").option("readChangeFeed", "true")
            .option("startingVersion", 0).load(str(output)))
    kinds = {(r["order_id"], r["_change_type"]) for r in
             feed.select("order_id", "_change_type").collect()}
    assert {(2, "update_preimage"), (2, "update_postimage"), (3, "delete")} <= kinds
    ours = DeltaRsBackend(spark).changes(output, 0)
    theirs = feed.selectExpr(
        *[f"`{c}`" for c in ours.columns if not c.startswith("_")],
        "CASE _change_type WHEN 'insert' THEN '+I' WHEN 'update_preimage' THEN '-U' "
        "WHEN 'update_postimage' THEN '+U' ELSE '-D' END AS _row_kind",
        "_commit_version",
    )
    assert _same_rows(ours.select(*theirs.columns), theirs)


def test_delta_spark_commits_every_table_chronolake_writes_through_spark(
    spark: SparkSession, embedded_lake: Path, tmp_path: Path
) -> None:
    """With delta-spark chosen, Delta's JVM writer commits outputs, late rows and state, and
    the outputs equal the embedded backend's row for row."""
    jvm_lake = tmp_path / "jvm"
    _run_pipeline(Catalog(jvm_lake, spark, backend="delta-spark"), jvm_lake)
    jvm = DeltaSparkBackend(spark)
    for table in _delta_tables(jvm_lake / "_chronolake"):
        engine = jvm.commit_infos(table, 0, 0)[0].get("engineInfo", "")
        assert str(engine).startswith("Apache-Spark/") and "Delta-Lake/4.4" in str(engine), (
            table, engine)
    for view in ("enriched", "per_currency"):
        output = Path("_chronolake") / "views" / view
        mine = jvm.snapshot(jvm_lake / output)
        assert _same_rows(mine, DeltaRsBackend(spark).snapshot(embedded_lake / output)), view


def test_chronolake_reads_sources_delta_wrote_with_merge_deletion_vectors_and_optimize(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A CDC source kept by Delta itself: MERGE with deletion vectors, OPTIMIZE and VACUUM,
    read through both backends as the changelog Delta's own change feed reports, and counted
    as `chronolake feed` counts new commits."""
    path = str(tmp_path / "rates")
    spark.sql(
        f"CREATE TABLE delta.`{path}` (currency STRING, rate BIGINT, currency_time TIMESTAMP) "
        "USING delta TBLPROPERTIES ('delta.enableChangeDataFeed' = 'true', "
        "'delta.enableDeletionVectors' = 'true')"
    )
    nine = "TIMESTAMP'2026-11-02 09:00:00'"
    spark.sql(f"INSERT INTO delta.`{path}` VALUES ('EUR', 2, {nine}), ('USD', 1, {nine}), "
              f"('GBP', 3, {nine})")
    spark.sql(
        f"MERGE INTO delta.`{path}` t USING (SELECT 'EUR' AS currency, 5L AS rate, "
        "TIMESTAMP'2026-11-02 09:10:00' AS currency_time UNION ALL SELECT 'JPY', 7L, "
        "TIMESTAMP'2026-11-02 09:10:00') s ON t.currency = s.currency "
        "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"
    )
    spark.sql(f"DELETE FROM delta.`{path}` WHERE currency = 'GBP'")
    spark.sql(f"OPTIMIZE delta.`{path}`")
    expected = (spark.read.format("delta").option("readChangeFeed", "true")
                .option("startingVersion", 0).load(path)
                .selectExpr("currency", "rate", "_change_type", "_commit_version"))
    for backend in (DeltaRsBackend(spark), DeltaSparkBackend(spark)):
        ours = _as_change_types(
            backend.changes(path, 0).orderBy(*ARRIVAL_ORDER), "currency", "rate")
        assert _same_rows(ours, expected), backend.kind
        assert _same_rows(backend.snapshot(path),
                          spark.read.format("delta").load(path)), backend.kind
    print_feed({"rates": as_location(path)}, {"rates": 0}, {"rates": 4})
    assert capsys.readouterr().out == (
        "rates: rows appended 4, updated 1, deleted 1 (Delta versions 1-4)\n"
    )


def _as_change_types(changes: DataFrame, *columns: str) -> DataFrame:
    """chronolake's changelog in the terms of Delta's change feed."""
    kinds = {"+I": "insert", "-U": "update_preimage", "+U": "update_postimage", "-D": "delete"}
    change_type = ("CASE _row_kind " + " ".join(f"WHEN '{k}' THEN '{v}'" for k, v in
                                                  kinds.items()) + " END AS _change_type")
    return changes.selectExpr(*columns, change_type, "_commit_version")


def test_chronolake_reads_sources_delta_wrote_with_column_mapping_v2_checkpoints_and_vacuum(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Delta's own features on a CDC source: columns mapped by name (a rename), v2
    checkpoints every two commits, and VACUUM after OPTIMIZE; both backends read the
    changelog Delta's change feed reports, under the column's new name."""
    path = str(tmp_path / "rates")
    spark.sql(
        f"CREATE TABLE delta.`{path}` (currency STRING, price BIGINT) USING delta "
        "TBLPROPERTIES ('delta.enableChangeDataFeed' = 'true', "
        "'delta.columnMapping.mode' = 'name', 'delta.checkpointPolicy' = 'v2', "
        "'delta.checkpointInterval' = '2', 'delta.enableDeletionVectors' = 'true')"
    )
    spark.sql(f"INSERT INTO delta.`{path}` VALUES ('EUR', 2), ('USD', 1), ('GBP', 3)")
    spark.sql(f"ALTER TABLE delta.`{path}` RENAME COLUMN price TO rate")
    renamed = DeltaSparkBackend(spark).latest_version(path)
    spark.sql(f"UPDATE delta.`{path}` SET rate = 5 WHERE currency = 'EUR'")
    backends = (DeltaRsBackend(spark), DeltaSparkBackend(spark))
    for backend in backends:  # rows written before the rename read under the new name
        update = backend.changes(path, renamed + 1).select("currency", "rate", "_row_kind")
        assert sorted(map(tuple, update.collect())) == [("EUR", 2, "-U"), ("EUR", 5, "+U")]
    spark.sql(f"OPTIMIZE delta.`{path}`")
    with session_settings(spark, {
        "spark.databricks.delta.retentionDurationCheck.enabled": "false"
    }):
        spark.sql(f"VACUUM delta.`{path}` RETAIN 0 HOURS")
    vacuumed = DeltaSparkBackend(spark).latest_version(path)
    spark.sql(f"DELETE FROM delta.`{path}` WHERE currency = 'GBP'")
    spark.sql(f"INSERT INTO delta.`{path}` VALUES ('JPY', 7)")
    log = Path(path) / "_delta_log"
    assert any(".checkpoint." in p.name and not p.name.endswith(".checkpoint.parquet")
               for p in log.iterdir()), "Delta wrote v2 checkpoints"
    delta_feed = (spark.read.format("delta").option("readChangeFeed", "true")
                  .option("startingVersion", vacuumed + 1).load(path)
                  .selectExpr("currency", "rate", "_change_type", "_commit_version"))
    for backend in backends:
        ours = _as_change_types(
            backend.changes(path, vacuumed + 1).orderBy(*ARRIVAL_ORDER), "currency", "rate")
        assert _same_rows(ours, delta_feed), backend.kind
        assert _same_rows(backend.snapshot(path),
                          spark.read.format("delta").load(path)), backend.kind
        with pytest.raises(SourceError, match="missing \\(removed by VACUUM\\)"):
            backend.changes(path, renamed + 1)


def test_a_table_feature_chronolake_cannot_read_is_refused_by_name_on_either_backend(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Delta widens a column's type (the `typeWidening` feature): old files keep the narrow
    type, which chronolake's reader does not widen, so it refuses the table by name."""
    path = str(tmp_path / "widened")
    spark.sql(f"CREATE TABLE delta.`{path}` (currency STRING, rate INT) USING delta "
              "TBLPROPERTIES ('delta.enableChangeDataFeed' = 'true', "
              "'delta.enableTypeWidening' = 'true')")
    spark.sql(f"INSERT INTO delta.`{path}` VALUES ('EUR', 2)")
    spark.sql(f"ALTER TABLE delta.`{path}` ALTER COLUMN rate TYPE BIGINT")
    for backend in (DeltaRsBackend(spark), DeltaSparkBackend(spark)):
        with pytest.raises(SourceError, match="'typeWidening'.*cannot read"):
            backend.changes(path, 0)
