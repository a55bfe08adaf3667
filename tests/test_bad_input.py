"""Bad input: each stops the run with a clear error and changes nothing, or (an unparsable
rowtime, a new column) is handled and counted.

Every test starts from a copy of one tiny lake on which `orders_enriched` ran once,
so only the runs that succeed cost Spark jobs: the checks run on the Delta log first.
"""

from __future__ import annotations

import random
import shutil
from collections.abc import Callable
from datetime import timedelta
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest
from _crash import (
    EXERCISED,
    add_batch,
    build_tiny_lake,
    delta_rows,
    files_under,
)
from deltalake import DeltaTable, write_deltalake
from deltatables import table_rows
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from chronolake import Catalog, full_refresh
from chronolake.demo.lake import DEMO_START, ORDERS_SCHEMA, append_orders
from chronolake.errors import SourceError, SourceRewrittenError
from chronolake.lake.layout import output_path
from chronolake.runtime.derived import DerivedTable
from chronolake.runtime.result import RunStatus
from chronolake.watermarks import REASON_COLUMN, LateReason

pytestmark = pytest.mark.spark

VIEW = "orders_enriched"


@pytest.fixture(scope="module")
def after_first_run(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny lake on which `orders_enriched` ran once (batch 0 consumed)."""
    lake = tmp_path_factory.mktemp("bad_input") / "lake"
    result = DerivedTable(build_tiny_lake(lake, spark), VIEW).run()
    assert result.status is RunStatus.COMMITTED and result.figures["rows_out"] > 0
    return lake


@pytest.fixture
def lake(after_first_run: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "lake"
    shutil.copytree(after_first_run, copy)
    return copy


def _chronolake_files(lake: Path) -> set[str]:
    """What runs write, without the lock file (which only names the last holder)."""
    return {f for f in files_under(lake / "_chronolake") if not f.startswith("locks/")}


def _fails_and_changes_nothing(
    spark: SparkSession, lake: Path, match: str, *, run: Callable[[Catalog], object] | None = None,
    error: type[SourceError] = SourceError,
) -> None:
    before = _chronolake_files(lake)
    catalog = Catalog(lake, spark)
    with pytest.raises(error, match=match):
        (run or (lambda c: DerivedTable(c, VIEW).run()))(catalog)
    assert _chronolake_files(lake) == before


def _orders(rows: list[tuple[int, str, str, str]], schema: pa.Schema = ORDERS_SCHEMA) -> pa.Table:
    """Orders as (id, currency, amount, 'YYYY-MM-DD HH:MM:SS'), cast to `schema`."""
    table = pa.table(
        {
            "order_id": [r[0] for r in rows],
            "currency": [r[1] for r in rows],
            "amount": [r[2] for r in rows],
            "order_time": pa.array([r[3] for r in rows]).cast(pa.timestamp("us")),
        }
    )
    return table.select(schema.names).cast(schema)


def test_a_source_path_that_is_not_a_delta_table_stops_the_run(
    spark: SparkSession, lake: Path
) -> None:
    shutil.rmtree(lake / "orders" / "_delta_log")
    _fails_and_changes_nothing(
        spark, lake, r"table 'orders' \(read by 'orders_enriched'\): .*orders is not a Delta "
        r"table .*fix the table's 'path' option",
    )
    EXERCISED.bad_inputs.add("source path is not a Delta table")


def test_a_change_data_feed_that_is_off_stops_the_first_run(
    spark: SparkSession, tmp_path: Path
) -> None:
    build_tiny_lake(tmp_path, spark, rates_cdf=False)
    _fails_and_changes_nothing(
        spark, tmp_path, r"rates: the change data feed is not enabled at version 0 .*"
        r"enableChangeDataFeed.* or run a full refresh",
    )
    EXERCISED.bad_inputs.add("change data feed disabled")


def test_versions_vacuumed_since_the_checkpoint_stop_the_run_until_a_full_refresh(
    spark: SparkSession, lake: Path
) -> None:
    rates = DeltaTable(lake / "rates")
    rates.update(updates={"rate": "rate * 2"}, predicate="currency = 'USD'")
    updated = rates.version()
    DeltaTable(lake / "rates").vacuum(
        retention_hours=0, dry_run=False, enforce_retention_duration=False, full=True
    )
    latest = DeltaTable(lake / "rates").version()  # VACUUM logs commits of its own
    _fails_and_changes_nothing(
        spark, lake, rf"data files of version\(s\) {updated} are missing \(removed by VACUUM\)"
        r".*run a full refresh",
    )
    refreshed = full_refresh(Catalog(lake, spark), VIEW)
    assert refreshed.status is RunStatus.COMMITTED
    assert refreshed.message.startswith("run 2 rebuilt the table from scratch")
    # the rates' history is gone: the refresh starts them from the latest snapshot
    assert refreshed.input_versions["rates"] == (latest, latest)
    output = delta_rows(spark, output_path(lake, VIEW))
    assert output.count() == refreshed.figures["rows_out"] > 0
    # incremental again: new orders, no new rates commit (nothing read from the vacuumed ones)
    append_orders(lake / "orders", rng=random.Random(5), first_id=500, count=10,
                  start=DEMO_START + timedelta(minutes=15))
    after = DerivedTable(Catalog(lake, spark), VIEW).run()
    assert after.status is RunStatus.COMMITTED
    assert (after.figures["probe_rows_in"], after.figures["build_rows_in"]) == (10, 0)
    EXERCISED.bad_inputs.add("versions vacuumed since the checkpoint")


def test_a_new_source_column_flows_through(spark: SparkSession, lake: Path) -> None:
    add_batch(lake, 1)
    extra = _orders([(900, "USD", "5.00", "2026-11-02 09:20:00")]).append_column(
        "channel", pa.array(["web"])
    )
    write_deltalake(lake / "orders", extra, mode="append", schema_mode="merge")
    result = DerivedTable(Catalog(lake, spark), VIEW).run()
    assert result.status is RunStatus.COMMITTED
    assert result.figures["probe_rows_in"] == 41
    output = delta_rows(spark, output_path(lake, VIEW))
    assert output.where(F.col("order_id") == 900).count() == 1
    EXERCISED.bad_inputs.add("new source column")


def test_a_dropped_source_column_stops_the_run_and_names_it(
    spark: SparkSession, lake: Path
) -> None:
    schema = pa.schema([f for f in ORDERS_SCHEMA if f.name != "amount"])
    rows = _orders([(900, "USD", "5.00", "2026-11-02 09:20:00")], schema)
    write_deltalake(lake / "orders", rows, mode="overwrite", schema_mode="overwrite")
    _fails_and_changes_nothing(
        spark, lake, r"table 'orders': column 'amount', declared by the table and read by "
        r"'orders_enriched', is not in the Delta table at version 1 .*run a full refresh",
    )
    EXERCISED.bad_inputs.add("dropped source column")


def test_a_retyped_source_column_stops_the_run_and_names_it(
    spark: SparkSession, lake: Path
) -> None:
    schema = pa.schema(
        [pa.field("amount", pa.string()) if f.name == "amount" else f for f in ORDERS_SCHEMA]
    )
    rows = _orders([(900, "USD", "5.00", "2026-11-02 09:20:00")], schema)
    write_deltalake(lake / "orders", rows, mode="overwrite", schema_mode="overwrite")
    _fails_and_changes_nothing(
        spark, lake, r"table 'orders': column 'amount', read by 'orders_enriched', changed type "
        r"from decimal\(10,2\) \(version 0, .*\) to string \(version 1\)",
    )
    EXERCISED.bad_inputs.add("retyped source column")


def test_an_overwritten_source_stops_the_run_unless_full_refresh_is_allowed(
    spark: SparkSession, lake: Path
) -> None:
    rows = _orders([(900, "USD", "5.00", "2026-11-02 09:01:00"),
                    (901, "EUR", "7.00", "2026-11-02 09:08:00"),
                    (902, "EUR", "9.00", "2026-11-02 09:14:00")])  # 902 waits: watermark 09:13:55
    write_deltalake(lake / "orders", rows, mode="overwrite")
    _fails_and_changes_nothing(
        spark, lake, r"table 'orders' \(.*\) was rewritten by OVERWRITE at version\(s\) 1, after "
        r"version 0, .*run a full refresh of 'orders_enriched'", error=SourceRewrittenError,
    )
    refreshed = DerivedTable(
        Catalog(lake, spark), VIEW, on_source_overwrite="full-refresh"
    ).run()
    assert refreshed.message.startswith("run 2 rebuilt the table from scratch")
    assert refreshed.input_versions["orders"] == (1, 1)  # from the OVERWRITE on
    output = delta_rows(spark, output_path(lake, VIEW))
    # order 901 (EUR at 09:08) joins the EUR rate valid then: 1.10 since 09:05
    assert sorted((r.order_id, r.rate) for r in output.collect()) == [
        (900, Decimal("1.0000000000")), (901, Decimal("1.1000000000"))
    ]
    EXERCISED.bad_inputs.add("source rewritten by OVERWRITE")


UNPARSABLE_DDL = """
CREATE TABLE raw_orders (
  order_id BIGINT,
  currency STRING,
  ts STRING,
  order_time AS TO_TIMESTAMP(ts),
  WATERMARK FOR order_time AS order_time - INTERVAL '5' SECOND
) WITH ('connector' = 'delta', 'path' = 'raw_orders', 'changelog' = 'append');
CREATE VIEW raw_enriched AS
SELECT o.order_id, o.currency, o.order_time, r.rate
FROM raw_orders AS o
LEFT JOIN rates FOR SYSTEM_TIME AS OF o.order_time AS r
ON o.currency = r.currency;
"""


def test_unparsable_rowtimes_go_to_the_side_table_and_are_counted(
    spark: SparkSession, lake: Path
) -> None:
    raw = pa.table(
        {
            "order_id": pa.array([1, 2, 3, 4], pa.int64()),
            "currency": ["USD", "EUR", "USD", "EUR"],
            "ts": ["2026-11-02 09:01:00", "not a time", "2026-11-02 09:20:00", "09:99"],
        }
    )
    write_deltalake(lake / "raw_orders", raw)
    catalog = Catalog(lake, spark)
    list(catalog.run_script(UNPARSABLE_DDL))
    result = DerivedTable(catalog, "raw_enriched").run()
    assert result.figures["null_rowtime_rows"] == result.figures["late_rows"] == 2
    late = catalog.backend.snapshot(lake / "_chronolake" / "late" / "raw_enriched")
    assert {"source_commit_version", "source_position", "_watermark"} <= set(late.columns)
    side = table_rows(lake / "_chronolake" / "late" / "raw_enriched")
    assert sorted(
        zip(*(side[c].to_pylist() for c in ("order_id", "ts", REASON_COLUMN)), strict=True)
    ) == [
        (2, "not a time", LateReason.NULL_ROWTIME.value),
        (4, "09:99", LateReason.NULL_ROWTIME.value),
    ]
    output = delta_rows(spark, output_path(lake, "raw_enriched"))
    assert [r.order_id for r in output.collect()] == [1]  # order 3 waits for the watermark
    EXERCISED.bad_inputs.add("unparsable rowtime")
