"""Event-time temporal join: chronolake against DuckDB, polars and two plain Spark plans.

Every variant joins the same generated Parquet files (orders; a rates changelog of 10% of
that) with the same semantics (version valid at the order's time, ties by arrival, `-U`
ignored, `-D` ends validity) as a LEFT join, and materializes the same way: an
order-independent checksum aggregate over its output. All checksums must agree. Reports the
median of `--repeat` runs and the speed-up against the Spark window plan (the approach of
Databricks Labs' tempo), to stdout and as JSON under `benchmarks/results/`.

    .venv/bin/python benchmarks/temporal_join.py --rows 1000000 --skew uniform|hot

With `--backends delta-rs,delta-spark` the data is also written as two Delta tables (by
delta-rs, row groups as in the Parquet files) and `chronolake on <backend>` joins them as
read through that lake backend's snapshot (`LakeBackend.snapshot`), in the same process and
Spark session (started with Delta's jars, in which delta-rs works too) as every other
variant: what each backend's read path adds to the join.
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

import duckdb
import polars as pl
import pyarrow.parquet as pq
from deltalake import DeltaTable, WriterProperties, write_deltalake
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _data import ROW_GROUP_ROWS, BenchData, Skew, generate, load  # noqa: E402
from incremental import backend_list, session_backend  # noqa: E402

from chronolake.joins import AsOfTuning, join_valid_versions  # noqa: E402
from chronolake.lake import backend_for  # noqa: E402
from chronolake.spark.session import local_spark_session  # noqa: E402
from chronolake.spark.stack import BackendChoice  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
BASELINE = "spark window (tempo)"
RANGE_JOIN = "spark range join"
PAIR_MODULUS = 2_147_483_647
WARMUP_ROWS = 20_000
RANGE_JOIN_MAX_HOT_ROWS = 1_000_000
"""Above this, the range join on a hot key (a cartesian product per key) is skipped: 57 s a
run at 1M (`README.md`, Scale curve)."""
# rows, matched rows, sum of version ids, sum of (order, version) pair hashes, sum of rates
Checksum = tuple[int, int, int, int, int]
Variant = Callable[[SparkSession, BenchData], Checksum]
Inputs = Callable[[SparkSession, BenchData], tuple[DataFrame, DataFrame]]
DELTA_FOLDER = "delta"
"""Where `--backends` writes the data's Delta tables, beside its Parquet files."""


# --- Spark variants ----------------------------------------------------------------------------


def _chronolake(tuning: AsOfTuning, inputs: Inputs | None = None) -> Variant:
    """chronolake's join over the Parquet files, or over what `inputs` reads."""

    def run(spark: SparkSession, data: BenchData) -> Checksum:
        orders, rates = (inputs or _spark_inputs)(spark, data)
        joined = join_valid_versions(
            orders,
            rates,
            probe_keys=["currency"],
            build_keys=["currency"],
            probe_time="order_time",
            build_time="currency_time",
            how="left",
            build_columns={"version_id": "version_id", "rate_cents": "rate_cents"},
            tuning=tuning,
        )
        return _spark_checksum(joined)

    return run


