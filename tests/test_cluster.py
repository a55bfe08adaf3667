"""The reference platform on a real Spark standalone cluster gives what local mode gives.

A master and two workers (1 core each) run from the installed pyspark; a driver of its
own (a subprocess: one SparkSession per process) runs the platform's derived tables on
them, configured as a user would (`CHRONOLAKE_SPARK_MASTER`, `spark-defaults.conf` with
the executors' Python and chronolake's code as `spark.submit.pyFiles`). Meanwhile the
test's local session runs them on the demo lake on a disk, while the cluster runs them on a
copy in a bucket (moto's S3 server), read and written by the executors through S3A;
outputs, late rows, figures and checkpoints must be the same.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
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
from _s3 import BUCKET
from deltalake import DeltaTable
from pyspark.sql import SparkSession

from chronolake import Catalog
from chronolake.demo.lake import build_demo_lake
from chronolake.lake.layout import late_path, output_path, state_path
from chronolake.lake.storage import Storage

pytestmark = [pytest.mark.slow, pytest.mark.spark, pytest.mark.own_processes]

CHECKPOINT_TIMES = ("finished_at",)
"""Checkpoint fields that say when a run ended (wall-clock), not what it computed."""


@pytest.fixture(scope="module")
def cluster(s3: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """The cluster, started where the S3 emulator's environment is set: its executors find
    the bucket's credentials in their environment, as on hosts with an instance role."""
    with standalone_cluster(tmp_path_factory.mktemp("spark-standalone")) as running:
        yield running


def test_platform_on_a_cluster_over_a_bucket_equals_local_mode(
    spark: SparkSession, cluster: Cluster, tmp_path: Path
) -> None:
    """The executors read and write a lake in the bucket through S3A (its jars and settings
    come from the driver's chronolake session), and leave what local mode leaves on a disk."""
    local_lake, bucket_lake = tmp_path / "local", f"s3://{BUCKET}/cluster-{tmp_path.name}"
    build_demo_lake(local_lake)
    bucket = Storage(bucket_lake)
    for file in sorted(local_lake.rglob("*")):  # the same commits, timestamps included
        if file.is_file():
            bucket.write_bytes(file.relative_to(local_lake).as_posix(), file.read_bytes())
    driver = start_driver(cluster, bucket_lake, tmp_path / "driver")
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
    for name in local:
        for table in (output_path, late_path):
            written = _arrow_rows(str(table(local_lake, name)))
            assert _arrow_rows(str(table(bucket_lake, name))) == written, f"{name} differs"
        checkpoints = _checkpoints(Storage(state_path(local_lake, name)))
        assert checkpoints and _checkpoints(Storage(state_path(bucket_lake, name))) == checkpoints
    assert _arrow_rows(str(output_path(bucket_lake, "orders_enriched"))), "rows in the bucket"


def _arrow_rows(location: str) -> list[tuple[object, ...]]:
    """A Delta table's latest rows read by delta-rs's own engine (deletion vectors honoured),
    without commit timestamps (when a run committed what the next hop reads), in a stable
    order: a disk's and a bucket's alike."""
    reader = pa.RecordBatchReader.from_stream(DeltaTable(location).scan())
    table = reader.read_all()
    keep = [c for c in table.column_names if not c.endswith("commit_timestamp")]
    rows = table.select(keep).to_pylist()
    return sorted((tuple(row.values()) for row in rows), key=repr)


def _checkpoints(state: Storage) -> list[dict[str, object]]:
    """A table's checkpoints, without when they were written and which attempt at each run
    wrote its state (a random name)."""
    found = []
    for name in state.names():
        if not (name.startswith("checkpoint-") and name.endswith(".json")):
            continue
        checkpoint = json.loads(state.read_text(name) or "{}")
        checkpoint["state"] = {role: _any_attempt(path)
                               for role, path in checkpoint["state"].items()}
        found.append({k: v for k, v in checkpoint.items() if k not in CHECKPOINT_TIMES})
    return found


def _any_attempt(path: str) -> str:
    return re.sub(r"/attempt-[0-9a-f]+/", "/<attempt>/", path)
