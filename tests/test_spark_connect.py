"""The reference platform on Spark Connect: a real server, reached by configuration alone."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from dagster import AssetKey, DagsterInstance
from deltalake import DeltaTable
from pyspark.sql import SparkSession

from chronolake import Catalog
from chronolake.connect_server import running_connect_server
from chronolake.demo import build_demo_lake
from chronolake.lake.layout import output_path
from chronolake.runtime.views import materialize_view

ROOT = Path(__file__).resolve().parent.parent
VIEWS = ("latest_rates", "orders_enriched")


@pytest.fixture(scope="module")
def connect_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    log = tmp_path_factory.mktemp("connect") / "server.log"
    with running_connect_server(log) as url:
        yield url


def _demo_lake(root: Path, spark: SparkSession) -> Path:
    build_demo_lake(root)
    list(Catalog(root, spark).run_script((ROOT / "assets" / "platform.sql").read_text()))
    return root


def _rows(lake: Path, view: str) -> list[tuple[str, ...]]:
    rows = DeltaTable(str(output_path(lake, view))).to_pyarrow_table().to_pylist()
    return sorted(tuple(str(row[column]) for column in sorted(row)) for row in rows)


def test_the_platform_runs_on_spark_connect_by_configuration_alone(
    connect_url: str, spark: SparkSession, tmp_path: Path
) -> None:
    """`CHRONOLAKE_SPARK_REMOTE` is all it takes: the run's Spark work happens in the server
    (its session has no SparkContext, so no stage counts its jobs), and every view holds
    the rows a local run writes from the same lake."""
    remote, local = _demo_lake(tmp_path / "remote", spark), _demo_lake(tmp_path / "local", spark)
    home = tmp_path / "dagster-home"
    home.mkdir()
    env = {**os.environ, "CHRONOLAKE_LAKE": str(remote), "DAGSTER_HOME": str(home),
           "CHRONOLAKE_SPARK_REMOTE": connect_url}
    dagster = Path(sys.executable).with_name("dagster")
    result = subprocess.run(
        [str(dagster), "asset", "materialize", "-m", "assets.definitions", "-d", ".",
         "--select", ",".join(VIEWS)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]

    event = DagsterInstance.from_config(str(home)).get_latest_materialization_event(
        AssetKey("orders_enriched")
    )
    assert event is not None and event.asset_materialization is not None
    metadata = {k: v.value for k, v in event.asset_materialization.metadata.items()}
    stages = metadata["chronolake/stages"]
    assert set(stages) >= {"read_changelog", "assign_watermarks", "temporal_join", "commit"}
    assert all(stage["spark_jobs"] is None for stage in stages.values()), stages
    assert "spark_jobs" not in metadata
    assert metadata["rows_out"] > 0

    for view in VIEWS:
        materialize_view(Catalog(local, spark), view)
    for view in VIEWS:
        assert _rows(remote, view) == _rows(local, view), view