def _window_plan(spark: SparkSession, data: BenchData) -> Checksum:
    """Union both sides, then carry the last build event forward over (key, time) order."""
    orders, rates = _spark_inputs(spark, data)
    version = F.struct("version_id", "rate_cents", "_row_kind")
    probe = orders.select(
        "order_id",
        "currency",
        F.col("order_time").alias("t"),
        F.lit(1).alias("side"),  # at equal times the build event comes first
        F.lit(None).cast("long").alias("cv"),
        F.lit(None).cast("long").alias("pos"),
        F.lit(None).cast(rates.select(version).schema[0].dataType).alias("v"),
    )
    build = rates.where(F.col("_row_kind") != "-U").select(
        F.lit(None).cast("long").alias("order_id"),
        "currency",
        F.col("currency_time").alias("t"),
        F.lit(0).alias("side"),
        F.col("_commit_version").alias("cv"),
        F.col("_position").alias("pos"),
        version.alias("v"),
    )
    frame = (
        Window.partitionBy("currency")
        .orderBy("t", "side", "cv", "pos")
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    carried = probe.unionByName(build).withColumn("v", F.last("v", ignorenulls=True).over(frame))
    valid = F.col("v._row_kind") != "-D"
    joined = carried.where(F.col("side") == 1).select(
        "order_id",
        F.when(valid, F.col("v.version_id")).alias("version_id"),
        F.when(valid, F.col("v.rate_cents")).alias("rate_cents"),
    )
    return _spark_checksum(joined)


def _range_join(spark: SparkSession, data: BenchData) -> Checksum:
    """Validity intervals, then a join on key with `start <= t < end` (per-key cartesian)."""
    orders, rates = _spark_inputs(spark, data)
    arrival = Window.partitionBy("r_currency").orderBy("start", "_commit_version", "_position")
    intervals = (
        rates.where(F.col("_row_kind") != "-U")
        .select(
            F.col("currency").alias("r_currency"),
            F.col("currency_time").alias("start"),
            "version_id",
            "rate_cents",
            "_row_kind",
            "_commit_version",
            "_position",
        )
        .withColumn("end", F.lead("start").over(arrival))
        .where(F.col("end").isNull() | (F.col("end") != F.col("start")))
        .where(F.col("_row_kind") != "-D")
    )
    on = (
        (F.col("currency") == F.col("r_currency"))
        & (F.col("order_time") >= F.col("start"))
        & (F.col("end").isNull() | (F.col("order_time") < F.col("end")))
    )
    joined = orders.join(intervals, on, "left").select("order_id", "version_id", "rate_cents")
    return _spark_checksum(joined)


def _spark_inputs(spark: SparkSession, data: BenchData) -> tuple[DataFrame, DataFrame]:
    return spark.read.parquet(str(data.orders)), spark.read.parquet(str(data.rates))


def _delta_inputs(kind: BackendChoice) -> Inputs:
    """The data's Delta tables (`write_delta_tables`) as the lake backend `kind` reads them."""

    def inputs(spark: SparkSession, data: BenchData) -> tuple[DataFrame, DataFrame]:
        backend = backend_for(spark, kind)
        orders, rates = delta_tables(data)
        rates_read = backend.snapshot(rates).withColumnsRenamed(
            {stored: name for name, stored in _STORED_AS.items()})
        return backend.snapshot(orders), rates_read

    return inputs


_STORED_AS = {"_row_kind": "row_kind", "_commit_version": "commit_version",
              "_position": "position"}
"""The changelog's columns as the Delta table stores them: a lake backend's reader adds
columns of the first names (a snapshot's own `_commit_version`, as Delta's change feed
does), so a table cannot hold them."""


def delta_tables(data: BenchData) -> tuple[Path, Path]:
    """Where `write_delta_tables` writes the data's orders and rates."""
    folder = data.orders.parent / DELTA_FOLDER
    return folder / "orders", folder / "rates"


def write_delta_tables(data: BenchData) -> None:
    """The data's two Parquet files as two Delta tables (delta-rs's writer, one commit each,
    the Parquet files' row groups), unless a former run wrote them."""
    properties = WriterProperties(max_row_group_size=ROW_GROUP_ROWS)
    for source, table in zip((data.orders, data.rates), delta_tables(data), strict=True):
        if not DeltaTable.is_deltatable(str(table)):
            rows = pq.read_table(source)
            rows = rows.rename_columns([_STORED_AS.get(name, name) for name in rows.column_names])
            write_deltalake(str(table), rows, writer_properties=properties)


def _spark_checksum(joined: DataFrame) -> Checksum:
    pair = (F.col("order_id") * 1_000_003 + F.coalesce(F.col("version_id") + 1, F.lit(0))) % (
        PAIR_MODULUS
    )
    row = joined.agg(
        F.count(F.lit(1)),
        F.count("version_id"),
        F.sum("version_id"),
        F.sum(pair),
        F.sum("rate_cents"),
    ).first()  # one row of checksums
    return _normalized(tuple(row))


# --- single-machine engines -------------------------------------------------------------------


def _duckdb(_: SparkSession, data: BenchData) -> Checksum:
    query = f"""
        WITH versions AS (
            SELECT * FROM read_parquet('{data.rates}') WHERE _row_kind <> '-U'
            QUALIFY row_number() OVER (
                PARTITION BY currency, currency_time
                ORDER BY _commit_version DESC, _position DESC) = 1
        ), joined AS (
            SELECT o.order_id,
                   CASE WHEN v._row_kind <> '-D' THEN v.version_id END AS version_id,
                   CASE WHEN v._row_kind <> '-D' THEN v.rate_cents END AS rate_cents
            FROM read_parquet('{data.orders}') o
            ASOF LEFT JOIN versions v
              ON o.currency = v.currency AND o.order_time >= v.currency_time
        )
        SELECT count(*), count(version_id), sum(version_id),
               sum((order_id * 1000003 + coalesce(version_id + 1, 0)) % {PAIR_MODULUS}),
               sum(rate_cents)
        FROM joined
    """
    with duckdb.connect() as con:
        return _normalized(con.execute(query).fetchone())


def _polars(_: SparkSession, data: BenchData) -> Checksum:
    versions = (
        pl.scan_parquet(data.rates)
        .filter(pl.col("_row_kind") != "-U")
        .sort("_commit_version", "_position")
        .unique(subset=["currency", "currency_time"], keep="last", maintain_order=True)
        .sort("currency_time")
    )
    orders = pl.scan_parquet(data.orders).sort("order_time")
    valid = pl.col("_row_kind") != "-D"
    joined = orders.join_asof(
        versions,
        left_on="order_time",
        right_on="currency_time",
        by="currency",
        check_sortedness=False,  # both sides are sorted by time above
    ).select(
        "order_id",
        pl.when(valid).then(pl.col("version_id")).alias("version_id"),
        pl.when(valid).then(pl.col("rate_cents")).alias("rate_cents"),
    )
    pair = (pl.col("order_id") * 1_000_003 + (pl.col("version_id") + 1).fill_null(0)) % (
        PAIR_MODULUS
    )
    frame = joined.select(
        pl.len().alias("rows"),
        pl.col("version_id").count().alias("matched"),
        pl.col("version_id").sum().alias("versions"),
        pair.sum().alias("pairs"),
        pl.col("rate_cents").sum().alias("rates"),
    ).collect()
    return _normalized(frame.row(0))


def _normalized(values: tuple | Column) -> Checksum:
    return tuple(int(value or 0) for value in values)  # type: ignore[return-value]


# --- the run ----------------------------------------------------------------------------------


def variants(
    rows: int, skew: Skew, range_join_max_hot_rows: int,
    backends: list[BackendChoice] | None = None,
) -> dict[str, Variant]:
    """Every variant that runs at this size and skew, by name; `backends` adds chronolake
    over the Delta tables as each of these lake backends reads them."""
    every: dict[str, Variant] = {
        "chronolake": _chronolake(AsOfTuning()),
        **{f"chronolake on {kind}": _chronolake(AsOfTuning(), _delta_inputs(kind))
           for kind in backends or []},
        "chronolake (shuffled)": _chronolake(AsOfTuning(broadcast_max_rows=0)),
        BASELINE: _window_plan,
        RANGE_JOIN: _range_join,
        "duckdb asof": _duckdb,
        "polars join_asof": _polars,
    }
    if skew is Skew.HOT and rows > range_join_max_hot_rows:
        del every[RANGE_JOIN]  # a per-key cartesian on the hot key: minutes
    return every


def main() -> None:
    """Generate the data, time every variant, check they agree, report."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="orders (probe) rows")
    parser.add_argument("--skew", type=Skew, choices=list(Skew), default=Skew.UNIFORM)
    parser.add_argument("--keys", type=int, default=1_000, help="distinct currencies")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per variant")
    parser.add_argument("--only", nargs="*", help="run only these variants (names as printed)")
    parser.add_argument(
        "--range-join-max-hot-rows",
        type=int,
        default=RANGE_JOIN_MAX_HOT_ROWS,
        help="skip the range join above this many rows with --skew hot",
    )
    parser.add_argument(
        "--data", type=Path, help="join the data `_data.generate` wrote here (ignores --rows etc.)"
    )
    parser.add_argument("--json", type=Path, help="write the report here instead of results/")
    parser.add_argument(
        "--backends", type=backend_list,
        help="also join the data as Delta tables read through each of these lake backends "
        "(`chronolake on <backend>`), e.g. delta-rs,delta-spark; the tables are written "
        f"beside the data, in {DELTA_FOLDER}/",
    )
    args = parser.parse_args()
    prepared = load(args.data) if args.data else None
    if prepared:
        args.rows, args.skew, args.keys = prepared.rows, prepared.skew, prepared.keys
    spark = local_spark_session("chronolake-bench", backend=session_backend(args.backends))
    chosen = variants(args.rows, args.skew, args.range_join_max_hot_rows, args.backends)
    if args.only:
        chosen = {name: run for name, run in chosen.items() if name in args.only}
    with tempfile.TemporaryDirectory(prefix="chronolake-bench-") as folder:
        warmup = generate(Path(folder) / "warmup", rows=WARMUP_ROWS, skew=args.skew, keys=args.keys)
        data = prepared or generate(Path(folder), rows=args.rows, skew=args.skew, keys=args.keys)
        if args.backends:
            write_delta_tables(warmup)
            write_delta_tables(data)
        for run in chosen.values():
            run(spark, warmup)  # JIT and first-job costs stay out of the timed runs
        print(f"rows={data.rows} changelog={data.changelog_rows} keys={data.keys} skew={data.skew}")
        results = {name: _time(run, spark, data, args.repeat) for name, run in chosen.items()}
    report = _report(data, args.repeat, results) | {"peak_memory_mb": _peak_memory_mb(spark)}
    _print(report)
    rs, delta_spark = (results.get(f"chronolake on {kind}") for kind in ("delta-rs", "delta-spark"))
    if rs and delta_spark:
        report["delta_spark_vs_delta_rs"] = {
            "median_s": round(delta_spark["median_s"] / rs["median_s"], 2),
            "median_cpu_s": round(delta_spark["median_cpu_s"] / rs["median_cpu_s"], 2),
        }
        print(f"delta-spark / delta-rs (medians): {report['delta_spark_vs_delta_rs']}")
    RESULTS.mkdir(exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    path = args.json or RESULTS / f"temporal_join-{data.rows}-{data.skew}-{stamp}.json"
    path.write_text(json.dumps(report, indent=2))
    print(f"written {path}")
    if not report["checksums_agree"]:
        sys.exit("variants disagree: see the checksums above")


def _time(run: Variant, spark: SparkSession, data: BenchData, repeat: int) -> dict:
    seconds, cpu, checksums = [], [], set()
    for _ in range(repeat):
        start, start_cpu = time.perf_counter(), _cpu_seconds(spark)
        checksums.add(run(spark, data))
        seconds.append(time.perf_counter() - start)
        cpu.append(_cpu_seconds(spark) - start_cpu)
    return {
        "seconds": seconds,
        "median_s": statistics.median(seconds),
        "cpu_s": cpu,
        "median_cpu_s": statistics.median(cpu),
        "checksums": checksums,
    }


def _cpu_seconds(spark: SparkSession) -> float:
    """CPU time of this process (DuckDB, polars) plus Spark's JVMs (the driver's, and a
    cluster's executors'): less hurt by a busy machine than seconds."""
    jvms = [_jvm_pid(spark), *_executor_pids(spark)]
    return time.process_time() + sum(map(_jvm_cpu_seconds, jvms))


def _jvm_cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _jvm_pid(spark: SparkSession) -> int:
    return spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()  # type: ignore[union-attr]


def _peak_memory_mb(spark: SparkSession) -> dict[str, int | None]:
    """Peak resident memory so far (the kernel's high-water mark, `VmHWM`) of this Python
    process (where DuckDB and polars run), of Spark's driver JVM and of its executors' JVMs
    together, in MiB; it covers every variant this process ran. In local mode the executor
    is a thread pool in the driver's JVM (`executors` is None)."""
    executors = _executor_pids(spark)
    return {
        "python": _high_water_mb(os.getpid()),
        "driver_jvm": _high_water_mb(_jvm_pid(spark)),
        "executors": sum(map(_high_water_mb, executors)) if executors else None,
    }


def _executor_pids(spark: SparkSession) -> list[int]:
    """The executor JVMs of this application on this machine (a standalone cluster's run
    here too); none in local mode."""
    app = spark.sparkContext.applicationId
    found = []
    for entry in Path("/proc").iterdir():
        try:
            command = (entry / "cmdline").read_text() if entry.name.isdigit() else ""
        except OSError:
            continue  # it ended while listed
        if "CoarseGrainedExecutorBackend" in command and app in command:
            found.append(int(entry.name))
    return found


def _high_water_mb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) // 1024
    raise RuntimeError(f"process {pid} reports no VmHWM")


