"""Real Dagster runs over a real demo lake: observations, materializations, metadata read back."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from dagster import (
    AssetKey,
    DagsterInstance,
    Definitions,
    ExecuteInProcessResult,
    GraphDefinition,
    MetadataValue,
    TableSchema,
    build_input_context,
    build_output_context,
    build_sensor_context,
    in_process_executor,
)
from pyspark.sql import SparkSession

from chronolake import Catalog, RunResult
from chronolake.dagster import (
    LakeResource,
    chronolake_asset_checks,
    chronolake_assets,
    declare_job,
    local_pyspark_resource,
    script_specs,
)
from chronolake.dagster.handoff import RunHandoffIOManager
from chronolake.dagster.metadata import run_metadata
from chronolake.demo.lake import build_demo_lake
from chronolake.errors import RunError
from chronolake.location import as_location
from chronolake.runtime.result import RunStatus, TickReport
from chronolake.watermarks.watermark import LONG_MIN
from ops import JOBS, sensors
from ops.demo_feed import DEMO_JOBS

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory, spark: SparkSession) -> Path:
    root = tmp_path_factory.mktemp("dagster-lake")
    build_demo_lake(root)
    list(Catalog(root, spark).run_script((ROOT / "assets" / "platform.sql").read_text()))
    return root


def _values(metadata: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v.value if isinstance(v, MetadataValue) else v for k, v in metadata.items()}


def _latest_metadata(instance: DagsterInstance, key: str) -> dict[str, object]:
    event = instance.get_latest_materialization_event(AssetKey(key))
    assert event is not None and event.asset_materialization is not None
    return {k: v.value for k, v in event.asset_materialization.metadata.items()}


def test_tables_are_assets_with_time_metadata(lake: Path) -> None:
    assets = {a.key.to_user_string(): a for a in chronolake_assets(lake)}
    assert set(assets) == {
        "orders", "rates", "rates_hybrid", "latest_rates", "orders_enriched",
        "orders_enriched_latest", "orders_per_currency", "revenue_per_currency",
    }
    rates = _values(assets["rates"].metadata)  # observable source asset
    assert rates["chronolake/kind"] == "versioned"
    assert rates["chronolake/rowtime"] == "currency_time"
    assert rates["chronolake/primary_key"] == "currency"
    assert rates["chronolake/watermark_strategy"] == "currency_time - INTERVAL '5' SECOND"
    assert rates["dagster/table_name"] == "rates"
    assert rates["dagster/uri"] == (lake / "rates").resolve().as_uri()
    schema = rates["dagster/column_schema"]
    assert isinstance(schema, TableSchema)
    assert [(c.name, c.type) for c in schema.columns] == [
        ("currency", "STRING"),
        ("rate", "DECIMAL(38, 10)"),
        ("currency_time", "TIMESTAMP(3) *ROWTIME*"),
        ("changelog_time", "TIMESTAMP_LTZ(3)"),
    ]
    assert _values(assets["orders"].metadata)["chronolake/kind"] == "versioned"
    enriched = assets["orders_enriched"].specs_by_key[AssetKey("orders_enriched")]
    # keyed by the probe's order_id and keeping its rowtime: versioned, as a table downstream
    assert _values(enriched.metadata)["chronolake/kind"] == "versioned"
    assert _values(enriched.metadata)["chronolake/primary_key"] == "order_id"
    assert {dep.asset_key.to_user_string() for dep in enriched.deps} == {"orders", "rates"}
    revenue = assets["revenue_per_currency"].specs_by_key[AssetKey("revenue_per_currency")]
    assert {dep.asset_key.to_user_string() for dep in revenue.deps} == {"orders_enriched"}


def test_derived_tables_run_as_graphs_whose_ops_are_the_stages(lake: Path) -> None:
    assets = {a.key.to_user_string(): a for a in chronolake_assets(lake)}
    for name in ("orders_enriched", "orders_enriched_latest"):
        graph = assets[name].node_def
        assert isinstance(graph, GraphDefinition)
        assert [node.name for node in graph.nodes_in_topological_order] == [
            "read_changelog", "assign_watermarks", "temporal_join", "commit",
        ]
    dedup = assets["latest_rates"].node_def
    assert isinstance(dedup, GraphDefinition)
    assert [node.name for node in dedup.nodes_in_topological_order] == [
        "read_changelog", "assign_watermarks", "deduplication", "commit",
    ]


WINDOW_VIEW = """CREATE VIEW orders_per_minute AS
SELECT window_start, window_end, currency, COUNT(*) AS orders, SUM(amount) AS amount
FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(order_time), INTERVAL '1' MINUTES))
GROUP BY window_start, window_end, currency"""


def test_a_window_view_runs_through_its_window_aggregate_op(
    tmp_path: Path, spark: SparkSession
) -> None:
    build_demo_lake(tmp_path)
    Catalog(tmp_path).declare((ROOT / "assets" / "platform.sql").read_text() + ";" + WINDOW_VIEW)
    assets = {a.key.to_user_string(): a for a in chronolake_assets(tmp_path)}
    graph = assets["orders_per_minute"].node_def
    assert isinstance(graph, GraphDefinition)
    assert [node.name for node in graph.nodes_in_topological_order] == [
        "read_changelog", "assign_watermarks", "window_aggregate", "commit",
    ]
    instance = DagsterInstance.ephemeral()
    definitions = Definitions(
        assets=list(assets.values()), executor=in_process_executor,
        resources={"lake": LakeResource(root=str(tmp_path)), "pyspark": local_pyspark_resource()},
    )
    job = definitions.resolve_implicit_global_asset_job_def()
    selection = [AssetKey("orders_per_minute")]
    done = job.execute_in_process(instance=instance, asset_selection=selection)
    assert done.success
    assert [event.step_key for event in done.all_events if event.is_step_success] == [
        f"orders_per_minute.{step}"
        for step in ("read_changelog", "assign_watermarks", "window_aggregate", "commit")
    ]
    assert all(evaluation.passed for evaluation in done.get_asset_check_evaluations())
    shown = _latest_metadata(instance, "orders_per_minute")
    assert shown["rows_out"] == shown["dagster/row_count"] >= shown["windows_fired"] > 0
    assert shown["open_windows"] > 0  # the last minutes wait for the watermark
    waiting = _check_metadata(done, "orders_per_minute", "pending_rows_age")
    assert 0 < waiting["oldest_pending_age_seconds"] < 3600  # rows held in open windows
    stages = shown["chronolake/stages"]
    assert isinstance(stages, dict)
    assert sorted(stages) == [
        "assign_watermarks", "commit", "metadata", "read_changelog", "window_aggregate",
    ]
    assert stages["read_changelog"]["spark_jobs"] == 0  # reading defines the rows, lazily
    assert stages["assign_watermarks"]["spark_jobs"] > 0  # orders' per-split maxima


def test_run_figures_ticks_and_split_alignment_become_metadata(tmp_path: Path) -> None:
    result = RunResult(
        table="orders_enriched", run=3, status=RunStatus.COMMITTED,
        figures={"rows_in": 10, "windows_fired": 2, "open_windows": 1, "late_rows": 3},
        ticks=TickReport(
            ticks=4, buffered_rows=[5, 9, 7, 0],
            split_watermarks={"orders": {"eu": 1_793_612_395_000, "us": LONG_MIN}},
            paused_splits={"orders": ["eu"]}, pauses={"orders": 2, "rates": 1},
            resumes={"orders": 1}, unaligned=["rates"],
        ),
    )
    metadata = _values(run_metadata(result, as_location(tmp_path / "not-materialized")))
    assert {k: metadata[k] for k in ("rows_in", "windows_fired", "open_windows", "late_rows")} == {
        "rows_in": 10, "windows_fired": 2, "open_windows": 1, "late_rows": 3,
    }
    assert {k: metadata[k] for k in (
        "ticks", "peak_buffered_rows", "split_pauses", "split_resumes", "paused_splits",
    )} == {"ticks": 4, "peak_buffered_rows": 9, "split_pauses": 3, "split_resumes": 1,
           "paused_splits": 1}
    assert metadata["chronolake/unaligned_inputs"] == "rates"
    assert str(metadata["chronolake/split_watermarks"]).splitlines()[2:] == [
        "| orders | eu | 2026-11-02T09:39:55.000+00:00 | paused |",
        "| orders | us | none yet |  |",
    ]


def test_run_handoff_outside_one_process_says_how_to_fix_it() -> None:
    manager = RunHandoffIOManager()
    upstream = build_output_context(step_key="orders_enriched.read_changelog", name="result")
    with pytest.raises(RunError, match="must execute in one process.*in_process_executor"):
        manager.load_input(build_input_context(upstream_output=upstream))


def test_observe_and_materialize_then_read_metadata_back(lake: Path, spark: SparkSession) -> None:
    instance = DagsterInstance.ephemeral()
    lake_resource = LakeResource(root=str(lake))
    definitions = Definitions(
        assets=chronolake_assets(lake),
        asset_checks=chronolake_asset_checks(lake),
        jobs=[*JOBS, *DEMO_JOBS],
        sensors=sensors(lake_resource.location),
        resources={"lake": lake_resource, "pyspark": local_pyspark_resource()},
    )
    observed = definitions.resolve_job_def("observe_sources").execute_in_process(instance=instance)
    assert observed.success
    assert _checks(observed) == {
        ("orders", "primary_key_unique"): True,
        ("orders", "watermark_freshness"): False,  # the demo's orders are from 2 Nov 2026
        ("rates", "primary_key_unique"): True,
        ("rates_hybrid", "primary_key_unique"): True,
    }
    rates_version = instance.get_latest_data_version_record(AssetKey("rates"))
    assert rates_version is not None
    assert rates_version.asset_observation.data_version == "5"

    # the hourly partitioned view first: the views without partitions read it
    hourly = definitions.resolve_job_def("refresh_hourly_views")
    # a full refresh through the launchpad's config path; on a first run it reads what a plain
    # run reads
    rebuild = {"ops": {"orders_enriched": {"config": {"full_refresh": True}}}}
    rebuilt = hourly.execute_in_process(instance=instance, run_config=rebuild)
    assert rebuilt.success
    assert _checks(rebuilt) == {
        ("orders_enriched", "watermark_never_decreases"): True,
        ("orders_enriched", "late_row_rate"): True,
        ("orders_enriched", "pending_rows_age"): True,
        ("orders_enriched", "watermark_freshness"): False,  # the demo's orders are old
        ("orders_enriched", "late_rows_per_partition"): True,  # no hour complete yet
        ("orders_enriched", "primary_key_unique"): True,  # evaluated by its commit
    }
    refresh = definitions.resolve_job_def("refresh_views")
    refreshed = refresh.execute_in_process(instance=instance)
    assert refreshed.success
    assert _checks(refreshed) == {
        ("latest_rates", "primary_key_unique"): True,
        ("latest_rates", "watermark_never_decreases"): True,
        ("latest_rates", "late_row_rate"): True,
        ("latest_rates", "pending_rows_age"): True,
        ("orders_enriched_latest", "watermark_never_decreases"): True,
        ("orders_enriched_latest", "late_row_rate"): True,
        ("orders_enriched_latest", "pending_rows_age"): True,
        ("orders_enriched_latest", "primary_key_unique"): True,
        ("revenue_per_currency", "watermark_never_decreases"): True,
        ("revenue_per_currency", "late_row_rate"): True,
        ("revenue_per_currency", "pending_rows_age"): True,
        ("revenue_per_currency", "primary_key_unique"): True,
    }
    # the daily partitioned view runs in its own job: Dagster runs assets of different
    # partitions in different jobs
    daily = definitions.resolve_job_def("refresh_daily_views").execute_in_process(
        instance=instance
    )
    assert _checks(daily) == {
        ("orders_per_currency", "watermark_never_decreases"): True,
        ("orders_per_currency", "late_row_rate"): True,
        ("orders_per_currency", "pending_rows_age"): True,
        ("orders_per_currency", "late_rows_per_partition"): True,
        ("orders_per_currency", "primary_key_unique"): True,
    }
    latest = _latest_metadata(instance, "latest_rates")
    assert latest["dagster/row_count"] == 4
    assert "| EUR | 1.0900000000 |" in str(latest["preview"])
    # a run launched for no partition: a materialization of none, with the run's figures
    assert instance.get_materialized_partitions(AssetKey("orders_enriched")) == set()
    enriched = _latest_metadata(instance, "orders_enriched")
    assert enriched["chronolake/status"] == "committed"
    assert str(enriched["chronolake/message"]).startswith("run 1 rebuilt the table from scratch")
    stages = enriched["chronolake/stages"]
    assert isinstance(stages, dict)
    assert sorted(stages) == [
        "assign_watermarks", "commit", "metadata", "read_changelog", "temporal_join",
    ]
    assert stages["assign_watermarks"]["spark_jobs"] > 0  # the event-time inputs' maxima
    assert stages["metadata"]["spark_jobs"] == 0  # row count, preview and checks: no Spark
    assert enriched["spark_jobs"] == sum(stage["spark_jobs"] for stage in stages.values()) > 0
    pending_age = _check_metadata(rebuilt, "orders_enriched", "pending_rows_age")
    assert 0 < pending_age["oldest_pending_age_seconds"] < 3600  # the demo lake's commits
    # the demo's 2000 orders, two corrections (-U/+U each) and a cancellation (-D)
    assert enriched["rows_out"] + enriched["pending_rows"] == 2005
    assert enriched["update_befores_out"] == enriched["update_afters_out"] == 2
    assert enriched["deletes_out"] == 1
    assert enriched["dagster/row_count"] == enriched["inserts_out"] - 1 > 0
    assert isinstance(enriched["chronolake/watermark"], float)
    assert enriched["watermark_lag_seconds"] > 0
    hybrid = _latest_metadata(instance, "orders_enriched_latest")
    assert hybrid["chronolake/source_phase/rates_hybrid"] == "changelog"
    assert hybrid["chronolake/switch_version/rates_hybrid"] == 5
    # the GBP orders (GBP was deleted, no snapshot gap), and the cancellation of one of them
    assert hybrid["unmatched_rows"] == 408

    assert hourly.execute_in_process(instance=instance).success  # again: nothing new
    again = _latest_metadata(instance, "orders_enriched")
    assert again["chronolake/status"] == "up-to-date"
    assert again["dagster/row_count"] == enriched["dagster/row_count"]
    assert again["spark_jobs"] == 0  # nothing new: the Delta logs say so, without Spark

    sensor = definitions.resolve_sensor_def("new_delta_versions")
    first = sensor.evaluate_tick(build_sensor_context(instance=instance))
    assert [r.run_key for r in first.run_requests] == [
        "refresh_views:orders@5,rates@5", "refresh_hourly_views:orders@5,rates@5",
        "refresh_daily_views:orders@5,rates@5",
    ]
    quiet = sensor.evaluate_tick(build_sensor_context(instance=instance, cursor=first.cursor))
    assert quiet.run_requests == [] and quiet.skip_message
    fed = definitions.resolve_job_def("demo_feed").execute_in_process(instance=instance)
    assert fed.success
    moved = sensor.evaluate_tick(build_sensor_context(instance=instance, cursor=first.cursor))
    assert [r.run_key for r in moved.run_requests] == [  # +I, -U/+U, -D
        "refresh_views:orders@8,rates@6", "refresh_hourly_views:orders@8,rates@6",
        "refresh_daily_views:orders@8,rates@6",
    ]
    assert hourly.execute_in_process(instance=instance).success
    assert _latest_metadata(instance, "orders_enriched")["build_rows_in"] == 2  # -U and +U


def _check_metadata(result: ExecuteInProcessResult, asset: str, check: str) -> dict[str, Any]:
    [evaluation] = [
        e for e in result.get_asset_check_evaluations()
        if e.asset_key == AssetKey(asset) and e.check_name == check
    ]
    return _values(evaluation.metadata)


def _checks(result: ExecuteInProcessResult) -> dict[tuple[str, str], bool]:
    return {
        (e.asset_key.to_user_string(), e.check_name): e.passed
        for e in result.get_asset_check_evaluations()
    }


def test_workspace_loads_headless(lake: Path) -> None:
    env = {**os.environ, "CHRONOLAKE_LAKE": str(lake)}
    dagster = Path(sys.executable).with_name("dagster")
    result = subprocess.run(
        [str(dagster), "definitions", "validate", "-w", "workspace.yaml"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_asset_materialize_works_headless(lake: Path, tmp_path: Path) -> None:
    """`dagster asset materialize` executes with the platform's executor: a derived table's ops
    hand their Spark work over in memory, which fails unless they share one process."""
    env = {**os.environ, "CHRONOLAKE_LAKE": str(lake), "DAGSTER_HOME": str(tmp_path)}
    dagster = Path(sys.executable).with_name("dagster")
    result = subprocess.run(
        [str(dagster), "asset", "materialize", "-m", "assets.definitions", "-d", ".",
         "--select", "latest_rates,orders_enriched_latest"],  # orders_enriched is partitioned
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "RUN_SUCCESS" in result.stdout + result.stderr
    materialized = DagsterInstance.from_config(str(tmp_path))
    for asset in ("latest_rates", "orders_enriched_latest"):
        assert materialized.get_latest_materialization_event(AssetKey(asset)) is not None


def test_loading_the_code_location_reads_and_writes_nothing_in_the_lake(tmp_path: Path) -> None:
    """A deployment that may only read the lake, or not reach it yet, still loads: the asset
    graph comes from `assets/platform.sql`, parsed in memory."""
    lake = tmp_path / "lake"  # not there at all
    shown = subprocess.run(
        [sys.executable, "-c",
         "import assets.definitions as d\n"
         "print(sorted(k.to_user_string() for k in d.defs.resolve_asset_graph()"
         ".get_all_asset_keys()))\n"],
        cwd=ROOT, env={**os.environ, "CHRONOLAKE_LAKE": str(lake)}, capture_output=True,
        text=True, timeout=300,
    )
    assert shown.returncode == 0, shown.stderr[-3000:]
    platform = script_specs((ROOT / "assets" / "platform.sql").read_text())
    reports = ["orders_per_currency_daily_report"]  # a plain asset downstream
    assert shown.stdout.strip() == str(sorted([*(spec.name for spec in platform), *reports]))
    assert not lake.exists()


def test_a_view_the_lake_does_not_declare_stops_until_the_declare_job_ran(
    tmp_path: Path, spark: SparkSession
) -> None:
    """Declaring is an explicit step: a run of an undeclared view stops saying which job
    declares it, with nothing written; after `declare_platform`, the same run succeeds."""
    lake = tmp_path / "lake"
    build_demo_lake(lake)
    ddl = (ROOT / "assets" / "platform.sql").read_text()
    specs = script_specs(ddl)
    resource = LakeResource(root=str(lake))
    definitions = Definitions(
        assets=chronolake_assets(lake, specs), jobs=[declare_job(ddl)],
        resources={"lake": resource, "pyspark": local_pyspark_resource()},
        executor=in_process_executor,
    )
    instance = DagsterInstance.ephemeral()
    before = sorted(p.relative_to(lake) for p in lake.rglob("*"))
    job = definitions.resolve_implicit_global_asset_job_def()
    refused = job.execute_in_process(instance=instance, raise_on_error=False,
                                     asset_selection=[AssetKey("latest_rates")])
    assert not refused.success
    failure = next(event for event in refused.all_events if event.is_step_failure)
    message = failure.step_failure_data.error.to_string()
    assert "'latest_rates' is an asset of this code location, but the lake at" in message
    assert "run its declare job ('declare_platform'" in message
    assert sorted(p.relative_to(lake) for p in lake.rglob("*")) == before

    declared = definitions.resolve_job_def("declare_platform").execute_in_process(
        instance=instance)
    assert declared.success
    assert Catalog(lake).names() == sorted(spec.name for spec in specs)
    ran = job.execute_in_process(instance=instance, asset_selection=[AssetKey("latest_rates")])
    assert ran.success
