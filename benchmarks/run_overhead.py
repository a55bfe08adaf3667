"""A run's fixed cost: `chronolake run` on a trivial input, against a bare Spark start.

Builds a lake with one order and one rate, registers the reference platform's
DDL, then times in fresh processes (median of `--repeat`):

- baseline: start Python, start local Spark, run one trivial job, exit;
- run: `chronolake run orders_enriched` end to end (process start to exit).

Reports seconds and the ratio run / baseline, to stdout and as JSON under
`benchmarks/results/`. Usage: `.venv/bin/python benchmarks/run_overhead.py --repeat 3`.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
from deltalake import write_deltalake

from chronolake.catalog import Catalog
from chronolake.demo import CDF_ON, ORDERS_SCHEMA, RATES_SCHEMA

ROOT = Path(__file__).resolve().parent.parent
BASELINE = (
    "from chronolake._spark import local_spark_session; "
    "local_spark_session().range(1).count()"
)


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


def _seconds(command: list[str]) -> float:
    started = time.monotonic()
    subprocess.run(command, check=True, capture_output=True, cwd=ROOT)
    return time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="Runs per variant (median).")
    args = parser.parse_args()
    chronolake = str(Path(sys.executable).with_name("chronolake"))
    baseline, runs = [], []
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory() as folder:
            lake = Path(folder)
            _tiny_lake(lake)
            baseline.append(_seconds([sys.executable, "-c", BASELINE]))
            runs.append(_seconds([chronolake, "run", "orders_enriched", "--lake", str(lake)]))
    result = {
        "baseline_spark_start_seconds": round(statistics.median(baseline), 2),
        "run_seconds": round(statistics.median(runs), 2),
    }
    result["ratio"] = round(result["run_seconds"] / result["baseline_spark_start_seconds"], 2)
    print(json.dumps(result))
    out = ROOT / "benchmarks" / "results"
    out.mkdir(parents=True, exist_ok=True)
    (out / "run_overhead.json").write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
