"""The asset checks on the reference platform: all pass on the demo's ordinary data (its CDC
updates and deletes included, and after live feeds), and each fails on data built to break
it (issue 20 item 1)."""

from __future__ import annotations

import random
import time
from datetime import timedelta
from pathlib import Path

import pytest
from _demo import demo_copy
from dagster import (
    AssetKey,
    AssetMaterialization,
    DagsterEventType,
    DagsterInstance,
    Definitions,
    EventRecordsFilter,
    ExecuteInProcessResult,
    in_process_executor,
)
from pyspark.sql import SparkSession

from chronolake import Catalog
from chronolake.dagster import (
    LakeResource,
    chronolake_asset_checks,
    chronolake_assets,
    local_pyspark_resource,
)
from chronolake.dagster.checks import LATE_RATE_CHECK
from chronolake.demo.lake import DEMO_START, append_orders, build_demo_lake, feed_demo_lake
from ops import JOBS

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.slow


def _definitions(lake: Path, **lake_settings: float) -> Definitions:
    return Definitions(
        assets=chronolake_assets(lake),
        asset_checks=chronolake_asset_checks(lake),
        jobs=JOBS,
        executor=in_process_executor,
        resources={"lake": LakeResource(root=str(lake), **lake_settings),
                   "pyspark": local_pyspark_resource()},
    )


def _evaluations(instance: DagsterInstance) -> dict[tuple[str, str], bool]:
    """The latest evaluation of every check recorded in `instance`."""
    records = instance.get_event_records(
        EventRecordsFilter(event_type=DagsterEventType.ASSET_CHECK_EVALUATION), ascending=True
    )
    latest: dict[tuple[str, str], bool] = {}
    for record in records:
        evaluation = record.event_log_entry.dagster_event.event_specific_data
        latest[(evaluation.asset_key.to_user_string(), evaluation.check_name)] = evaluation.passed
    return latest


def _failed(result: ExecuteInProcessResult) -> set[tuple[str, str]]:
    return {
        (e.asset_key.to_user_string(), e.check_name)
        for e in result.get_asset_check_evaluations() if not e.passed
    }


def test_every_check_passes_after_the_demo_and_after_live_feeds(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    lake = demo_copy(tmp_path_factory, tmp_path / "lake", tmp_path / "dagster-home").lake
    instance = DagsterInstance.from_config(str(tmp_path / "dagster-home"))
    after_demo = _evaluations(instance)
    # a key check per keyed table, 3 per derived table, 2 freshness checks, and
    # late_rows_per_partition for each of the two partitioned views
    assert len(after_demo) == 8 + 3 * 5 + 2 + 2
    # the demo's data is from 2 Nov 2026: its watermarks trail the clock by weeks (README)
    assert [check for check, passed in after_demo.items() if not passed] == [
        ("orders", "watermark_freshness"), ("orders_enriched", "watermark_freshness"),
    ]

    definitions = _definitions(lake)
    feed_demo_lake(lake, seed=0)  # as `chronolake feed` or the demo_feed job would
    evaluated: set[tuple[str, str]] = set()
    for job in ("refresh_hourly_views", "refresh_views"):  # orders_enriched, then its readers
        refreshed = definitions.resolve_job_def(job).execute_in_process(instance=instance)
        assert refreshed.success
        # the watermark check compares it with the demo's run; the feed brought the orders and
        # rates up to now, so orders_enriched's watermark is fresh again
        assert _failed(refreshed) == set()
        evaluated |= {(e.asset_key.to_user_string(), e.check_name)
                      for e in refreshed.get_asset_check_evaluations()}
    assert ("orders_enriched", "watermark_freshness") in evaluated


def test_each_check_fails_on_data_built_to_break_it(tmp_path: Path, spark: SparkSession) -> None:
    build_demo_lake(tmp_path)
    Catalog(tmp_path, spark).declare((ROOT / "assets" / "platform.sql").read_text())
    instance = DagsterInstance.ephemeral()
    view = [AssetKey("orders_per_currency")]
    job = _definitions(tmp_path).resolve_implicit_global_asset_job_def()
    assert _failed(job.execute_in_process(instance=instance, asset_selection=view)) == set()

    # late_row_rate: an hour of orders that arrive after their windows were emitted
    append_orders(tmp_path / "orders", rng=random.Random(1), first_id=10_000, count=200,
                  start=DEMO_START)
    # watermark_never_decreases: a previous materialization recorded a later watermark
    instance.report_runless_asset_event(AssetMaterialization(
        "orders_per_currency", metadata={"chronolake/watermark": 4_000_000_000.0}
    ))
    # pending_rows_age: rows wait in open windows longer than a one-second bound
    time.sleep(1.5)
    strict = _definitions(tmp_path, max_pending_age_seconds=1.0)
    broken = strict.resolve_implicit_global_asset_job_def().execute_in_process(
        instance=instance, asset_selection=view
    )
    assert _failed(broken) == {
        ("orders_per_currency", "watermark_never_decreases"),
        ("orders_per_currency", LATE_RATE_CHECK),
        ("orders_per_currency", "pending_rows_age"),
    }
    [late] = [e for e in broken.get_asset_check_evaluations() if e.check_name == LATE_RATE_CHECK]
    assert late.metadata["late_rows"].value == 200  # every one of them, and nothing else

    # primary_key_unique: an order id written twice into the keyed orders table
    append_orders(tmp_path / "orders", rng=random.Random(2), first_id=7, count=1,
                  start=DEMO_START + timedelta(hours=1))
    observed = _definitions(tmp_path).resolve_job_def("observe_sources").execute_in_process(
        instance=instance
    )
    # and the demo's orders, from 2 Nov 2026, are stale
    assert _failed(observed) == {
        ("orders", "primary_key_unique"), ("orders", "watermark_freshness"),
    }



def test_a_key_check_repeats_its_answer_for_a_version_it_checked_and_checks_a_new_one(
    tmp_path: Path, spark: SparkSession
) -> None:
    """A run that finds nothing new leaves the table at the version checked last: the key
    check gives that evaluation's answer again (saying so) instead of a Spark job."""
    build_demo_lake(tmp_path)
    Catalog(tmp_path, spark).declare((ROOT / "assets" / "platform.sql").read_text())
    instance = DagsterInstance.ephemeral()
    job = _definitions(tmp_path).resolve_implicit_global_asset_job_def()

    def key_check() -> tuple[bool, int, list[str]]:
        run = job.execute_in_process(instance=instance, asset_selection=[AssetKey("latest_rates")])
        [evaluation] = [e for e in run.get_asset_check_evaluations()
                        if e.check_name == "primary_key_unique"]
        said = [entry.user_message for entry in instance.all_logs(run.run_id)
                if "duplicated key values" in entry.user_message]
        return evaluation.passed, int(evaluation.metadata["version"].value), said

    first, again = key_check(), key_check()
    feed_demo_lake(tmp_path, seed=0)
    fed = key_check()
    assert first[:2] == again[:2] == (True, first[1]) and fed[:2] == (True, first[1] + 1)
    assert [" as checked before" in line for line in first[2] + again[2] + fed[2]] == [
        False, True, False
    ]
