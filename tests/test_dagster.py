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
    MetadataValue,
    TableSchema,
    build_sensor_context,
)
from pyspark.sql import SparkSession

from chronolake import Catalog
from chronolake.dagster import (
    LakeResource,
    chronolake_asset_checks,
    chronolake_assets,
    local_pyspark_resource,
)
from chronolake.demo import build_demo_lake
from ops import JOBS, sensors

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
        "orders_enriched_latest",
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
    assert _values(assets["orders"].metadata)["chronolake/kind"] == "regular"
    enriched = assets["orders_enriched"].specs_by_key[AssetKey("orders_enriched")]
    assert _values(enriched.metadata)["chronolake/kind"] == "regular"
    assert {dep.asset_key.to_user_string() for dep in enriched.deps} == {"orders", "rates"}


def test_observe_and_materialize_then_read_metadata_back(lake: Path, spark: SparkSession) -> None:
    instance = DagsterInstance.ephemeral()
    lake_resource = LakeResource(root=str(lake))
    definitions = Definitions(
        assets=chronolake_assets(lake),
        asset_checks=chronolake_asset_checks(lake),
        jobs=JOBS,
        sensors=sensors(lake_resource),
        resources={"lake": lake_resource, "pyspark": local_pyspark_resource()},
    )
    observed = definitions.resolve_job_def("observe_sources").execute_in_process(instance=instance)
    assert observed.success
    assert _checks(observed) == {
        ("rates", "primary_key_unique"): True,
        ("rates_hybrid", "primary_key_unique"): True,
    }
    rates_version = instance.get_latest_data_version_record(AssetKey("rates"))
    assert rates_version is not None
    assert rates_version.asset_observation.data_version == "5"

    refresh = definitions.resolve_job_def("refresh_views")
    refreshed = refresh.execute_in_process(instance=instance)
    assert refreshed.success
    assert _checks(refreshed) == {
        ("latest_rates", "primary_key_unique"): True,
        ("orders_enriched", "watermark_never_decreases"): True,
        ("orders_enriched", "late_row_rate"): True,
        ("orders_enriched", "pending_rows_age"): True,
        ("orders_enriched_latest", "watermark_never_decreases"): True,
        ("orders_enriched_latest", "late_row_rate"): True,
        ("orders_enriched_latest", "pending_rows_age"): True,
    }
    latest = _latest_metadata(instance, "latest_rates")
    assert latest["dagster/row_count"] == 4
    assert "| EUR | 1.0900000000 |" in str(latest["preview"])
    enriched = _latest_metadata(instance, "orders_enriched")
    assert enriched["chronolake/status"] == "committed"
    assert enriched["rows_out"] == enriched["dagster/row_count"] > 0
    assert enriched["rows_out"] + enriched["pending_rows"] == 2000
    assert isinstance(enriched["chronolake/watermark"], float)
    assert enriched["watermark_lag_seconds"] > 0
    hybrid = _latest_metadata(instance, "orders_enriched_latest")
    assert hybrid["chronolake/source_phase/rates_hybrid"] == "changelog"
    assert hybrid["chronolake/switch_version/rates_hybrid"] == 5
    assert hybrid["unmatched_rows"] == 407  # the GBP orders: GBP was deleted, no snapshot gap

    assert refresh.execute_in_process(instance=instance).success  # again: nothing new
    again = _latest_metadata(instance, "orders_enriched")
    assert again["chronolake/status"] == "up-to-date"
    assert again["dagster/row_count"] == enriched["dagster/row_count"]

    sensor = definitions.resolve_sensor_def("new_delta_versions")
    first = sensor.evaluate_tick(build_sensor_context(instance=instance))
    assert [r.run_key for r in first.run_requests] == ["orders@3,rates@5"]
    quiet = sensor.evaluate_tick(build_sensor_context(instance=instance, cursor=first.cursor))
    assert quiet.run_requests == [] and quiet.skip_message
    fed = definitions.resolve_job_def("demo_feed").execute_in_process(instance=instance)
    assert fed.success
    moved = sensor.evaluate_tick(build_sensor_context(instance=instance, cursor=first.cursor))
    assert [r.run_key for r in moved.run_requests] == ["orders@4,rates@6"]
    assert refresh.execute_in_process(instance=instance).success
    assert _latest_metadata(instance, "orders_enriched")["build_rows_in"] == 2  # -U and +U


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
    env = {**os.environ, "CHRONOLAKE_LAKE": str(lake), "DAGSTER_HOME": str(tmp_path)}
    dagster = Path(sys.executable).with_name("dagster")
    result = subprocess.run(
        [str(dagster), "asset", "materialize", "-m", "assets.definitions", "-d", ".",
         "--select", "latest_rates"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "RUN_SUCCESS" in result.stdout + result.stderr
    materialized = DagsterInstance.from_config(str(tmp_path))
    assert materialized.get_latest_materialization_event(AssetKey("latest_rates")) is not None
