"""How the temporal join's cost grows: every variant of `temporal_join.py` at several sizes.

For each size and skew the data is generated once; each variant then runs in its own process
(`temporal_join.py --data ... --only <variant>`), so the peak resident memory it reports (the
kernel's high-water mark of the Python process and of Spark's JVM) is that variant's alone.
Prints one table per size and skew (median seconds, CPU-seconds, peak memory, time against
DuckDB and against the Spark window plan), writes the whole curve as JSON under
`benchmarks/results/`, and exits non-zero when any two variants' checksums differ.

    .venv/bin/python benchmarks/scale_curve.py --sizes 1000000 5000000 20000000
    .venv/bin/python benchmarks/scale_curve.py --sizes 50000000 --repeat 1   # by hand
    .venv/bin/python benchmarks/scale_curve.py --sizes 5000000 --cluster \
        --only chronolake "chronolake (shuffled)" "spark window (tempo)"

With `--cluster` the Spark variants run on a standalone cluster of two one-core workers
started from pyspark (the tests' `_cluster.py`), so the driver's and the executors' peak
memory are measured apart; in local mode the executor lives in the driver's JVM.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, nullcontext
from datetime import UTC, datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "tests")]
from _cluster import cluster_settings, code_zip, standalone_cluster  # noqa: E402
from _data import Skew, generate  # noqa: E402
from temporal_join import (  # noqa: E402
    BASELINE,
    RANGE_JOIN,
    RANGE_JOIN_MAX_HOT_ROWS,
    RESULTS,
    variants,
)

DUCKDB = "duckdb asof"


def main() -> None:
    """Generate each size once, run every variant in its own process, report the curve."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000_000, 5_000_000, 20_000_000])
    parser.add_argument("--skews", type=Skew, nargs="+", choices=list(Skew), default=list(Skew))
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per variant")
    parser.add_argument("--only", nargs="*", help="run only these variants (names as printed)")
    parser.add_argument(
        "--cluster", action="store_true", help="run Spark on a standalone cluster, not local[*]"
    )
    parser.add_argument("--executor-memory", default="4g", help="each executor's, with --cluster")
    parser.add_argument(
        "--range-join-max-rows",
        type=int,
        default=5_000_000,
        help="skip the range join (a per-key cartesian product) above this many rows",
    )
    args = parser.parse_args()
    curve: list[dict] = []
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"scale_curve-{datetime.now(UTC).strftime('%Y%m%dT%H%M%SZ')}.json"
    with tempfile.TemporaryDirectory(prefix="chronolake-scale-") as folder:
        spark_env = (
            _cluster(Path(folder) / "cluster", args.executor_memory)
            if args.cluster
            else nullcontext({})
        )
        with spark_env as env:
            for rows in args.sizes:
                for skew in args.skews:
                    names = [
                        name
                        for name in variants(rows, skew, RANGE_JOIN_MAX_HOT_ROWS)
                        if (not args.only or name in args.only)
                        and (name != RANGE_JOIN or rows <= args.range_join_max_rows)
                    ]
                    curve.append(_point(Path(folder), rows, skew, names, args.repeat, env))
                    _print(curve[-1])
                    _write(path, curve, spark="standalone cluster" if args.cluster else "local[*]")
    print(f"written {path}")
    if not _agree(curve):
        sys.exit("variants disagree: see the checksums above")


def _write(path: Path, curve: list[dict], *, spark: str) -> None:
    """The curve so far, written after every point: a long run interrupted keeps its points."""
    report = {
        "benchmark": "scale_curve",
        "cpus": os.cpu_count(),
        "spark": spark,
        "checksums_agree": _agree(curve),
        "points": curve,
    }
    path.write_text(json.dumps(report, indent=2))


def _agree(curve: list[dict]) -> bool:
    return all(point["checksums_agree"] for point in curve)


