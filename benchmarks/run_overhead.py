"""A run's fixed cost: one derived-table run on a trivial input, against a bare Spark start.

Builds a lake with one order and one rate, registers the reference platform's
DDL, then times in fresh processes (median of `--repeat`):

- baseline: start Python, start local Spark, run one trivial job, exit;
- cli: `chronolake run orders_enriched` end to end (process start to exit);
- dagster: `dagster asset materialize --select orders_enriched` on the reference
  platform (`assets.definitions`), end to end: the graph-backed asset's ops
  `read_changelog` → `assign_watermarks` → `temporal_join` → `commit`, in one process.
  Its Dagster instance (`DAGSTER_HOME`) exists beforehand, as a deployment's does:
  creating the instance's storage is a one-time cost of about a second, not a run's;
- dagster floor: `dagster asset materialize` of one asset that starts the same Spark
  resource and counts one row (`_dagster_floor.py`), on the same kind of instance: what
  Dagster and Spark cost any run, so that `dagster - floor` is what chronolake adds;
- dagster on Spark Connect: the same Dagster run with `CHRONOLAKE_SPARK_REMOTE` pointing at a
  local Spark Connect server (`chronolake.spark.connect_server`) started once beforehand: the
  run's process starts no JVM. The first run on the fresh server is reported apart (the
  server's JVM is cold then), the median is over `--repeat` runs after it.

The Dagster run records, per stage, its Spark jobs and seconds
(`chronolake/stages` metadata); the report gives those of the median run.
Reports to stdout and as JSON under `benchmarks/results/`.
Usage: `.venv/bin/python benchmarks/run_overhead.py --repeat 3`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
from dagster import AssetKey, DagsterInstance
from deltalake import write_deltalake

from chronolake import Catalog
from chronolake.demo.lake import CDF_ON, ORDERS_SCHEMA, RATES_SCHEMA
from chronolake.spark.connect_server import running_connect_server

ROOT = Path(__file__).resolve().parent.parent
BASELINE = (
    "from chronolake.spark.session import local_spark_session; "
    "local_spark_session().range(1).count()"
)
VIEW = "orders_enriched"
INSTANCE_YAML = "telemetry:\n  enabled: false\n"
FLOOR_DEFINITIONS = ROOT / "benchmarks" / "_dagster_floor.py"


def _tiny_lake(root: Path) -> None:
    at = datetime(2026, 11, 2, 9, 0, 0)
    write_deltalake(root / "rates", pa.table(
        {"currency": ["EUR"], "rate": pa.array([Decimal("1.1")], pa.decimal128(38, 10)),
         "currency_time": pa.array([at], pa.timestamp("us"))}, schema=RATES_SCHEMA,
    ), configuration=CDF_ON)
    write_deltalake(root / "orders", pa.table(
        {"order_id": [1], "currency": ["EUR"], "amount": pa.array([Decimal("9.99")],
         pa.decimal128(10, 2)), "order_time": pa.array([at], pa.timestamp("us"))},
        schema=ORDERS_SCHEMA,
    ), configuration=CDF_ON)  # the platform reads orders' change data feed
    Catalog(root).declare((ROOT / "assets" / "platform.sql").read_text())


def _seconds(command: list[str], *, env: dict[str, str] | None = None) -> float:
    started = time.monotonic()
    subprocess.run(command, check=True, capture_output=True, cwd=ROOT, env=env)
    return time.monotonic() - started


def _dagster_instance(home: Path) -> None:
    """A Dagster instance whose storage exists, as a deployment's does."""
    home.mkdir()
    (home / "dagster.yaml").write_text(INSTANCE_YAML)
    with DagsterInstance.from_config(str(home)) as instance:
        instance.get_runs(limit=1)  # creates the instance's storage, once per deployment


def _materialize(target: list[str], select: str, env: dict[str, str]) -> float:
    """Seconds of one `dagster asset materialize` process, start to exit."""
    dagster = str(Path(sys.executable).with_name("dagster"))
    return _seconds(
        [dagster, "asset", "materialize", *target, "-d", ".", "--select", select], env=env
    )


