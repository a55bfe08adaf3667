"""A run's fixed cost: one derived-table run on a trivial input, against a bare Spark start.

Builds a lake with one order and one rate, registers the reference platform's
DDL, then times in fresh processes (median of `--repeat`):

- baseline: start Python, start local Spark, run one trivial job, exit;
- cli: `chronolake run orders_enriched` end to end (process start to exit);
- dagster: `dagster asset materialize --select orders_enriched` on the reference
  platform (`assets.definitions`), end to end: the graph-backed asset's ops
  `read_changelog` → `assign_watermarks` → `temporal_join` → `commit`, in one process.
  Its Dagster instance (`DAGSTER_HOME`) exists beforehand, as a deployment's does:
  creating the instance's storage is a one-time cost of about a second, not a run's.

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

from chronolake.catalog import Catalog
from chronolake.demo import CDF_ON, ORDERS_SCHEMA, RATES_SCHEMA

ROOT = Path(__file__).resolve().parent.parent
BASELINE = (
    "from chronolake._spark import local_spark_session; "
    "local_spark_session().range(1).count()"
)
VIEW = "orders_enriched"
INSTANCE_YAML = "telemetry:\n  enabled: false\n"


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
    ))
    Catalog(root).declare((ROOT / "assets" / "platform.sql").read_text())


def _seconds(command: list[str], *, env: dict[str, str] | None = None) -> float:
    started = time.monotonic()
    subprocess.run(command, check=True, capture_output=True, cwd=ROOT, env=env)
    return time.monotonic() - started


def _dagster_run(lake: Path, home: Path) -> tuple[float, dict[str, Any]]:
    """Seconds of `dagster asset materialize` and the run's recorded stages."""
    home.mkdir()
    (home / "dagster.yaml").write_text(INSTANCE_YAML)
    with DagsterInstance.from_config(str(home)) as instance:
        instance.get_runs(limit=1)  # creates the instance's storage, once per deployment
    env = {**os.environ, "CHRONOLAKE_LAKE": str(lake), "DAGSTER_HOME": str(home)}
    dagster = str(Path(sys.executable).with_name("dagster"))
    seconds = _seconds(
        [dagster, "asset", "materialize", "-m", "assets.definitions", "-d", ".",
         "--select", VIEW], env=env,
    )
    with DagsterInstance.from_config(str(home)) as instance:
        event = instance.get_latest_materialization_event(AssetKey(VIEW))
    assert event is not None and event.asset_materialization is not None, "no materialization"
    metadata = {k: v.value for k, v in event.asset_materialization.metadata.items()}
    return seconds, {
        "run_seconds": metadata["run_seconds"],
        "spark_jobs": metadata.get("spark_jobs"),
        "stages": metadata["chronolake/stages"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="Runs per variant (median).")
    args = parser.parse_args()
    chronolake = str(Path(sys.executable).with_name("chronolake"))
    baseline, cli, dagster = [], [], []
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory() as folder:
            for name in ("cli", "dagster"):
                _tiny_lake(Path(folder) / name)
            baseline.append(_seconds([sys.executable, "-c", BASELINE]))
            cli.append(_seconds([chronolake, "run", VIEW, "--lake", f"{folder}/cli"]))
            dagster.append(_dagster_run(Path(folder) / "dagster", Path(folder) / "home"))
    median_dagster = sorted(dagster, key=lambda run: run[0])[len(dagster) // 2]
    result = {
        "baseline_spark_start_seconds": round(statistics.median(baseline), 2),
        "cli_run_seconds": round(statistics.median(cli), 2),
        "dagster_run_seconds": round(median_dagster[0], 2),
        "dagster_ops_seconds": median_dagster[1]["run_seconds"],
        "dagster_spark_jobs": median_dagster[1]["spark_jobs"],
        "dagster_stages": median_dagster[1]["stages"],
        "load_average": os.getloadavg()[0],
        "measured_at": datetime.now().isoformat(timespec="seconds"),
    }
    for variant in ("cli", "dagster"):
        seconds = result[f"{variant}_run_seconds"]
        result[f"{variant}_ratio"] = round(seconds / result["baseline_spark_start_seconds"], 2)
    print(json.dumps(result))
    out = ROOT / "benchmarks" / "results"
    out.mkdir(parents=True, exist_ok=True)
    (out / "run_overhead.json").write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
