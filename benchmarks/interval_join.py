"""Event-time interval join: chronolake against DuckDB's range join and a plain Spark one.

Every variant joins the same generated Delta tables (clicks and impressions, `_interval_data`)
with the same SQL, `clicks JOIN impressions ON ad_id = ad_id AND click_time BETWEEN imp_time
- INTERVAL '5' SECOND AND imp_time + INTERVAL '10' SECOND` (inner, or LEFT with `--how
left`): chronolake as a view materialized by one `DerivedTable` run over the whole data (a
backfill into its Delta output table), DuckDB and Spark as a query over the tables' Parquet
files (Spark also with the bounds on epoch milliseconds, `spark range join (ms)`, which
separates the join's plan from Spark's interval arithmetic). Each ends in the same
order-independent checksum (over chronolake's output table); all checksums must agree.
Reports the median of `--repeat` runs and the ratios against the Spark range join and
DuckDB, to stdout and as JSON under `benchmarks/results/`.

    .venv/bin/python benchmarks/interval_join.py --rows 1000000
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import duckdb
from pyspark.sql import SparkSession

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _interval_data import IntervalData, generate  # noqa: E402
from incremental import StageMeter  # noqa: E402
from temporal_join import PAIR_MODULUS, RESULTS, WARMUP_ROWS, Checksum, _cpu_seconds  # noqa: E402

from chronolake import Catalog  # noqa: E402
from chronolake.lake.layout import output_path  # noqa: E402
from chronolake.runtime.derived import DerivedTable  # noqa: E402
from chronolake.spark.session import local_spark_session  # noqa: E402

CHRONOLAKE = "chronolake"
SPARK = "spark range join"
SPARK_MS = "spark range join (ms)"
DUCKDB = "duckdb range join"
VIEW = "attributed"
JOIN = """
SELECT c.click_id, c.ad_id, c.click_time, i.imp_id, i.imp_time, i.bid
FROM clicks AS c {how} JOIN impressions AS i
ON c.ad_id = i.ad_id
AND c.click_time BETWEEN i.imp_time - INTERVAL '5' SECOND AND i.imp_time + INTERVAL '10' SECOND
"""
DDL = """
CREATE TABLE clicks (
  click_id BIGINT, ad_id BIGINT, click_time TIMESTAMP(3),
  WATERMARK FOR click_time AS click_time - INTERVAL '5' SECOND
) WITH ('path' = '{clicks}');
CREATE TABLE impressions (
  imp_id BIGINT, ad_id BIGINT, imp_time TIMESTAMP(3), bid BIGINT,
  WATERMARK FOR imp_time AS imp_time - INTERVAL '5' SECOND
) WITH ('path' = '{impressions}');
CREATE VIEW attributed AS {join};
"""
# The same join with the bounds on epoch milliseconds, computed once per row as chronolake's
# operator does: Spark's interval arithmetic on TIMESTAMP_NTZ per pair costs more than the
# comparisons themselves.
MILLIS = "timestampdiff(MILLISECOND, TIMESTAMP_NTZ '1970-01-01 00:00:00', {})"
JOIN_MS = f"""
WITH c AS (SELECT *, {MILLIS.format("click_time")} AS ms FROM clicks),
     i AS (SELECT *, {MILLIS.format("imp_time")} AS ms FROM impressions)
SELECT c.click_id, c.ad_id, c.click_time, i.imp_id, i.imp_time, i.bid
FROM c {{how}} JOIN i ON c.ad_id = i.ad_id AND c.ms BETWEEN i.ms - 5000 AND i.ms + 10000
"""
# rows, matched rows, sum of impression ids, sum of (click, impression) pair hashes, sum of bids;
# the closing click (id -1) is left out: a LEFT join's batch result has it, a run does not yet.
CHECKSUM = f"""
SELECT count(*), count(imp_id), sum(imp_id),
       sum((click_id * 1000003 + coalesce(imp_id + 1, 0)) % {PAIR_MODULUS}), sum(bid)
