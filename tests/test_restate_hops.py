"""Restating a range through two hops: a window over a window. The first hop's commit stamps
the range of its time attribute its changes touch; the view that reads it restates that
range of it, never reads the commit's `-U`/`+U` as late changes, and both equal a full
recompute over the rewritten source.

`per_ten` renames its window columns, as Flink's cascading windows do, so that the window
over it can name its own. A real lake: raw orders (an append table without the change data
feed) at 09:05 (EUR 10), 09:15 (EUR 20), 09:25 (EUR 30), 09:35 (USD 40), 09:45 (EUR 50) and
10:05 (EUR 60), summed per currency in 10-minute windows (`per_ten`), and those in 30-minute
windows of their `rowtime` (`per_half_hour`). The upstream system re-exports [09:10, 09:30).
"""

from __future__ import annotations

import json
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from _crash import REPO
from _orders_and_rates import ENRICHED, ORDERS_AND_RATES, RAW_ORDERS, at, ms, order_row, rate_row
from _partitioned_platform import hourly_platform, lake_definitions
from _restated_lake import run_once
from dagster import AssetKey, DagsterInstance, Definitions, in_process_executor
from deltalake import DeltaTable, write_deltalake
from deltatables import as_table, table_rows, write_commits
from pyspark.sql import SparkSession

from chronolake import Catalog
from chronolake.dagster import LakeResource, chronolake_assets, local_pyspark_resource
from chronolake.dagster.restating import RESTATE_TAG
from chronolake.demo.lake import DEMO_START, ORDERS_SCHEMA, build_demo_lake, feed_demo_lake
from chronolake.errors import DefinitionError
from chronolake.lake.layout import late_path, output_path
from chronolake.lake.stamps import RESTATED_KEY, RestatedSpan, restated_commits
from chronolake.runtime.derived import DerivedTable
from chronolake.runtime.restate_plan import plan_restatement, run_restatement
from chronolake.runtime.result import RunStatus

DDL = RAW_ORDERS + """
CREATE VIEW per_ten AS
SELECT window_start AS ten_start, window_end AS ten_end, window_time AS rowtime, currency,
       SUM(amount) AS amount, COUNT(*) AS orders
FROM TABLE(TUMBLE(TABLE raw_orders, DESCRIPTOR(order_time), INTERVAL '10' MINUTES))
GROUP BY window_start, window_end, window_time, currency;
CREATE VIEW per_half_hour AS
SELECT window_start, window_end, currency, SUM(amount) AS amount, SUM(orders) AS orders
FROM TABLE(TUMBLE(TABLE per_ten, DESCRIPTOR(rowtime), INTERVAL '30' MINUTES))
GROUP BY window_start, window_end, currency;
"""
VIEWS = ("per_ten", "per_half_hour")
ORDERS = [order_row(1, 10, 5), order_row(2, 20, 15), order_row(3, 30, 25),
          order_row(4, 40, 35, "USD"), order_row(5, 50, 45), order_row(6, 60, 65)]
SCHEMA = as_table(ORDERS).schema
# order 2 corrected, order 3 gone, a GBP order the first export missed
REPLACEMENT = [order_row(2, 21, 15), order_row(7, 5, 12, "GBP")]


@pytest.fixture
def lake(tmp_path: Path, spark: SparkSession) -> Catalog:
    """The orders in one commit, both views run once over them: the watermark (10:05) closed
    `per_ten`'s windows up to 10:00 and `per_half_hour`'s up to 10:00."""
    return run_once(tmp_path, spark, DDL, VIEWS, {"raw_orders": ORDERS})


def re_export(catalog: Catalog) -> None:
    """The upstream system replaces the orders of [09:10, 09:30) with `REPLACEMENT`."""
    write_deltalake(str(Path(str(catalog.root)) / "raw_orders"), as_table(REPLACEMENT, SCHEMA),
                    mode="overwrite", predicate=(
                        f"order_time >= '{at(10):%Y-%m-%d %H:%M:%S}' AND "
                        f"order_time < '{at(30):%Y-%m-%d %H:%M:%S}'"))


def rows(catalog: Catalog, view: str) -> set[tuple[Any, ...]]:
    """A view's rows: (window start minute, currency, amount, orders)."""
    return {(_minute(r.get("window_start", r.get("ten_start"))), r["currency"], r["amount"],
             r["orders"]) for r in table_rows(output_path(catalog.root, view)).to_pylist()}


