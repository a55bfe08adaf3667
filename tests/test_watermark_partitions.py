"""Dagster partitions that the watermark completes (issue 40, items 1 and 3): a run records
exactly the partitions its commit's stamped watermark closed, whichever partition launched
it; a later change to a complete partition records it again with its change counts; commits
made outside Dagster are recorded by the reconciling sensor."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from _partitioned_platform import HOURLY, ROOT, hourly_platform, lake_definitions, with_options
from dagster import (
    AssetKey,
    DagsterInstance,
    Definitions,
    build_sensor_context,
)
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from chronolake import Catalog
from chronolake.dagster import LakeResource, chronolake_assets
from chronolake.dagster.partitions import LATE_PARTITIONS_CHECK, reconcile_sensor
from chronolake.demo.lake import (
    DEMO_START,
    append_orders,
    build_demo_lake,
    correct_orders,
    feed_demo_lake,
)
from chronolake.errors import DefinitionError
from chronolake.lake.layout import output_path
from chronolake.lake.stamps import latest_recorded_watermark
from chronolake.runtime.derived import DerivedTable
from chronolake.schema import TimeOptions, TimePartitions, ViewSpec
from chronolake.watermarks.partitions import windows_between

pytestmark = pytest.mark.slow

def _closed(lake: Path) -> set[str]:
    """Every hour whose end the stamped watermark of `orders_enriched` has reached."""
    watermark = latest_recorded_watermark(output_path(Catalog(lake).root, "orders_enriched"))
    assert watermark is not None
    partitions = TimePartitions(schedule="hourly", start="2026-11-02", column="order_time")
    return {window.key for window in windows_between(partitions, 0, watermark)
            if window.end_ms <= watermark}


def _materializations(instance: DagsterInstance) -> list[tuple[str | None, dict[str, object]]]:
    records = instance.fetch_materializations(AssetKey("orders_enriched"), limit=10_000,
                                              ascending=True).records
    return [  # a run of no partition records the table as no partition too: left out
        (m.partition, {key: value.value for key, value in m.metadata.items()})
        for record in records
        if (m := record.asset_materialization) is not None and m.partition is not None
    ]


def _rows_per_hour(spark: SparkSession, lake: Path) -> dict[str, int]:
    rows = Catalog(lake, spark).table("orders_enriched").groupBy(
        F.date_format("order_time", "yyyy-MM-dd-HH:00").alias("hour")
    ).count()
    return {row["hour"]: row["count"] for row in rows.collect()}  # a few hours: small


def test_a_launched_partition_records_only_what_the_watermark_closed(
    tmp_path: Path, spark: SparkSession
) -> None:
    build_demo_lake(tmp_path)
    feed_demo_lake(tmp_path, seed=0, now=DEMO_START + timedelta(hours=2))
    Catalog(tmp_path, spark).declare(hourly_platform())
    instance = DagsterInstance.ephemeral()
    job = lake_definitions(tmp_path).resolve_implicit_global_asset_job_def()
    open_hour = "2026-11-02-10:00"  # the orders end within it
    result = job.execute_in_process(instance=instance, partition_key=open_hour,
                                    asset_selection=[AssetKey("orders_enriched")])
    assert result.success
    assert None not in {event.partition for event in result.get_asset_materialization_events()}

    recorded = _materializations(instance)
    closed = _closed(tmp_path)
    assert {partition for partition, _ in recorded} == closed
    assert open_hour not in closed and "2026-11-02-09:00" in closed
    assert instance.get_materialized_partitions(AssetKey("orders_enriched")) == closed
    counts = _rows_per_hour(spark, tmp_path)
    for partition, metadata in recorded:
        assert metadata["dagster/row_count"] == counts.get(partition, 0)
        assert metadata["chronolake/partition"] == "completed"
    assert counts["2026-11-02-09:00"] > 0

    # an order of a closed hour corrected: that hour alone is recorded again, with its changes
    changed_hour = "2026-11-02-09:00"
    corrected = _first_order_of(spark, tmp_path, changed_hour)
    correct_orders(tmp_path / "orders", [corrected], percent=10)
    feed_demo_lake(tmp_path, seed=1, now=DEMO_START + timedelta(hours=3, minutes=30))
    # a run of no partition that also runs a view reading the join: that view's step runs too
    both = [AssetKey("orders_enriched"), AssetKey("revenue_per_currency")]
    second = job.execute_in_process(instance=instance, asset_selection=both)
    assert second.success
    assert AssetKey("revenue_per_currency") in {
        event.asset_key for event in second.get_asset_materialization_events()}
    again = _materializations(instance)[len(recorded):]
    changed = [(partition, metadata) for partition, metadata in again
               if metadata["chronolake/partition"] == "changed"]
    assert [partition for partition, _ in changed] == [changed_hour]
    assert changed[0][1]["-U"] == changed[0][1]["+U"] >= 1
    newly = {partition for partition, metadata in again
             if metadata["chronolake/partition"] == "completed"}
    assert newly == _closed(tmp_path) - closed  # and the hours the feed's watermark closed


def test_late_rows_a_window_sends_aside_are_counted_per_partition(
    tmp_path: Path, spark: SparkSession
) -> None:
    ddl = (ROOT / "assets" / "platform.sql").read_text()
    head = ddl[: ddl.index("CREATE TABLE rates_hybrid")]
    window = ddl[ddl.index("CREATE VIEW orders_per_currency"):ddl.index("-- The second hop")]
    build_demo_lake(tmp_path)
    feed_demo_lake(tmp_path, seed=0, now=DEMO_START + timedelta(hours=2))
    Catalog(tmp_path, spark).declare(head + with_options(window, "orders_per_currency", HOURLY))
    instance = DagsterInstance.ephemeral()
    job = lake_definitions(tmp_path).resolve_implicit_global_asset_job_def()
    view = [AssetKey("orders_per_currency")]
    assert job.execute_in_process(instance=instance, asset_selection=view).success
    # 40 orders of 09:00-09:10, whose window was emitted: late, in the 09:00 partition
    append_orders(tmp_path / "orders", rng=random.Random(1), first_id=50_000, count=40,
                  start=DEMO_START, span=timedelta(minutes=10))
    late = job.execute_in_process(instance=instance, asset_selection=view)
    [check] = [evaluation for evaluation in late.get_asset_check_evaluations()
               if evaluation.check_name == LATE_PARTITIONS_CHECK]
    assert check.metadata["by_partition"].value == {"2026-11-02-09:00": 40}
    assert not check.passed  # 40 late rows against the hour's few windows: over 5%
    assert "2026-11-02-09:00" not in {  # late rows change no row: not materialized again
        event.partition for event in late.get_asset_materialization_events()
    }


def _first_order_of(spark: SparkSession, lake: Path, hour: str) -> int:
    start = datetime.strptime(hour, "%Y-%m-%d-%H:%M")
    hour_of_orders = (F.col("order_time") >= F.lit(start)) & (
        F.col("order_time") < F.lit(start + timedelta(hours=1)))
    first = Catalog(lake, spark).table("orders").where(hour_of_orders).agg(
        F.min("order_id")).first()  # one row
    assert first is not None
    return int(first[0])


def test_the_sensor_records_commits_made_outside_dagster_once(
    tmp_path: Path, spark: SparkSession
) -> None:
    build_demo_lake(tmp_path)
    feed_demo_lake(tmp_path, seed=0, now=DEMO_START + timedelta(hours=2))  # 09:00 completes
    catalog = Catalog(tmp_path, spark)
    catalog.declare(hourly_platform())
    DerivedTable(catalog, "orders_enriched").run()  # `chronolake run`, a notebook
    instance = DagsterInstance.ephemeral()
    sensor = reconcile_sensor(catalog.root)

    first = sensor(build_sensor_context(instance=instance))
    recorded = {event.partition for event in first.asset_events}
    assert recorded == _closed(tmp_path) != set()
    for event in first.asset_events:
        instance.report_runless_asset_event(event)
    second = sensor(build_sensor_context(instance=instance, cursor=first.cursor))
    assert second.asset_events == []  # nothing recorded twice


def test_partitions_are_declared_on_a_time_the_watermark_bounds(spark: SparkSession) -> None:
    catalog = Catalog(Path("/nonexistent"), spark)
    orders = hourly_platform()[: hourly_platform().index("CREATE TABLE rates")]
    with pytest.raises(DefinitionError, match=r"view 'v' is computed on read"):
        catalog.declare(orders + f"CREATE VIEW v WITH ({HOURLY}) AS SELECT * FROM orders;")
    with pytest.raises(DefinitionError, match=r"'partition.time.column' = 'order_id' is not"):
        catalog.declare(orders.replace(
            "'changelog' = 'cdf',",
            f"'changelog' = 'cdf', {HOURLY}, 'partition.time.column' = 'order_id',"))
    with pytest.raises(DefinitionError, match=r"'partition.time.zone': 'Moon/Base' is not"):
        catalog.declare(orders.replace(
            "'changelog' = 'cdf',", f"'changelog' = 'cdf', {HOURLY}, "
            "'partition.time.zone' = 'Moon/Base',"))


@pytest.mark.parametrize(("day", "hours"), [("2026-03-29", 23), ("2026-10-25", 25),
                                            ("2026-11-02", 24)])
def test_a_zoned_day_covers_the_instants_between_its_local_midnights(day: str, hours: int
                                                                     ) -> None:
    partitions = TimePartitions(schedule="daily", start="2026-01-01", zone="Europe/Berlin")
    noon = datetime.strptime(day, "%Y-%m-%d").replace(hour=11, tzinfo=UTC)
    millis = int(noon.timestamp() * 1000)
    [window] = windows_between(partitions, millis, millis + 1)
    assert window.key == day
    assert (window.end_ms - window.start_ms) / 3_600_000 == hours


def test_a_partitioned_source_records_the_hours_its_watermark_closed(tmp_path: Path) -> None:
    """A source's watermark is its largest rowtime less the delay (Delta's file statistics):
    the sensor records the hours it closed, observing reports their data versions, no Spark."""
    build_demo_lake(tmp_path)
    feed_demo_lake(tmp_path, seed=0, now=DEMO_START + timedelta(hours=2))
    ddl = hourly_platform()[: hourly_platform().index("-- Currency rates")].replace(
        "'changelog' = 'cdf',", f"'changelog' = 'cdf', {HOURLY},")
    Catalog(tmp_path).declare(ddl)
    instance = DagsterInstance.ephemeral()
    defs = Definitions(assets=chronolake_assets(tmp_path), sensors=[reconcile_sensor(
        Catalog(tmp_path).root)], resources={"lake": LakeResource(root=str(tmp_path))})
    observed = defs.resolve_implicit_global_asset_job_def().execute_in_process(
        instance=instance, asset_selection=[AssetKey("orders")])
    # from the start, 2 Nov 00:00: the feed's orders end before 11:00, so 10:00 is open
    hours = {f"2026-11-02-{hour:02}:00" for hour in range(10)}
    assert {event.partition for event in observed.get_asset_observation_events()} == hours

    sensor = defs.resolve_sensor_def("reconcile_partitions")
    first = sensor(build_sensor_context(instance=instance))
    assert {event.partition for event in first.asset_events} == hours
    for event in first.asset_events:
        instance.report_runless_asset_event(event)
    assert sensor(build_sensor_context(instance=instance, cursor=first.cursor)).asset_events == []


def test_partitions_declared_in_python_are_resolved_as_in_ddl(tmp_path: Path) -> None:
    catalog = Catalog(tmp_path)
    [orders] = catalog.declare(hourly_platform()[: hourly_platform().index("-- Currency rates")])
    hourly = TimeOptions(partitions=TimePartitions(schedule="hourly", start="2026-11-02"))
    registered = catalog.register(orders.model_copy(update={"time": hourly}), replace=True)
    assert registered.time.partitions is not None
    assert registered.time.partitions.column == "order_time"  # its rowtime, as in DDL
    assert catalog.spec("orders").time == registered.time
    plain = ViewSpec(name="recent", query="SELECT order_id FROM orders", time=hourly)
    with pytest.raises(DefinitionError, match=r"view 'recent' is computed on read"):
        catalog.register(plain)
