"""Watermark assignment and late rows over a split changelog, against a plain read of it.

Writes one Delta table (delta-rs) of `--rows` rows in `--splits` splits over `--commits`
commits, with rowtimes up to `--disorder-s` seconds out of order. Then, in the same Spark
session and on the same table, times (each variant materializes every column of its result
through Spark's `noop` sink):

- `parquet scan`: `spark.read.parquet` of the table's files, for reference;
- `changelog read`: the table's changelog through the lake backend (system columns
  included), the read every run does anyway: the baseline of the ratio;
- `assign <mode>`: the same read, `WatermarkAssigner(...).assign(...)` (its
  per-(split, commit) maxima job included) and the stamped rows, `_watermark` and `_late`.

Reports the median of `--repeat` runs (wall seconds, and CPU seconds of this process plus
Spark's JVM, which a busy shared machine distorts less), rows/s and both ratios to the
changelog read (target for on-periodic: at most 1.5×), to stdout and as JSON under
`benchmarks/results/`.

    .venv/bin/python benchmarks/watermarks.py --rows 5000000 --splits 64 --commits 50
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pyarrow as pa
from deltalake import write_deltalake
from pyspark.sql import DataFrame, SparkSession

from chronolake.lake import backend_for
from chronolake.schema import EmitStrategy
from chronolake.spark.session import local_spark_session
from chronolake.watermarks.assigner import WatermarkAssigner

RESULTS = Path(__file__).resolve().parent / "results"
T0_MS = 1_704_067_200_000  # 2024-01-01T00:00:00Z
ROW_SPACING_MS = 10


def generate(path: Path, *, rows: int, splits: int, commits: int, disorder_s: int) -> None:
    """One Delta commit per `rows / commits` rows: row i is in split i % splits, at rowtime
    T0 + 10 ms · i minus up to `disorder_s` seconds of (seeded) disorder."""
    per_commit = max(1, rows // commits)
    rng = np.random.default_rng(7)
    for start in range(0, rows, per_commit):
        ids = np.arange(start, min(rows, start + per_commit), dtype=np.int64)
        disorder = rng.integers(0, disorder_s * 1000 + 1, size=len(ids))
        rowtime = T0_MS + ids * ROW_SPACING_MS - disorder
        table = pa.table({
            "order_id": ids,
            "shard": pa.array((ids % splits).astype(str)),
            "order_time": pa.array(rowtime, pa.int64()).cast(pa.timestamp("ms")).cast(
                pa.timestamp("us")
            ),
            "price": rng.integers(0, 10_000, size=len(ids)) / 100,
            "customer": pa.array(np.char.add("customer-", (ids % 9973).astype(str))),
        })
        write_deltalake(str(path), table, mode="append")


def _materialize(frame: DataFrame) -> None:
    frame.write.format("noop").mode("overwrite").save()


def _changelog(spark: SparkSession, path: Path) -> DataFrame:
    return backend_for(spark).appends(path, 0)


def parquet_scan(spark: SparkSession, path: Path) -> None:
    _materialize(spark.read.parquet(str(path)))


def changelog_read(spark: SparkSession, path: Path) -> None:
    _materialize(_changelog(spark, path))


def _assigner(mode: EmitStrategy) -> WatermarkAssigner:
    return WatermarkAssigner(
        rowtime="order_time",
        strategy="order_time - INTERVAL '5' SECOND",
        split_by="shard",
        emit_strategy=mode,
    )


def assign(mode: EmitStrategy) -> Callable[[SparkSession, Path], None]:
    def run(spark: SparkSession, path: Path) -> None:
        _materialize(_assigner(mode).assign(_changelog(spark, path)).rows)

    return run


def _cpu_seconds(spark: SparkSession) -> float:
    """CPU time of this process plus Spark's JVM (Linux): less hurt by a busy machine."""
    jvm = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()  # type: ignore[union-attr]
    fields = Path(f"/proc/{jvm}/stat").read_text().rsplit(")", 1)[1].split()
    return time.process_time() + (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def timed(run: Callable[[SparkSession, Path], None], spark: SparkSession, path: Path,
          repeat: int) -> tuple[float, float]:
    """Median wall seconds and median CPU seconds of `repeat` runs."""
    seconds, cpu = [], []
    for _ in range(repeat):
        start, start_cpu = time.perf_counter(), _cpu_seconds(spark)
        run(spark, path)
        seconds.append(time.perf_counter() - start)
        cpu.append(_cpu_seconds(spark) - start_cpu)
    return statistics.median(seconds), statistics.median(cpu)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=5_000_000)
    parser.add_argument("--splits", type=int, default=64)
    parser.add_argument("--commits", type=int, default=50)
    parser.add_argument("--disorder-s", type=int, default=30)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--modes", nargs="+", default=[m.value for m in EmitStrategy],
        choices=[m.value for m in EmitStrategy],
    )
    args = parser.parse_args()

    spark = local_spark_session("chronolake-bench-watermarks")
    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "orders"
        generate(path, rows=args.rows, splits=args.splits, commits=args.commits,
                 disorder_s=args.disorder_s)
        variants = {"parquet scan": parquet_scan, "changelog read": changelog_read}
        variants |= {f"assign {mode}": assign(EmitStrategy(mode)) for mode in args.modes}
        for run in variants.values():  # warm-up: JIT, file listing caches
            run(spark, path)
        for name, run in variants.items():
            seconds, cpu = timed(run, spark, path, args.repeat)
            results[name] = {"seconds": seconds, "cpu_s": cpu, "rows_per_s": args.rows / seconds}
        late = {
            mode: _assigner(EmitStrategy(mode)).assign(_changelog(spark, path)).counts()[
                "late_rows"
            ]
            for mode in args.modes
        }
    baseline = results["changelog read"]
    print(f"{args.rows:,} rows, {args.splits} splits, {args.commits} commits, "
          f"median of {args.repeat}, load average {os.getloadavg()[0]:.1f}")
    print(f"{'variant':<22}{'seconds':>10}{'rows/s':>14}{'× changelog':>14}"
          f"{'cpu s':>9}{'cpu ×':>8}")
    for name, figures in results.items():
        figures["ratio"] = figures["seconds"] / baseline["seconds"]
        figures["cpu_ratio"] = figures["cpu_s"] / baseline["cpu_s"]
        print(f"{name:<22}{figures['seconds']:>10.2f}{figures['rows_per_s']:>14,.0f}"
              f"{figures['ratio']:>14.2f}{figures['cpu_s']:>9.2f}{figures['cpu_ratio']:>8.2f}")
    print("late rows:", ", ".join(f"{mode} {count:,}" for mode, count in late.items()))
    RESULTS.mkdir(exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    report = {"benchmark": "watermarks", "args": vars(args), "results": results,
              "late_rows": late, "load_average": os.getloadavg()}
    (RESULTS / f"watermarks-{stamp}.json").write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    sys.exit(main())