FROM ({{rows}}) AS joined WHERE click_id >= 0
"""
# (checksum, extra figures) of one run; chronolake's extra has its run's own seconds and CPU
Variant = Callable[[SparkSession, IntervalData, str], tuple[Checksum, dict]]


def _chronolake(spark: SparkSession, data: IntervalData, how: str) -> tuple[Checksum, dict]:
    """One run of the view over everything, into a fresh lake; then the checksum of its output
    table (timed apart: the other variants only aggregate, they write nothing)."""
    lake = Path(tempfile.mkdtemp(prefix="lake-", dir=data.clicks.parent))
    try:
        catalog = Catalog(lake, spark)
        catalog.declare(
            DDL.format(clicks=data.clicks, impressions=data.impressions, join=JOIN.format(how=how))
        )
        meter = StageMeter(spark)
        meter.start()
        started, started_cpu = time.perf_counter(), _cpu_seconds(spark)
        result = DerivedTable(catalog, VIEW).run()
        run_s, run_cpu_s = time.perf_counter() - started, _cpu_seconds(spark) - started_cpu
        stages = meter.read()
        started = time.perf_counter()
        output = catalog.backend.snapshot(output_path(lake, VIEW))
        output.createOrReplaceTempView("chronolake_output")
        checksum = _spark_checksum(spark, "SELECT * FROM chronolake_output")
        checksum_s = time.perf_counter() - started
        figures = {k: v for k, v in result.figures.items() if isinstance(v, int)}
        run = {"run_s": run_s, "run_cpu_s": run_cpu_s, "checksum_s": checksum_s, **stages}
        return checksum, run | {"figures": figures}
    finally:
        shutil.rmtree(lake, ignore_errors=True)


def _spark(join: str) -> Variant:
    """`join` as a Spark query over the Parquet files: a hash or sort-merge join on the ad with
    the time range as its condition (a per-ad cartesian product)."""

    def run(spark: SparkSession, data: IntervalData, how: str) -> tuple[Checksum, dict]:
        spark.read.parquet(*data.files(data.clicks)).createOrReplaceTempView("clicks")
        spark.read.parquet(*data.files(data.impressions)).createOrReplaceTempView("impressions")
        return _spark_checksum(spark, join.format(how=how)), {}

    return run


def _spark_checksum(spark: SparkSession, rows: str) -> Checksum:
    return _normalized(spark.sql(CHECKSUM.format(rows=rows)).first())


def _duckdb(_: SparkSession, data: IntervalData, how: str) -> tuple[Checksum, dict]:
    """The same SQL in DuckDB over the Parquet files (a hash join on the ad, the range checked
    per pair): the single-machine reference."""
    with duckdb.connect() as con:
        for name, path in (("clicks", data.clicks), ("impressions", data.impressions)):
            con.execute(f"CREATE VIEW {name} AS SELECT * FROM read_parquet({data.files(path)})")
        return _normalized(con.execute(CHECKSUM.format(rows=JOIN.format(how=how))).fetchone()), {}


def _normalized(values) -> Checksum:  # noqa: ANN001 - a Spark Row or a DuckDB tuple
    return tuple(int(value or 0) for value in values)  # type: ignore[return-value]


# --- the run ----------------------------------------------------------------------------------


def main() -> None:
    """Generate the data, time every variant, check they agree, report."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows of each stream")
    parser.add_argument("--rows-per-key", type=int, default=100, help="rows per ad, on average")
    parser.add_argument(
        "--matches",
        type=float,
        default=3.0,
        help="impressions in an average click's interval (sets the time span)",
    )
    parser.add_argument("--how", choices=["inner", "left"], default="inner")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per variant")
    parser.add_argument("--only", nargs="*", help="run only these variants (names as printed)")
    args = parser.parse_args()
    spark = local_spark_session("chronolake-bench")
    variants: dict[str, Variant] = {
        CHRONOLAKE: _chronolake,
        SPARK: _spark(JOIN),
        SPARK_MS: _spark(JOIN_MS),
        DUCKDB: _duckdb,
    }
    if args.only:
        variants = {name: run for name, run in variants.items() if name in args.only}
    how = args.how.upper()
    shape = {"rows_per_key": args.rows_per_key, "matches": args.matches}
    with tempfile.TemporaryDirectory(prefix="chronolake-bench-") as folder:
        warmup = generate(Path(folder) / "warmup", rows=WARMUP_ROWS, **shape)
        for run in variants.values():
            run(spark, warmup, how)  # JIT and first-job costs stay out of the timed runs
        data = generate(Path(folder) / "data", rows=args.rows, **shape)
        print(f"rows={data.rows} per stream, keys={data.keys}, span={data.span_s:.0f} s, {how}")
        results = {
            name: _time(run, spark, data, how, args.repeat) for name, run in variants.items()
        }
    report = _report(data, how, args.repeat, results)
    _print(report)
    RESULTS.mkdir(exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    path = RESULTS / f"interval_join-{data.rows}-{args.how}-{stamp}.json"
    path.write_text(json.dumps(report, indent=2))
    print(f"written {path}")
    if not report["checksums_agree"]:
        sys.exit("variants disagree: see the checksums above")


def _time(run: Variant, spark: SparkSession, data: IntervalData, how: str, repeat: int) -> dict:
    """Seconds and CPU-seconds of each run; chronolake's are its run's (`run_s`, `run_cpu_s`)."""
    seconds, cpu, checksums, figures = [], [], set(), []
    for _ in range(repeat):
        start, start_cpu = time.perf_counter(), _cpu_seconds(spark)
        checksum, extra = run(spark, data, how)
        seconds.append(extra.get("run_s", time.perf_counter() - start))
        cpu.append(extra.get("run_cpu_s", _cpu_seconds(spark) - start_cpu))
        checksums.add(checksum)
        figures.append(extra)
    return {"seconds": seconds, "cpu": cpu, "checksums": checksums, "figures": figures}


def _report(data: IntervalData, how: str, repeat: int, results: dict[str, dict]) -> dict:
    medians = {name: statistics.median(r["seconds"]) for name, r in results.items()}
    checksums = {checksum for result in results.values() for checksum in result["checksums"]}
    ours = medians.get(CHRONOLAKE)
    spark_ratio = round(medians[SPARK] / ours, 2) if ours and SPARK in medians else None
    duckdb_ratio = round(ours / medians[DUCKDB], 2) if ours and DUCKDB in medians else None
    return {
        "benchmark": "interval_join",
        "how": how,
        "rows": data.rows,
        "keys": data.keys,
        "span_s": data.span_s,
        "repeat": repeat,
        "cpus": os.cpu_count(),
        "load_average": os.getloadavg(),
        "uptime": subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip(),
        "checksums_agree": len(checksums) == 1,
        "chronolake_speedup_vs_spark_range_join": spark_ratio,  # target: above 1
        "chronolake_time_vs_duckdb": duckdb_ratio,  # target: at most 4
        "variants": {
            name: {
                "median_s": round(medians[name], 3),
                "runs_s": [round(s, 3) for s in result["seconds"]],
                "median_cpu_s": round(statistics.median(result["cpu"]), 3),
                "checksum": sorted(result["checksums"])[0],
                "runs": [f for f in result["figures"] if f] or None,
            }
            for name, result in results.items()
        },
    }


def _print(report: dict) -> None:
    print(f"{'variant':<24}{'median s':>10}{'cpu s':>9}  runs  checksum")
    for name, result in report["variants"].items():
        print(
            f"{name:<24}{result['median_s']:>10.3f}{result['median_cpu_s']:>9.2f}  "
            f"{result['runs_s']}  {result['checksum']}"
        )
    speedup, duckdb_ratio = (
        report["chronolake_speedup_vs_spark_range_join"],
        report["chronolake_time_vs_duckdb"],
    )
    print(
        f"chronolake speed-up vs Spark range join: {speedup}x (target > 1); "
        f"time vs DuckDB: {duckdb_ratio}x (target <= 4)"
    )
    print(f"checksums agree: {report['checksums_agree']}  ({report['uptime']})")


if __name__ == "__main__":
    main()
