"""Event-time freshness (issue 40 item 4): `watermark_freshness` judges how far a table's
watermark trails the wall clock and which partitions are past their deadline, evaluated by
the `check_freshness` job on real Dagster over real Delta tables; a stale view names the
source holding it back."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from dagster import (
    AssetCheckEvaluation,
    DagsterInstance,
    Definitions,
    HourlyPartitionsDefinition,
    in_process_executor,
)
from deltatables import write_commits
from pyspark.sql import SparkSession

from chronolake import Catalog
from chronolake.dagster import (
    LakeResource,
    chronolake_asset_checks,
    chronolake_assets,
    local_pyspark_resource,
    script_specs,
)
from chronolake.runtime.derived import DerivedTable
from chronolake.schema import TableSpec, ViewSpec
from ops import freshness_checking

DDL = """
CREATE TABLE orders (
  order_id BIGINT, currency STRING, amount BIGINT, order_time TIMESTAMP(3),
  WATERMARK FOR order_time AS order_time,
  PRIMARY KEY (order_id) NOT ENFORCED
) WITH ('path' = 'orders', 'changelog' = 'cdf', 'freshness.max-lag' = '15 min');
CREATE TABLE rates (
  currency STRING, rate BIGINT, currency_time TIMESTAMP(3),
  WATERMARK FOR currency_time AS currency_time,
  PRIMARY KEY (currency) NOT ENFORCED
) WITH ('path' = 'rates', 'changelog' = 'cdf', 'freshness.max-lag' = '15 min');
CREATE TABLE refunds (
  order_id BIGINT, refund_time TIMESTAMP(3),
  WATERMARK FOR refund_time AS refund_time
) WITH ('path' = 'refunds', 'freshness.max-lag' = '1 h');
CREATE VIEW enriched WITH ('freshness.max-lag' = '15 min') AS
SELECT o.order_id, o.amount, o.order_time, r.rate
FROM orders AS o
LEFT JOIN rates FOR SYSTEM_TIME AS OF o.order_time AS r
ON o.currency = r.currency;
"""

DAY = 24 * 3600


def _now() -> datetime:
    """The wall clock as a `TIMESTAMP` rowtime holds it (UTC, no zone)."""
    return datetime.now(tz=UTC).replace(tzinfo=None, microsecond=0)


def _orders(root: Path, at: datetime) -> None:
    write_commits(root / "orders", [[{"order_id": 1, "currency": "EUR", "amount": 10,
                                      "order_time": at}]])


def _rate(root: Path, at: datetime) -> None:
    write_commits(root / "rates", [[{"currency": "EUR", "rate": 2, "currency_time": at}]])


def _check_freshness(root: Path, specs: list[TableSpec | ViewSpec]
                     ) -> dict[str, AssetCheckEvaluation]:
    """Each table's `watermark_freshness` evaluation by a run of `check_freshness`."""
    jobs, schedules = freshness_checking(specs)
    definitions = Definitions(
        assets=chronolake_assets(root, specs), asset_checks=chronolake_asset_checks(root, specs),
        jobs=jobs, schedules=schedules, executor=in_process_executor,
        resources={"lake": LakeResource(root=str(root)), "pyspark": local_pyspark_resource()},
    )
    result = definitions.resolve_job_def("check_freshness").execute_in_process(
        instance=DagsterInstance.ephemeral()
    )
    assert result.success
    assert result.get_asset_materialization_events() == []  # it checks, it runs nothing
    evaluations = result.get_asset_check_evaluations()
    assert {e.check_name for e in evaluations} == {"watermark_freshness"}
    return {e.asset_key.to_user_string(): e for e in evaluations}


def test_a_source_whose_watermark_trails_now_by_less_than_max_lag_passes(tmp_path: Path) -> None:
    _orders(tmp_path, _now() - timedelta(minutes=1))
    [orders] = [spec for spec in script_specs(DDL) if spec.name == "orders"]
    checked = _check_freshness(tmp_path, [orders])["orders"]
    assert checked.passed, checked.description
    assert 55 <= checked.metadata["lag_seconds"].value < 15 * 60
    assert checked.metadata["max_lag_seconds"].value == 15 * 60