@contextmanager
def _cluster(folder: Path, executor_memory: str) -> Iterator[dict[str, str]]:
    """A standalone cluster while the block runs, and the environment that points a driver
    at it (`CHRONOLAKE_SPARK_MASTER`, and the settings a user keeps in spark-defaults.conf)."""
    folder.mkdir(parents=True)
    settings = cluster_settings(code_zip(folder)) | {"spark.executor.memory": executor_memory}
    conf = folder / "conf"
    conf.mkdir(parents=True)
    (conf / "spark-defaults.conf").write_text("".join(f"{k} {v}\n" for k, v in settings.items()))
    with standalone_cluster(folder, worker_memory=executor_memory) as cluster:
        yield {
            "CHRONOLAKE_SPARK_MASTER": cluster.url,
            "SPARK_CONF_DIR": str(conf),
            "SPARK_LOCAL_IP": "127.0.0.1",
        }


def _point(
    folder: Path, rows: int, skew: Skew, names: list[str], repeat: int, env: Mapping[str, str]
) -> dict:
    """One size and skew: its data generated once, then each variant in a fresh process."""
    data = generate(folder / f"{rows}-{skew}", rows=rows, skew=skew)
    results = {}
    for variant in names:
        out = folder / "report.json"
        subprocess.run(
            [
                sys.executable,
                str(HERE / "temporal_join.py"),
                "--data",
                str(data.orders.parent),
                "--only",
                variant,
                "--repeat",
                str(repeat),
                "--json",
                str(out),
                "--range-join-max-hot-rows",
                str(RANGE_JOIN_MAX_HOT_ROWS),
            ],
            check=True,
            stdout=subprocess.DEVNULL,
            env=os.environ | env,
        )
        report = json.loads(out.read_text())
        if not report["checksums_agree"]:
            sys.exit(f"{variant} gave different checksums from one run to the next at {rows}")
        results[variant] = report["variants"][variant] | {
            "peak_memory_mb": report["peak_memory_mb"],
            "load_average": report["load_average"],
        }
    for path in data.orders, data.rates:
        path.unlink()  # the next size's files need the disk
    return {
        "rows": rows,
        "changelog_rows": data.changelog_rows,
        "skew": str(skew),
        "repeat": repeat,
        "checksums_agree": len({tuple(r["checksum"]) for r in results.values()}) == 1,
        "variants": {name: _ratios(result, results) for name, result in results.items()},
    }


def _ratios(result: dict, results: dict[str, dict]) -> dict:
    duckdb = results.get(DUCKDB, {}).get("median_s")
    window = results.get(BASELINE, {}).get("median_s")
    seconds = result["median_s"]
    return result | {
        "vs_duckdb": round(seconds / duckdb, 2) if duckdb else None,
        "speedup_vs_window": round(window / seconds, 2) if window else None,
    }


def _print(point: dict) -> None:
    print(f"\n{point['rows']:,} orders, {point['changelog_rows']:,} rate events, {point['skew']}")
    print(
        f"{'variant':<24}{'median s':>9}{'cpu s':>8}{'x duckdb':>9}{'window/x':>9}"
        f"{'python MiB':>11}{'driver MiB':>11}{'executors MiB':>14}  load"
    )
    for name, r in point["variants"].items():
        memory = r["peak_memory_mb"]
        executors = memory["executors"] or "in driver"
        print(
            f"{name:<24}{r['median_s']:>9.2f}{r['median_cpu_s']:>8.1f}"
            f"{_ratio(r['vs_duckdb']):>9}{_ratio(r['speedup_vs_window']):>9}"
            f"{memory['python']:>11}{memory['driver_jvm']:>11}{executors:>14}"
            f"  {r['load_average'][0]:.1f}"
        )
    print(f"checksums agree: {point['checksums_agree']}")


def _ratio(value: float | None) -> str:
    return f"{value:.2f}" if value else "-"


if __name__ == "__main__":
    main()