def changes(catalog: Catalog, view: str, version: int) -> set[tuple[Any, ...]]:
    """What the commit at `version` of `view` changed, by its change data feed."""
    feed = pa.table(DeltaTable(str(output_path(catalog.root, view))).load_cdf(
        starting_version=version, ending_version=version).read_all()).to_pylist()
    return {(r["_change_type"], _minute(r.get("window_start", r.get("ten_start"))),
             r["currency"], r.get("amount", r.get("usd")), r["orders"]) for r in feed}


def recomputed(catalog: Catalog) -> dict[str, set[tuple[Any, ...]]]:
    """Both views rebuilt from scratch over the source as it is now, in order."""
    for view in VIEWS:
        DerivedTable(catalog, view).run(full_refresh=True)
    return {view: rows(catalog, view) for view in VIEWS}


def _minute(moment: Any) -> int:
    return int((moment - at(0)).total_seconds() // 60)


@pytest.mark.lake_contract  # Delta's MERGE restates on delta-spark
def test_a_replayed_range_goes_through_two_hops_as_changes_and_equals_a_recompute(
    lake: Catalog,
) -> None:
    assert rows(lake, "per_half_hour") == {(0, "EUR", 60, 3), (30, "USD", 40, 1),
                                           (30, "EUR", 50, 1)}
    # renamed, the bounds stay its key (Flink's unique keys follow a projection's renames)
    assert lake.spec("per_ten").primary_key == ("ten_start", "ten_end", "rowtime", "currency")
    re_export(lake)

    first, second = run_restatement(lake, "raw_orders", start_ms=ms(10), end_ms=ms(30))

    assert changes(lake, "per_ten", first.output_version) == {
        ("update_preimage", 10, "EUR", 20, 1), ("update_postimage", 10, "EUR", 21, 1),
        ("insert", 10, "GBP", 5, 1), ("delete", 20, "EUR", 30, 1),
    }
    assert second.table == "per_half_hour"
    assert changes(lake, "per_half_hour", second.output_version) == {
        ("update_preimage", 0, "EUR", 60, 3), ("update_postimage", 0, "EUR", 31, 2),
        ("insert", 0, "GBP", 5, 1),
    }  # the 09:30 windows are not touched
    version = second.output_version
    assert version is not None
    assert restated_commits(lake.backend, output_path(lake.root, "per_half_hour"), version,
                            version) == {  # the range of per_ten it restated, as stamped
        version: RestatedSpan("per_ten", ms(30) - 1, ms(30))}
    restated = {view: rows(lake, view) for view in VIEWS}
    late = str(late_path(lake.root, "per_half_hour"))
    assert not DeltaTable.is_deltatable(late) or table_rows(late).num_rows == 0
    assert restated == recomputed(lake)


def test_a_hop_left_behind_is_restated_by_its_next_run_not_read_as_late_changes(
    lake: Catalog,
) -> None:
    """As after a kill between the hops: the first hop restated, the second not yet; then
    `per_ten` runs again over a new order, so an ordinary commit follows the restated one."""
    re_export(lake)
    plan = plan_restatement(lake, "raw_orders", start_ms=ms(10), end_ms=ms(30))
    DerivedTable(lake, "per_ten").restate(plan.consumers["per_ten"])
    write_commits(Path(str(lake.root)) / "raw_orders", [[order_row(8, 80, 95)]], cdf=False,
                  schema=SCHEMA)
    DerivedTable(lake, "per_ten").run()
    second = DerivedTable(lake, "per_half_hour")

    # the restated commit first, alone: by the asset's staged run in Dagster, whole
    definitions = Definitions(
        assets=chronolake_assets(lake.root), executor=in_process_executor,
        resources={"lake": LakeResource(root=str(lake.root)), "pyspark": local_pyspark_resource()},
    )
    restating = definitions.resolve_implicit_global_asset_job_def().execute_in_process(
        instance=DagsterInstance.ephemeral(), asset_selection=[AssetKey("per_half_hour")])
    reading = second.run()  # then the ordinary one

    assert restating.success
    [materialized] = restating.get_asset_materialization_events()
    figures = materialized.materialization.metadata
    assert (figures["update_befores_out"].value, figures["update_afters_out"].value,
            figures["inserts_out"].value) == (1, 1, 1)
    restated_version = DeltaTable(str(output_path(lake.root, "per_half_hour"))).version() - 1
    assert json.loads(DeltaTable(str(output_path(lake.root, "per_half_hour"))).history(2)[1][
        RESTATED_KEY])["source"] == "per_ten"
    assert changes(lake, "per_half_hour", restated_version) == {
        ("update_preimage", 0, "EUR", 60, 3), ("update_postimage", 0, "EUR", 31, 2),
        ("insert", 0, "GBP", 5, 1),
    }
    assert changes(lake, "per_half_hour", reading.output_version) == {
        ("insert", 60, "EUR", 60, 1)}  # the 10:00 window, closed by the new order's watermark
    assert second.run().status is RunStatus.UP_TO_DATE
    late = str(late_path(lake.root, "per_half_hour"))
    assert not DeltaTable.is_deltatable(late) or table_rows(late).num_rows == 0
    restated = {view: rows(lake, view) for view in VIEWS}
    assert restated == recomputed(lake)


def test_a_later_hop_that_cannot_be_restated_is_named_before_anything_is_written(
    lake: Catalog,
) -> None:
    lake.declare("""
    CREATE VIEW half_hour_amounts AS
    SELECT window_start, window_end, SUM(amount) AS amount
    FROM TABLE(TUMBLE(TABLE per_ten, DESCRIPTOR(rowtime), INTERVAL '30' MINUTES))
    GROUP BY window_start, window_end, currency;
    """)
    DerivedTable(lake, "half_hour_amounts").run()
    version = DeltaTable(str(output_path(lake.root, "per_ten"))).version()
    re_export(lake)
    with pytest.raises(DefinitionError, match=(
            r"cannot restate through view 'half_hour_amounts': its rows have no key")):
        run_restatement(lake, "raw_orders", start_ms=ms(10), end_ms=ms(30))
    assert DeltaTable(str(output_path(lake.root, "per_ten"))).version() == version


@pytest.mark.lake_contract  # Delta's MERGE restates on delta-spark
def test_a_deduplication_over_a_window_restates_the_keys_whose_windows_changed(
    lake: Catalog,
) -> None:
    """The re-export adds a GBP window and changes two EUR ones: the latest window of each
    currency changes for GBP alone (a new key), and equals a recompute."""
    lake.declare("""
    CREATE VIEW latest_window AS
    SELECT currency, amount, rowtime FROM (
      SELECT *, ROW_NUMBER() OVER (PARTITION BY currency ORDER BY rowtime DESC) AS rownum
      FROM per_ten)
    WHERE rownum = 1;
    """)
    DerivedTable(lake, "latest_window").run()
    re_export(lake)

    run_restatement(lake, "raw_orders", start_ms=ms(10), end_ms=ms(30))

    path = str(output_path(lake.root, "latest_window"))
    version = DeltaTable(path).version()
    feed = pa.table(DeltaTable(path).load_cdf(starting_version=version,
                                              ending_version=version).read_all()).to_pylist()
    assert {(r["_change_type"], r["currency"], r["amount"]) for r in feed} == {
        ("insert", "GBP", 5)}
    restated = table_rows(path).to_pylist()
    recomputed(lake)
    DerivedTable(lake, "latest_window").run(full_refresh=True)
    assert sorted(restated, key=str) == sorted(table_rows(path).to_pylist(), key=str)


PIPELINE_DDL = ORDERS_AND_RATES + ENRICHED + """
CREATE VIEW usd_per_quarter AS
SELECT window_start, window_end, currency, SUM(usd) AS usd, COUNT(*) AS orders
FROM TABLE(TUMBLE(TABLE enriched, DESCRIPTOR(order_time), INTERVAL '15' MINUTES))
GROUP BY window_start, window_end, currency;
"""
PIPELINE = ("enriched", "usd_per_quarter")


@pytest.mark.lake_contract  # Delta's MERGE restates on delta-spark
def test_a_replayed_range_goes_through_a_temporal_join_and_a_window_as_changes(
    tmp_path: Path, spark: SparkSession,
) -> None:
    """The reference platform's shape: CDC orders joined with the EUR rate valid at their
    time (2 from 09:00, 3 from 09:20), then summed in 15-minute windows. The orders up to
    09:45 are joined (rates' watermark is at 10:00); the re-export of [09:10, 09:30)
    corrects order 2, drops order 3 and adds order 7, which the first export missed."""
    lake = Catalog(tmp_path, spark)
    lake.declare(PIPELINE_DDL)
    write_commits(tmp_path / "rates", [[rate_row("EUR", 2, 0), rate_row("EUR", 3, 20),
                                        rate_row("GBP", 1, 60)]])
    orders = [order_row(1, 10, 5), order_row(2, 20, 15), order_row(3, 30, 25),
              order_row(4, 40, 35, "USD"), order_row(5, 50, 45)]
    write_commits(tmp_path / "orders", [orders])
    for view in PIPELINE:
        DerivedTable(lake, view).run()
    replacement = [order_row(2, 21, 15), order_row(7, 5, 12)]
    write_deltalake(str(tmp_path / "orders"), as_table(replacement, as_table(orders).schema),
                    mode="overwrite", predicate=(
                        f"order_time >= '{at(10):%Y-%m-%d %H:%M:%S}' AND "
                        f"order_time < '{at(30):%Y-%m-%d %H:%M:%S}'"))

    joined, summed = run_restatement(lake, "orders", start_ms=ms(10), end_ms=ms(30))

    assert (joined.table, summed.table) == PIPELINE
    feed = pa.table(DeltaTable(str(output_path(lake.root, "enriched"))).load_cdf(
        starting_version=joined.output_version, ending_version=joined.output_version,
    ).read_all()).to_pylist()
    assert {(r["_change_type"], r["order_id"], r["usd"]) for r in feed} == {
        ("update_preimage", 2, 40), ("update_postimage", 2, 42), ("delete", 3, 90),
        ("insert", 7, 10)}  # orders 1, 4 and 5 are not touched
    assert changes(lake, "usd_per_quarter", summed.output_version) == {
        ("update_preimage", 0, "EUR", 20, 1), ("update_postimage", 0, "EUR", 30, 2),
        ("update_preimage", 15, "EUR", 130, 2), ("update_postimage", 15, "EUR", 42, 1),
    }
    restated = {view: _all_rows(lake, view) for view in PIPELINE}
    for view in PIPELINE:
        DerivedTable(lake, view).run(full_refresh=True)
    assert restated == {view: _all_rows(lake, view) for view in PIPELINE}


def _all_rows(catalog: Catalog, view: str) -> list[tuple[Any, ...]]:
    """Every row of a view, whole, sorted."""
    return sorted(tuple(row.values()) for row in
                  table_rows(output_path(catalog.root, view)).to_pylist())


REFERENCE = ("orders_enriched", "orders_per_currency", "revenue_per_currency")
"""The reference platform's views downstream of `orders` that follow event time."""


def test_the_reference_platform_restates_a_replayed_quarter_hour_through_every_hop(
    tmp_path: Path, spark: SparkSession,
) -> None:
    """The demo lake's 2,000 orders (09:00 to 10:00, corrections and a cancellation among
    them) through `assets/platform.sql`; the upstream system replays [09:15, 09:30): every
    tenth order gone, every seventh corrected, three new ones. The processing-time join
    `orders_enriched_latest` is left by name; every other view equals a full recompute."""
    build_demo_lake(tmp_path)
    lake = Catalog(tmp_path, spark)
    lake.declare((REPO / "assets" / "platform.sql").read_text())
    for view in (*REFERENCE, "orders_enriched_latest"):
        DerivedTable(lake, view).run()
    _replay_a_quarter_hour(tmp_path / "orders")

    before = {view: _region_rows(lake, view, inside=False) for view in REFERENCE}

    results = run_restatement(lake, "orders", start_ms=ms(15), end_ms=ms(30))

    assert {result.table: result.status for result in results} == {
        **dict.fromkeys(REFERENCE, RunStatus.COMMITTED),
        "orders_enriched_latest": RunStatus.LEFT}
    restated = {view: _region_rows(lake, view) for view in REFERENCE}
    assert {view: _region_rows(lake, view, inside=False) for view in REFERENCE} == before
    for view in REFERENCE:
        DerivedTable(lake, view).run(full_refresh=True)
    # inside the region, equal to a recompute (outside, the incremental runs' rows stay)
    assert restated == {view: _region_rows(lake, view) for view in REFERENCE}


def _replay_a_quarter_hour(orders: Path) -> None:
    """The upstream system replays [09:15, 09:30) of `orders`: every tenth order gone, every
    seventh corrected, three new ones (a predicate overwrite)."""
    kept = DeltaTable(str(orders)).to_pyarrow_table(filters=[
        ("order_time", ">=", pa.scalar(at(15), pa.timestamp("us"))),
        ("order_time", "<", pa.scalar(at(30), pa.timestamp("us")))]).to_pylist()
    replayed = [
        {**row, "amount": row["amount"] + 1 if index % 7 == 0 else row["amount"]}
        for index, row in enumerate(kept) if index % 10
    ] + [{"order_id": 10_000 + i, "currency": "EUR", "amount": Decimal("12.50"),
          "order_time": at(minute)} for i, minute in enumerate((16, 22, 29))]
    write_deltalake(str(orders), pa.Table.from_pylist(replayed, ORDERS_SCHEMA),
                    mode="overwrite", predicate=(
                        f"order_time >= '{at(15):%Y-%m-%d %H:%M:%S}' AND "
                        f"order_time < '{at(30):%Y-%m-%d %H:%M:%S}'"))


def test_a_backfill_tagged_to_restate_restates_its_partitions_and_records_them_again(
    tmp_path: Path, spark: SparkSession,
) -> None:
    """The join partitioned by the hour, run by Dagster; the upstream system replays a
    quarter of the 09:00 hour; a backfill of that partition tagged `chronolake/restate=orders`
    restates it: the hour is recorded again with its changes by kind, no other is, and the
    window over the join restates what the join changed in its next run."""
    build_demo_lake(tmp_path)
    feed_demo_lake(tmp_path, seed=0, now=DEMO_START + timedelta(hours=2))
    lake = Catalog(tmp_path, spark)
    lake.declare(hourly_platform())
    instance = DagsterInstance.ephemeral()
    job = lake_definitions(tmp_path).resolve_implicit_global_asset_job_def()
    assert job.execute_in_process(instance=instance).success
    enriched, window = AssetKey("orders_enriched"), AssetKey("revenue_per_currency")
    views = ("orders_enriched", "revenue_per_currency")
    recorded = len(_partition_records(instance, enriched))
    _replay_a_quarter_hour(tmp_path / "orders")
    before = {view: _region_rows(lake, view, inside=False) for view in views}

    untargeted = job.execute_in_process(instance=instance, asset_selection=[enriched],
                                        tags={RESTATE_TAG: "orders"}, raise_on_error=False)
    assert not untargeted.success
    [failure] = [event for event in untargeted.all_events if event.is_step_failure]
    assert ("tagged chronolake/restate=orders but was launched for no partition"
            in failure.step_failure_data.error.to_string())

    hour = "2026-11-02-09:00"
    backfill = job.execute_in_process(instance=instance, asset_selection=[enriched], tags={
        RESTATE_TAG: "orders",  # a single-run backfill of the hour: Dagster's range tags
        "dagster/asset_partition_range_start": hour, "dagster/asset_partition_range_end": hour,
    })
    assert backfill.success
    again = _partition_records(instance, enriched)[recorded:]
    assert {partition for partition, _ in again} == {hour}  # the commit's, and the launch's
    [metadata] = [metadata for _, metadata in again
                  if metadata.get("chronolake/partition") == "changed"]
    assert metadata["-D"] >= 1 and metadata["-U"] == metadata["+U"] >= 1 and metadata["+I"] == 3
    assert job.execute_in_process(instance=instance, asset_selection=[window]).success

    restated = {view: _region_rows(lake, view) for view in views}
    assert {view: _region_rows(lake, view, inside=False) for view in views} == before
    for view in views:
        DerivedTable(lake, view).run(full_refresh=True)
    assert restated == {view: _region_rows(lake, view) for view in views}


def _partition_records(instance: DagsterInstance, key: AssetKey
                       ) -> list[tuple[str, dict[str, Any]]]:
    """The asset's materializations of a partition, oldest first, with their metadata."""
    records = instance.fetch_materializations(key, limit=10_000, ascending=True).records
    return [(m.partition, {name: value.value for name, value in m.metadata.items()})
            for record in records
            if (m := record.asset_materialization) is not None and m.partition is not None]


def _region_rows(catalog: Catalog, view: str, *, inside: bool = True) -> list[tuple[Any, ...]]:
    """A view's rows whole, sorted, of the region of [09:15, 09:30) (an order in it, or a
    window overlapping it), or (`inside=False`) of everything else."""
    def in_region(row: dict[str, Any]) -> bool:
        if "order_time" in row:
            return at(15) <= row["order_time"] < at(30)
        return row["window_start"] < at(30) and row["window_end"] > at(15)

    return sorted(tuple(row.values()) for row in
                  table_rows(output_path(catalog.root, view)).to_pylist()
                  if in_region(row) == inside)