def test_a_stale_source_fails_with_its_lag_and_one_without_a_watermark_says_so(
    tmp_path: Path,
) -> None:
    _orders(tmp_path, _now() - timedelta(minutes=1))
    _rate(tmp_path, _now() - timedelta(days=3))
    checked = _check_freshness(tmp_path, script_specs(DDL))
    assert checked["orders"].passed
    rates = checked["rates"]
    assert not rates.passed
    assert rates.severity.value == "WARN"
    assert 3 * DAY <= rates.metadata["lag_seconds"].value < 3 * DAY + 600
    assert "source `rates`'s watermark" in str(rates.description)
    assert "trails now by 3d 0h, more than max-lag 15 min" in str(rates.description)
    refunds = checked["refunds"]  # its Delta table has no rows yet
    assert not refunds.passed
    assert "source `refunds` has no watermark yet" in str(refunds.description)
    assert "lag_seconds" not in refunds.metadata


def test_a_view_downstream_of_a_stale_source_names_that_source(
    tmp_path: Path, spark: SparkSession
) -> None:
    _orders(tmp_path, _now() - timedelta(minutes=1))
    _rate(tmp_path, _now() - timedelta(days=2))
    catalog = Catalog(tmp_path, spark)
    specs = catalog.declare(DDL)
    DerivedTable(catalog, "enriched").run()  # its watermark: the lower of its inputs', rates'

    enriched = _check_freshness(tmp_path, specs)["enriched"]
    assert not enriched.passed
    assert enriched.metadata["held_back_by"].value == "rates"
    assert 2 * DAY <= enriched.metadata["lag_seconds"].value < 2 * DAY + 600
    assert "held back by source `rates`, whose watermark" in str(enriched.description)
    assert "trails now by 2d 0h" in str(enriched.description)

    _rate(tmp_path, _now() - timedelta(minutes=1))  # the source moves on, the view has not run
    behind = _check_freshness(tmp_path, specs)["enriched"]
    assert not behind.passed
    assert behind.metadata["held_back_by"].value == "enriched"
    assert "its inputs are ahead of it: run it" in str(behind.description)


PARTITIONED = """
CREATE TABLE orders (
  order_id BIGINT, currency STRING, amount BIGINT, order_time TIMESTAMP(3),
  WATERMARK FOR order_time AS order_time
) WITH ('path' = 'orders', 'partition.time.schedule' = 'hourly',
        'partition.time.start' = '{start}', 'freshness.partition-deadline' = '1 h');
"""


def test_a_partition_past_its_deadline_that_the_watermark_has_not_completed_fails(
    tmp_path: Path,
) -> None:
    hour = _now().replace(minute=0, second=0)
    specs = script_specs(PARTITIONED.format(start=f"{hour - timedelta(days=1):%Y-%m-%d}"))
    on_time, late = tmp_path / "on-time", tmp_path / "late"
    _orders(on_time, _now() - timedelta(minutes=1))  # every hour due (ended 1 h ago) complete
    checked = _check_freshness(on_time, specs)["orders"]
    assert checked.passed, checked.description
    assert checked.metadata["overdue_partitions"].value == 0

    # the watermark stops 10 minutes into the hour that began 3 hours ago: that hour and the
    # next are due (ended at least an hour ago), the last one is not yet
    _orders(late, hour - timedelta(hours=3) + timedelta(minutes=10))
    overdue = _check_freshness(late, specs)["orders"]
    keys = HourlyPartitionsDefinition(start_date=hour - timedelta(days=1))
    first = keys.get_partition_key_for_timestamp((hour - timedelta(hours=3)).replace(
        tzinfo=UTC).timestamp())
    last = keys.get_partition_key_for_timestamp((hour - timedelta(hours=2)).replace(
        tzinfo=UTC).timestamp())
    assert not overdue.passed
    assert overdue.metadata["overdue_partitions"].value == 2
    assert overdue.metadata["first_overdue_partition"].value == first
    assert overdue.metadata["last_overdue_partition"].value == last
    assert f"2 partition(s) not complete 1 h after their end: {first} … {last}" in str(
        overdue.description)
