"""Downstream assets wait for completeness (issue 40 item 2): `on_complete_partitions()` requests
each partition of a plain asset once its chronolake upstream partition is recorded as
materialized (complete), older ones included, and again when that partition is recorded again
(changed); `eager()` would not. And the reference platform's daily report, run for a day on a
small lake, writes that day's figures per currency."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from dagster import (
    AssetKey,
    AssetMaterialization,
    AutomationCondition,
    DagsterInstance,
    Definitions,
    evaluate_automation_conditions,
    materialize,
)
from dagster._core.definitions.asset_daemon_cursor import AssetDaemonCursor
from deltalake import write_deltalake
from pyspark.sql import SparkSession

from assets import PLATFORM_SPECS
from assets.daily_report import daily_report, report_location
from chronolake import Catalog
from chronolake.dagster import LakeResource, chronolake_assets, local_pyspark_resource
from chronolake.runtime.views import materialize_view
from chronolake.schema import TableSpec, ViewSpec

VIEW = AssetKey("orders_per_currency")
REPORT = AssetKey("orders_per_currency_daily_report")
NOW = datetime(2026, 11, 10, 12, 0, tzinfo=UTC)
"""The latest complete day is 2026-11-09; the partitions start on 2026-11-02."""

# Dagster's tester selects the assets to evaluate with a beta parameter
pytestmark = pytest.mark.filterwarnings("ignore::dagster.BetaWarning")


def _view_spec(specs: Sequence[TableSpec | ViewSpec]) -> ViewSpec:
    [spec] = [s for s in specs if isinstance(s, ViewSpec) and s.name == VIEW.path[-1]]
    return spec


class Automation:
    """The reference platform's view and report on a real instance, ticked as the daemon does."""

    def __init__(self, tmp_path: Path, *, condition: AutomationCondition | None = None) -> None:
        report = daily_report(_view_spec(PLATFORM_SPECS))
        if condition is not None:
            report = report.map_asset_specs(
                lambda spec: spec.replace_attributes(automation_condition=condition)
            )
        self.defs = Definitions(
            assets=[*chronolake_assets(tmp_path, PLATFORM_SPECS), report],
            resources={"lake": LakeResource(root=str(tmp_path)),
                       "pyspark": local_pyspark_resource()},
        )
        self.instance = DagsterInstance.ephemeral()
        self.cursor: AssetDaemonCursor | None = None

    def complete(self, *days: str) -> None:
        """Record days of the view as materialized, as its run or the reconciling sensor does."""
        for day in days:
            self.instance.report_runless_asset_event(AssetMaterialization(VIEW, partition=day))

    def tick(self) -> list[str]:
        """One evaluation; the report's partitions it requests."""
        result = evaluate_automation_conditions(defs=self.defs, instance=self.instance,
                                                cursor=self.cursor, evaluation_time=NOW)
        self.cursor = result.cursor
        return sorted(result.get_requested_partitions(REPORT))


def test_the_report_waits_for_complete_days_older_ones_included(tmp_path: Path) -> None:
    automation = Automation(tmp_path)
    assert automation.defs.resolve_assets_def(REPORT).partitions_def == \
        automation.defs.resolve_assets_def(VIEW).partitions_def
    assert automation.tick() == []  # no day of the view is complete: nothing to run

    automation.complete("2026-11-02", "2026-11-03")  # complete before the first look at them
    assert automation.tick() == ["2026-11-02", "2026-11-03"]
    assert automation.tick() == []  # handled: not requested again

    automation.complete("2026-11-05")  # an older day than the latest (2026-11-09)
    assert automation.tick() == ["2026-11-05"]
    assert automation.tick() == []

    automation.complete("2026-11-03")  # a later run changed a complete day: it flows
    assert automation.tick() == ["2026-11-03"]
    assert automation.tick() == []

    automation.complete("2026-11-09")
    assert automation.tick() == ["2026-11-09"]


def test_eager_would_miss_older_days(tmp_path: Path) -> None:
    """Why the condition exists: `eager()` looks only at the latest day, and takes what was
    complete before its first evaluation as handled."""
    automation = Automation(tmp_path, condition=AutomationCondition.eager())
    automation.complete("2026-11-02", "2026-11-03")
    assert automation.tick() == []
    automation.complete("2026-11-05")
    assert automation.tick() == []
    automation.complete("2026-11-09")
    assert automation.tick() == ["2026-11-09"]


