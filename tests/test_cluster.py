"""The reference platform on a real Spark standalone cluster gives what local mode gives.

A master and two workers (1 core each) run from the installed pyspark; a driver of its
own (a subprocess: one SparkSession per process) runs the platform's derived tables on
them, configured as a user would (`CHRONOLAKE_SPARK_MASTER`, `spark-defaults.conf` with
the executors' Python and chronolake's code as `spark.submit.pyFiles`). Meanwhile the
test's local session runs them on a second copy of the demo lake; outputs, late rows,
figures, checkpoints and state must be the same.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from _cluster import (
    CODE_ZIP,
    WORKERS,
    Cluster,
    driver_output,
    run_platform,
    standalone_cluster,
    start_driver,
)
from _crash import delta_rows, same_rows
from pyspark.sql import DataFrame, SparkSession

from chronolake.catalog import Catalog
from chronolake.demo import build_demo_lake
from chronolake.lake.layout import late_path, output_path, state_path
from chronolake.schema import TableSpec

pytestmark = [pytest.mark.slow, pytest.mark.spark]

CHECKPOINT_TIMES = ("finished_at",)
"""Checkpoint fields that say when a run ended (wall-clock), not what it computed."""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with standalone_cluster(tmp_path_factory.mktemp("spark-standalone")) as running:
        yield running


def test_platform_on_a_cluster_equals_local_mode(
    spark: SparkSession, cluster: Cluster, tmp_path: Path
) -> None:
    local_lake, cluster_lake = tmp_path / "local", tmp_path / "cluster"
    build_demo_lake(local_lake)
    shutil.copytree(local_lake, cluster_lake)  # the same commits, commit timestamps included
    driver = start_driver(cluster, cluster_lake, tmp_path / "driver")
    local = run_platform(Catalog(local_lake, spark))  # meanwhile, in the test's session
    on_cluster = driver_output(driver, tmp_path / "driver")

    # Every task ran in the workers' executors, none in the driver.
    assert on_cluster["master"] == cluster.url
    tasks = on_cluster["executor_tasks"]
    assert tasks.pop("driver", 0) == 0
    assert len(tasks) == WORKERS and all(done > 0 for done in tasks.values()), tasks
    (app,) = [a for a in cluster.state()["completedapps"] if a["id"] == on_cluster["app_id"]]
    assert app["cores"] == WORKERS
    # Executors run the venv's Python and import chronolake from the shipped zip.
    for module, python in on_cluster["executor_code"]:
        assert f"{CODE_ZIP}/chronolake/" in module and python == sys.executable

    assert set(local) == {
        "latest_rates", "orders_enriched", "orders_enriched_latest", "orders_per_currency",
        "revenue_per_currency",
    }
    assert on_cluster["results"] == local
    catalog = Catalog(local_lake, spark)
    specs = catalog.specs().values()
    proctime = [c for s in specs if isinstance(s, TableSpec) and (c := s.proctime)]
    for name in local:
        written = _written_tables(local_lake, name)
        on_cluster = _written_tables(cluster_lake, name)
        assert on_cluster.keys() == written.keys()
        for table in sorted(written):
            assert same_rows(
                _timeless(delta_rows(spark, cluster_lake / on_cluster[table]), proctime),
                _timeless(delta_rows(spark, local_lake / written[table]), proctime),
            ), f"{table} differs"
        checkpoints = _checkpoints(state_path(local_lake, name))
        assert checkpoints and _checkpoints(state_path(cluster_lake, name)) == checkpoints


def _timeless(rows: DataFrame, proctime: list[str]) -> DataFrame:
    """`rows` without wall-clock columns: PROCTIME() columns (Spark's current_timestamp()
    when read, not the runs' clock) and commit timestamps (when a run committed the output
    that the next hop reads)."""
    return rows.drop(*proctime, *[c for c in rows.columns if c.endswith("commit_timestamp")])


def _written_tables(lake: Path, name: str) -> dict[str, Path]:
    """Each Delta table the runs of `name` wrote under `lake` (output, late rows, state), by
    its path with the attempt that wrote a state table left out."""
    tables = {output_path(lake, name), late_path(lake, name)}
    tables |= {log.parent for log in state_path(lake, name).rglob("_delta_log")}
    return {
        _any_attempt(str(table.relative_to(lake))): table.relative_to(lake)
        for table in tables if (table / "_delta_log").is_dir()
    }


def _checkpoints(state: Path) -> list[dict[str, object]]:
    """A table's checkpoints, without when they were written and which attempt at each run
    wrote its state (a random name)."""
    found = []
    for path in sorted(state.glob("checkpoint-*.json")):
        checkpoint = json.loads(path.read_text())
        checkpoint["state"] = {role: _any_attempt(name)
                               for role, name in checkpoint["state"].items()}
        found.append({k: v for k, v in checkpoint.items() if k not in CHECKPOINT_TIMES})
    return found


def _any_attempt(path: str) -> str:
    return re.sub(r"/attempt-[0-9a-f]+/", "/<attempt>/", path)