def _report(data: BenchData, repeat: int, results: dict[str, dict]) -> dict:
    baseline = results.get(BASELINE, {}).get("median_s")
    baseline_cpu = results.get(BASELINE, {}).get("median_cpu_s")
    checksums = {checksum for result in results.values() for checksum in result["checksums"]}
    variants = {
        name: {
            "median_s": round(result["median_s"], 3),
            "runs_s": [round(s, 3) for s in result["seconds"]],
            "median_cpu_s": round(result["median_cpu_s"], 3),
            "cpu_saving_vs_window": (
                round(baseline_cpu / result["median_cpu_s"], 2) if baseline_cpu else None
            ),
            "speedup_vs_window": round(baseline / result["median_s"], 2) if baseline else None,
            "checksum": sorted(result["checksums"])[0],
        }
        for name, result in results.items()
    }
    spark_plans = [results[n]["median_s"] for n in (BASELINE, RANGE_JOIN) if n in results]
    ours = results.get("chronolake", {}).get("median_s")
    return {
        "benchmark": "temporal_join",
        "rows": data.rows,
        "changelog_rows": data.changelog_rows,
        "keys": data.keys,
        "skew": str(data.skew),
        "repeat": repeat,
        "cpus": os.cpu_count(),
        "load_average": os.getloadavg(),
        "checksums_agree": len(checksums) == 1,
        "chronolake_vs_fastest_spark_plan": (
            round(min(spark_plans) / ours, 2) if spark_plans and ours else None
        ),
        "variants": variants,
    }


def _print(report: dict) -> None:
    print(f"{'variant':<24}{'median s':>10}{'vs window':>11}{'cpu s':>9}  runs")
    for name, result in report["variants"].items():
        speedup = result["speedup_vs_window"]
        ratio = f"{speedup:.2f}x" if speedup else "-"
        cpu = result["median_cpu_s"]
        print(f"{name:<24}{result['median_s']:>10.3f}{ratio:>11}{cpu:>9.2f}  {result['runs_s']}")
    print(f"chronolake vs fastest Spark plan: {report['chronolake_vs_fastest_spark_plan']}x")
    print(f"checksums agree: {report['checksums_agree']}  (load average {report['load_average']})")
    print(f"peak resident memory of this run's processes (MiB): {report['peak_memory_mb']}")


if __name__ == "__main__":
    main()