def _dagster_run(
    lake: Path, home: Path, remote: str | None = None
) -> tuple[float, dict[str, Any]]:
    """Seconds of `dagster asset materialize` and the run's recorded stages (on the Spark
    Connect server at `remote`, if given)."""
    _dagster_instance(home)
    env = {**os.environ, "CHRONOLAKE_LAKE": str(lake), "DAGSTER_HOME": str(home)}
    if remote is not None:
        env["CHRONOLAKE_SPARK_REMOTE"] = remote
    seconds = _materialize(["-m", "assets.definitions"], VIEW, env)
    with DagsterInstance.from_config(str(home)) as instance:
        event = instance.get_latest_materialization_event(AssetKey(VIEW))
    assert event is not None and event.asset_materialization is not None, "no materialization"
    metadata = {k: v.value for k, v in event.asset_materialization.metadata.items()}
    return seconds, {
        "run_seconds": metadata["run_seconds"],
        "spark_jobs": metadata.get("spark_jobs"),
        "stages": metadata["chronolake/stages"],
    }


def _dagster_floor(home: Path) -> float:
    """Seconds of materializing `_dagster_floor.py`'s one-Spark-job asset."""
    _dagster_instance(home)
    env = {**os.environ, "DAGSTER_HOME": str(home)}
    return _materialize(["-f", str(FLOOR_DEFINITIONS)], "one_spark_job", env)


def _connect_runs(folder: Path, repeat: int) -> list[tuple[float, dict[str, Any]]]:
    """`_dagster_run` of `repeat` + 1 Dagster runs on one local Spark Connect server, each on its
    own trivial lake; the first meets the server's cold JVM."""
    runs = []
    with running_connect_server(folder / "connect.log") as url:
        for run in range(repeat + 1):
            lake = folder / f"connect-lake-{run}"
            _tiny_lake(lake)
            runs.append(_dagster_run(lake, folder / f"connect-home-{run}", url))
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="Runs per variant (median).")
    args = parser.parse_args()
    chronolake = str(Path(sys.executable).with_name("chronolake"))
    baseline, cli, dagster, floor = [], [], [], []
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory() as folder:
            for name in ("cli", "dagster"):
                _tiny_lake(Path(folder) / name)
            baseline.append(_seconds([sys.executable, "-c", BASELINE]))
            cli.append(_seconds([chronolake, "run", VIEW, "--lake", f"{folder}/cli"]))
            dagster.append(_dagster_run(Path(folder) / "dagster", Path(folder) / "home"))
            floor.append(_dagster_floor(Path(folder) / "floor-home"))
    with tempfile.TemporaryDirectory() as folder:
        connect_first, *connect = _connect_runs(Path(folder), args.repeat)
    median_dagster, median_connect = (
        sorted(runs, key=lambda run: run[0])[len(runs) // 2] for runs in (dagster, connect)
    )
    result = {
        "baseline_spark_start_seconds": round(statistics.median(baseline), 2),
        "cli_run_seconds": round(statistics.median(cli), 2),
        "dagster_run_seconds": round(median_dagster[0], 2),
        "dagster_floor_seconds": round(statistics.median(floor), 2),
        "connect_first_run_seconds": round(connect_first[0], 2),
        "connect_run_seconds": round(median_connect[0], 2),
        "connect_stages": median_connect[1]["stages"],
        "dagster_ops_seconds": median_dagster[1]["run_seconds"],
        "dagster_spark_jobs": median_dagster[1]["spark_jobs"],
        "dagster_stages": median_dagster[1]["stages"],
        "load_average": os.getloadavg()[0],
        "measured_at": datetime.now().isoformat(timespec="seconds"),
    }
    for variant in ("cli_run", "dagster_run", "dagster_floor", "connect_run"):
        seconds = result[f"{variant}_seconds"]
        result[f"{variant}_ratio"] = round(seconds / result["baseline_spark_start_seconds"], 2)
    result["chronolake_share_seconds"] = round(
        result["dagster_run_seconds"] - result["dagster_floor_seconds"], 2
    )
    print(json.dumps(result))
    out = ROOT / "benchmarks" / "results"
    out.mkdir(parents=True, exist_ok=True)
    (out / "run_overhead.json").write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