TINY_DDL = """
CREATE TABLE orders (
  order_id BIGINT,
  currency STRING,
  amount DECIMAL(10, 2),
  order_time TIMESTAMP(3),
  WATERMARK FOR order_time AS order_time - INTERVAL '5' SECOND
) WITH ('connector' = 'delta', 'path' = 'orders');

CREATE VIEW orders_per_currency WITH (
  'partition.time.schedule' = 'daily',
  'partition.time.start' = '2026-11-02'
) AS
SELECT window_start, window_end, currency, COUNT(*) AS orders, SUM(amount) AS total_amount
FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(order_time), INTERVAL '10' MINUTES))
GROUP BY window_start, window_end, currency;
"""


def _tiny_lake(root: Path, spark: SparkSession) -> list[TableSpec | ViewSpec]:
    """Three orders on 2026-11-02, two the next day: the watermark closes the first day."""
    orders = [
        (1, "EUR", "10.00", datetime(2026, 11, 2, 9, 1)),
        (2, "EUR", "20.50", datetime(2026, 11, 2, 9, 12)),
        (3, "USD", "5.00", datetime(2026, 11, 2, 23, 55)),
        (4, "USD", "7.00", datetime(2026, 11, 3, 0, 2)),
        (5, "EUR", "1.00", datetime(2026, 11, 3, 1, 0)),
    ]
    write_deltalake(str(root / "orders"), pa.table({
        "order_id": pa.array([o[0] for o in orders], pa.int64()),
        "currency": [o[1] for o in orders],
        "amount": pa.array([Decimal(o[2]) for o in orders], pa.decimal128(10, 2)),
        "order_time": pa.array([o[3] for o in orders], pa.timestamp("us")),
    }))
    return Catalog(root, spark).declare(TINY_DDL)


def _resources(root: Path) -> dict[str, object]:
    return {"lake": LakeResource(root=str(root)), "pyspark": local_pyspark_resource()}


def test_the_daily_report_writes_the_days_orders_and_total_per_currency(
    tmp_path: Path, spark: SparkSession
) -> None:
    specs = _tiny_lake(tmp_path, spark)
    catalog = Catalog(tmp_path, spark)
    materialize_view(catalog, "orders_per_currency")

    result = materialize(
        [daily_report(_view_spec(specs))], partition_key="2026-11-02",
        instance=DagsterInstance.ephemeral(), resources=_resources(tmp_path),
    )

    assert result.success
    target = report_location(catalog.root, "orders_per_currency", "2026-11-02")
    [file] = list(target.path.glob("*.parquet"))  # one small file for the day
    written = sorted((r["currency"], r["orders"], r["total_amount"])
                     for r in pq.read_table(file).to_pylist())
    assert written == [("EUR", 2, Decimal("30.50")), ("USD", 1, Decimal("5.00"))]
    [materialized] = result.get_asset_materialization_events()
    metadata = materialized.materialization.metadata
    assert metadata["dagster/row_count"].value == 2
    assert metadata["path"].value == target.uri


def test_a_run_for_a_day_the_watermark_has_not_closed_leaves_its_readers_waiting(
    tmp_path: Path, spark: SparkSession
) -> None:
    """A run launched for the view and the report together, for an open day, runs the view
    (up to date) but neither records that day nor runs the report on its partial rows; for
    a closed day it runs both."""
    specs = _tiny_lake(tmp_path, spark)
    instance = DagsterInstance.ephemeral()
    both = [*chronolake_assets(tmp_path, specs), daily_report(_view_spec(specs))]

    opened = materialize(both, partition_key="2026-11-03", instance=instance,
                         resources=_resources(tmp_path), selection=[VIEW, REPORT])
    assert opened.success
    assert instance.get_materialized_partitions(VIEW) == {"2026-11-02"}  # what the run closed
    assert instance.get_materialized_partitions(REPORT) == set()
    assert not report_location(Catalog(tmp_path, spark).root, "orders_per_currency",
                               "2026-11-03").path.exists()

    closed = materialize(both, partition_key="2026-11-02", instance=instance,
                         resources=_resources(tmp_path), selection=[VIEW, REPORT])
    assert closed.success
    assert instance.get_materialized_partitions(REPORT) == {"2026-11-02"}
