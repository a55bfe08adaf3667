"""Incremental runs: does a run that adds a few thousand rows cost in proportion to them?

Builds a lake with a large history (`--orders` append-only orders, `--rates` rate changes
landed as an op-column changelog), declares `enriched` (orders LEFT JOIN rates FOR SYSTEM_TIME
AS OF order_time) and materializes it with `chronolake.runtime.views.materialize_view`:

1. the first run, over the whole history;
2. an on-time increment: `--new-orders` orders and `--new-rates` rate changes after the
   history;
3. the same increment with `--late-percent` of its orders late (their times fall inside the
   history, below the watermark), which chronolake joins against the version history
   (`docs/design.md`, Temporal join);
4. the same again with the late orders at most `--slightly-late-seconds` below the last run's
   watermark: late as data usually is, and not older than their keys' versions in state.

For each run it reports the run's own figures (rows_in, rows_out, pending_rows, state_rows,
late rows) and what Spark did, read from Spark's status store for the stages of that run:
rows read (`input_records`: every pass over a file, and over the run's in-memory local
checkpoints), of which from the lake's files (`lake_rows_read`: the rows its Parquet scans
returned), both also against the rows the run touches (its new rows and the state it starts
from), rows written (`output_records`: output, state, history, late rows),
executor CPU seconds and stage count,
and the size of the view's version history table before the run (from its Delta log): a run
with late rows older than their keys' versions in state reads the pages of that table that
hold those rows' keys.
The ratios of each increment against the first run, all in one process, are the result;
the report is printed and written as JSON under `benchmarks/results/`.

With `--backends delta-rs,delta-spark` the whole sequence runs on each lake backend in turn,
in one process and one Spark session (started with Delta's jars, in which delta-rs works too),
each on a lake of its own with the same rows; the report adds delta-spark's figures over
delta-rs's, run by run. `--profile` adds an on-time increment under cProfile per backend.

    .venv/bin/python benchmarks/incremental.py --orders 2000000 --rates 200000
    .venv/bin/python benchmarks/incremental.py --backends delta-rs,delta-spark --profile
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import re
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import get_args
from urllib.parse import urlparse

import numpy as np
import pyarrow as pa
import pyarrow.compute
from deltalake import DeltaTable, write_deltalake
from pyspark.sql import SparkSession

from chronolake import Catalog, materialize_view
from chronolake.spark.session import local_spark_session
from chronolake.spark.stack import BackendChoice

RESULTS = Path(__file__).resolve().parent / "results"
START_US = 1_704_067_200_000_000  # 2024-01-01T00:00:00
DAY_US = 86_400_000_000
DDL = """
CREATE TABLE orders (
  order_id BIGINT, currency BIGINT, order_time TIMESTAMP(3), amount BIGINT,
  WATERMARK FOR order_time AS order_time - INTERVAL '5' SECOND
) WITH ('path' = 'orders', 'changelog' = 'append');
CREATE TABLE rates (
  currency BIGINT, rate BIGINT, currency_time TIMESTAMP(3),
  WATERMARK FOR currency_time AS currency_time - INTERVAL '5' SECOND,
  PRIMARY KEY (currency) NOT ENFORCED
) WITH ('path' = 'rates', 'changelog' = 'op-column', 'changelog.op-column' = 'op');
CREATE VIEW enriched AS
SELECT o.order_id, o.currency, o.order_time, o.amount, r.rate
FROM orders AS o LEFT JOIN rates FOR SYSTEM_TIME AS OF o.order_time AS r
ON o.currency = r.currency;
"""
PROFILED = "on-time increment, profiled"
"""`--profile`'s extra run, left out of the ratios."""
FIGURES = (
    "rows_in", "probe_rows_in", "build_rows_in", "rows_out", "emitted_probe_rows",
    "unmatched_rows", "pending_rows", "state_rows", "late_probe_rows", "late_build_rows",
)


# --- data ---------------------------------------------------------------------------------------


def _orders(rng: np.random.Generator, first_id: int, times_us: np.ndarray, keys: int) -> pa.Table:
    rows = len(times_us)
    return pa.table({
        "order_id": np.arange(first_id, first_id + rows, dtype=np.int64),
        "currency": rng.integers(0, keys, rows, dtype=np.int64),
        "order_time": pa.array(times_us, type=pa.timestamp("us")),
        "amount": rng.integers(1, 100_000, rows, dtype=np.int64),
    })


def _rates(
    rng: np.random.Generator, times_us: np.ndarray, keys: int, *, first: bool
) -> pa.Table:
    """Rate changes: every key's first event is `+I` (in the first batch), then `+U`, 3% `-D`."""
    rows = len(times_us)
    currency = rng.integers(0, keys, rows, dtype=np.int64)
    op = np.where(rng.random(rows) < 0.03, "-D", "+U").astype(object)
    if first:
        _, firsts = np.unique(currency, return_index=True)
        op[firsts] = "+I"
    return pa.table({
        "currency": currency,
        "rate": rng.integers(1, 1_000_000, rows, dtype=np.int64),
        "currency_time": pa.array(times_us, type=pa.timestamp("us")),
        "op": op.astype(str),
    })


def _ascending(rng: np.random.Generator, rows: int, start_us: int, span_us: int) -> np.ndarray:
    """Times rising through the span with up to 2 s of disorder, as a stream arrives."""
    # in floating point: rows * span_us overflows 64 bits from about 3.5M rows over 30 days
    steps = start_us + (np.arange(rows) * (span_us / max(rows, 1))).astype(np.int64)
    return steps + rng.integers(0, 2_000_000, rows, dtype=np.int64)


def _append(path: Path, table: pa.Table, commits: int) -> None:
    for piece in np.array_split(np.arange(table.num_rows), commits):
        if len(piece):
            write_deltalake(str(path), table.take(pa.array(piece)), mode="append")


# --- Spark's own accounting ---------------------------------------------------------------------


class StageMeter:
    """Rows read and written, CPU and stages of the Spark stages that ran since `start()`.

    Reads Spark's status store (kept with the UI disabled too): metadata-sized, one record
    per stage.
    """

    def __init__(self, spark: SparkSession) -> None:
        self._spark = spark
        self._seen: set[int] = set()
        self._lake_reads = LakeReads(spark)

    def _stages(self) -> list:
        jvm = self._spark.sparkContext._jvm  # type: ignore[attr-defined]
        store = self._spark.sparkContext._jsc.sc().statusStore()  # type: ignore[union-attr]
        no_quantiles = self._spark.sparkContext._gateway.new_array(jvm.double, 0)  # type: ignore[union-attr]
        stages = store.stageList(None, False, False, no_quantiles, None)
        return [stages.apply(i) for i in range(stages.size())]

    def start(self) -> None:
        self._seen = {stage.stageId() for stage in self._stages()}
        self._lake_reads.start()

    def read(self) -> dict[str, float]:
        new = [stage for stage in self._stages() if stage.stageId() not in self._seen]
        return {
            "stages": len(new),
            "input_records": sum(stage.inputRecords() for stage in new),
            "lake_rows_read": self._lake_reads.rows(),
            "output_records": sum(stage.outputRecords() for stage in new),
            "shuffle_records": sum(stage.shuffleWriteRecords() for stage in new),
            "executor_cpu_s": round(sum(stage.executorCpuTime() for stage in new) / 1e9, 3),
            "rows_read_by_site": _by_site(new),
            "stages_by_site": _stages_by_site(new),
        }


class LakeReads:
    """Rows the Parquet scans of the queries since `start()` returned: the rows read from the
    lake's files, apart from passes over the run's in-memory checkpoints.

    Counted from Spark's event log (`EVENT_LOG`), where each scan's row counter (a SQL metric)
    is named in its query's plan and every task's update of it is recorded: a scan inside a
    lazy local checkpoint runs in a later query's job, which the status store's per-query
    figures do not attribute to it.
    """

    def __init__(self, spark: SparkSession) -> None:
        folder = Path(urlparse(spark.conf.get("spark.eventLog.dir") or "").path)
        self._log = next(folder.glob(f"{spark.sparkContext.applicationId}*"))
        self._offset = 0
        self._scan_counters: set[int] = set()

    def start(self) -> None:
        self._offset = self._read(0)[1]

    def rows(self) -> int:
        events, self._offset = self._read(self._offset)
        rows = 0
        for event in events:
            if event["Event"] == "SparkListenerTaskEnd":
                rows += sum(int(update.get("Update", 0))
                            for update in event["Task Info"].get("Accumulables", [])
                            if update["ID"] in self._scan_counters)
        return rows

    def _read(self, offset: int) -> tuple[list[dict], int]:
        """The events written since `offset`, with every scan's counter noted."""
        with self._log.open("rb") as log:
            log.seek(offset)
            lines = log.read().splitlines(keepends=True)
        complete = [line for line in lines if line.endswith(b"\n")]
        events = [json.loads(line) for line in complete]
        for event in events:
            if "sparkPlanInfo" in event:
                self._note_scans(event["sparkPlanInfo"])
        return events, offset + sum(len(line) for line in complete)

    def _note_scans(self, node: dict) -> None:
        if node["nodeName"].startswith("Scan parquet"):
            self._scan_counters.update(metric["accumulatorId"] for metric in node["metrics"]
                                       if metric["name"] == "number of output rows")
        for child in node["children"]:
            self._note_scans(child)


EVENT_LOG = {"spark.eventLog.enabled": "true", "spark.eventLog.compress": "false",
             "spark.eventLog.rolling.enabled": "false"}
"""The session's settings for `LakeReads` (its folder, `spark.eventLog.dir`, is added)."""


def _by_site(stages: list) -> dict[str, int]:
    """Rows read per call site (the chronolake line that started the stage's job), most first:
    where a run reads its rows again."""
    reads: dict[str, int] = {}
    for stage in stages:
        site = stage.name()
        reads[site] = reads.get(site, 0) + stage.inputRecords()
    return dict(sorted(reads.items(), key=lambda item: -item[1]))


def _stages_by_site(stages: list) -> dict[str, dict[str, float]]:
    """Stages and executor CPU seconds per call site, most CPU first: which code's jobs
    (chronolake's, or Delta's own inside a write) the run's Spark work went to."""
    sites: dict[str, dict[str, float]] = {}
    for stage in stages:
        site = sites.setdefault(stage.name(), {"stages": 0, "executor_cpu_s": 0.0})
        site["stages"] += 1
        site["executor_cpu_s"] = round(site["executor_cpu_s"] + stage.executorCpuTime() / 1e9, 3)
    return dict(sorted(sites.items(), key=lambda item: -item[1]["executor_cpu_s"]))


# --- the run ------------------------------------------------------------------------------------


def _history_rows(catalog: Catalog) -> int:
    """Build events in the view's version history table, from its Delta log's file stats."""
    path = catalog.root / "_chronolake" / "state" / "enriched" / "history"
    if not DeltaTable.is_deltatable(str(path)):
        return 0
    actions = pa.table(DeltaTable(str(path)).get_add_actions(flatten=True))
    return int(pa.compute.sum(actions["num_records"]).as_py() or 0)


def _measure(
    catalog: Catalog, meter: StageMeter, label: str, state_before: int, *, profiled: bool = False
) -> dict:
    """One run's seconds, figures and Spark work; `state_before` is the state it starts from:
    with the new rows (`rows_in`), what the run touches. `profiled`: the run goes under
    cProfile, and the report's `profile` holds its hottest calls."""
    history_before = _history_rows(catalog)
    meter.start()
    profiler = cProfile.Profile() if profiled else None
    started = time.perf_counter()
    if profiler:
        profiler.enable()
    result = materialize_view(catalog, "enriched")
    if profiler:
        profiler.disable()
    seconds = time.perf_counter() - started
    spark = meter.read()
    figures = {name: int(result.figures.get(name, 0)) for name in FIGURES}
    touched = figures["rows_in"] + state_before
    print(
        f"{label:<22}{seconds:>8.2f}s  read {spark['input_records']:>10,} "
        f"({spark['input_records'] / touched:.1f}x touched; from the lake's files "
        f"{spark['lake_rows_read']:,}, {spark['lake_rows_read'] / touched:.1f}x)  written "
        f"{spark['output_records']:>10,}  cpu {spark['executor_cpu_s']:>7.2f}s  "
        f"stages {spark['stages']:>3}  rows_in {figures['rows_in']:>9,}  rows_out "
        f"{figures['rows_out']:>9,}  state {figures['state_rows']:>7,}  "
        f"late {figures['late_probe_rows']}  history before {history_before:,}",
        flush=True,
    )
    report = {"seconds": round(seconds, 3), "status": str(result.status), **spark,
              "history_rows_before": history_before, "rows_touched": touched,
              "figures": figures, "watermark_ms": result.watermark_ms}
    if profiler:
        report["profile"] = _hottest_calls(profiler, f"{label} on {catalog.backend.kind}")
    return report


def _hottest_calls(profiler: cProfile.Profile, title: str) -> str:
    """The profiled run's calls by cumulative time (chronolake's, delta-rs's and the
    Py4J round trips through which Spark's work is waited for), then by own time: where
    the driver's Python spends the run."""
    text = io.StringIO()
    text.write(f"cProfile of one run: {title}\n")
    stats = pstats.Stats(profiler, stream=text)
    stats.sort_stats("cumulative")
    stats.print_stats(r"chronolake/lake/|site-packages/deltalake/", 30)  # the backend's calls
    stats.print_stats(r"platform/chronolake/", 40)
    stats.sort_stats("tottime").print_stats(12)
    prefix = str(Path(__file__).resolve().parents[1])
    return re.sub(r"\S*/site-packages/", "", text.getvalue().replace(prefix + "/platform/", ""))


def _ratios(increment: dict, first: dict) -> dict[str, float | None]:
    def ratio(a: float, b: float) -> float | None:
        return round(a / b, 5) if b else None

    return {
        "seconds": ratio(increment["seconds"], first["seconds"]),
        "input_records": ratio(increment["input_records"], first["input_records"]),
        "lake_rows_read": ratio(increment["lake_rows_read"], first["lake_rows_read"]),
        "output_records": ratio(increment["output_records"], first["output_records"]),
        "executor_cpu_s": ratio(increment["executor_cpu_s"], first["executor_cpu_s"]),
        "rows_in": ratio(increment["figures"]["rows_in"], first["figures"]["rows_in"]),
    }


def _sequence(
    spark: SparkSession, meter: StageMeter, lake: Path, args: argparse.Namespace, *,
    backend: BackendChoice | None = None, orders: int | None = None, profile: bool = False,
) -> dict[str, dict]:
    """Build the lake at `lake` (the same seeded rows every time; `orders` history orders,
    `args.orders` unless given, and rate changes in proportion), run the view on it four
    times through `backend` (None: the session's default), return each run's report; with
    `profile`, a fifth on-time increment runs under cProfile, reported apart."""
    rng = np.random.default_rng(11)
    orders = args.orders if orders is None else orders
    rates = max(args.rates * orders // max(args.orders, 1), 1)
    _append(lake / "orders", _orders(rng, 0, _ascending(rng, orders, START_US, DAY_US),
                                     args.keys), args.commits)
    _append(lake / "rates", _rates(rng, _ascending(rng, rates, START_US, DAY_US),
                                   args.keys, first=True), args.commits)
    catalog = Catalog(lake, spark, backend=backend)
    list(catalog.run_script(DDL))
    runs = {"first run": _measure(catalog, meter, "first run (history)", 0)}
    next_id, hour = orders, 3_600_000_000
    increments = [
        ("on-time increment", 0.0, None),
        ("increment, late rows", args.late_percent, None),
        ("increment, slightly late", args.late_percent, args.slightly_late_seconds),
    ]
    if profile:
        increments.append((PROFILED, 0.0, None))
    for number, (label, late, late_seconds) in enumerate(increments, start=1):
        start = START_US + DAY_US + (number - 1) * hour
        times = _ascending(rng, args.new_orders, start, hour)
        late_rows = rng.random(args.new_orders) < late / 100
        if late_seconds is None:  # anywhere in the history's day
            late_times = START_US + rng.integers(0, DAY_US, args.new_orders)
        else:  # just below the last run's watermark
            horizon_us = runs[list(runs)[-1]]["watermark_ms"] * 1000
            late_times = horizon_us - rng.integers(0, late_seconds * 1_000_000,
                                                   args.new_orders)
        times = np.where(late_rows, late_times, times)
        _append(lake / "orders", _orders(rng, next_id, times, args.keys), 1)
        _append(lake / "rates", _rates(rng, _ascending(rng, args.new_rates, start, hour),
                                       args.keys, first=False), 1)
        next_id += args.new_orders
        state = runs[list(runs)[-1]]["figures"]["state_rows"]
        runs[label] = _measure(catalog, meter, label, state, profiled=label == PROFILED)
    return runs


def backend_list(value: str) -> list[BackendChoice]:
    """`--backends`: a comma-separated list of lake backends."""
    names = [name.strip() for name in value.split(",") if name.strip()]
    unknown = [name for name in names if name not in get_args(BackendChoice)]
    if unknown or not names:
        msg = (f"--backends takes a comma-separated list of {', '.join(get_args(BackendChoice))};"
               f" got {value!r}")
        raise argparse.ArgumentTypeError(msg)
    return names  # type: ignore[return-value]  # checked against the Literal above


def session_backend(backends: list[BackendChoice] | None) -> BackendChoice | None:
    """The backend to start the session with: delta-spark loads Delta's jars, in which
    session delta-rs works too, so both can be compared in one process."""
    return "delta-spark" if backends and "delta-spark" in backends else None


def _sequence_report(runs: dict[str, dict]) -> dict:
    first = runs["first run"]
    return {
        "runs": runs,
        "ratios_vs_first_run": {
            label: _ratios(run, first)
            for label, run in runs.items() if run is not first and label != PROFILED
        },
    }


def main() -> None:
    """Build the lake, run the view four times (per backend with `--backends`), report the
    ratios."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--orders", type=int, default=2_000_000, help="history orders")
    parser.add_argument("--rates", type=int, default=200_000, help="history rate changes")
    parser.add_argument("--keys", type=int, default=1_000, help="distinct currencies")
    parser.add_argument("--new-orders", type=int, default=5_000, help="orders per increment")
    parser.add_argument("--new-rates", type=int, default=500, help="rate changes per increment")
    parser.add_argument("--late-percent", type=float, default=1.0,
                        help="late orders in the third run, percent")
    parser.add_argument("--slightly-late-seconds", type=int, default=5,
                        help="how far below the last watermark the fourth run's late orders are")
    parser.add_argument("--commits", type=int, default=10, help="commits of the history")
    parser.add_argument(
        "--backends", type=backend_list,
        help="run the whole sequence on each of these lake backends in turn, in one process and "
        "one Spark session (with Delta's jars when delta-spark is named), each on a lake of "
        "its own with the same rows, e.g. delta-rs,delta-spark",
    )
    parser.add_argument(
        "--warmup-orders", type=int, default=0,
        help="with --backends: first run each backend's sequence once on a lake of this many "
        "history orders, unreported (JIT and first-use costs out of the timed runs)",
    )
    parser.add_argument(
        "--profile", action="store_true",
        help="after the four runs, one more on-time increment under cProfile: its hottest "
        "calls are printed and written beside the report",
    )
    args = parser.parse_args()
    backends: list[BackendChoice | None] = list(args.backends or [None])
    with tempfile.TemporaryDirectory(prefix="chronolake-incremental-") as folder:
        events = Path(folder) / "events"
        events.mkdir()
        spark = local_spark_session(
            "chronolake-bench-incremental",
            settings={**EVENT_LOG, "spark.eventLog.dir": events.as_uri()},
            backend=session_backend(args.backends),
        )
        meter = StageMeter(spark)
        if args.backends and args.warmup_orders:
            for backend in backends:
                print(f"warm-up on {backend} ({args.warmup_orders:,} orders, unreported)")
                _sequence(spark, meter, Path(folder) / f"warmup-{backend}", args,
                          backend=backend, orders=args.warmup_orders)
        by_backend = {}
        for backend in backends:
            if backend:
                print(f"--- {backend}")
            lake = Path(folder) / (f"lake-{backend}" if backend else "lake")
            by_backend[backend] = _sequence(spark, meter, lake, args, backend=backend,
                                            profile=args.profile)
    report = {
        "benchmark": "incremental",
        "history_orders": args.orders,
        "history_rates": args.rates,
        "keys": args.keys,
        "new_orders": args.new_orders,
        "new_rates": args.new_rates,
        "late_percent": args.late_percent,
        "new_rows_vs_history": round((args.new_orders + args.new_rates)
                                     / (args.orders + args.rates), 5),
        "cpus": os.cpu_count(),
        "load_average": os.getloadavg(),
    }
    if args.backends:
        report["warmup_orders"] = args.warmup_orders
        report["backends"] = {str(b): _sequence_report(runs) for b, runs in by_backend.items()}
        report["delta_spark_vs_delta_rs"] = _between(by_backend)
    else:
        report |= _sequence_report(by_backend[None])
    print(f"new rows / history rows: {report['new_rows_vs_history']}")
    for backend, runs in by_backend.items():
        for label, ratios in _sequence_report(runs)["ratios_vs_first_run"].items():
            print(f"{backend or '':<12}{label:<26}"
                  + "  ".join(f"{k} {v}" for k, v in ratios.items()))
    for label, ratios in report.get("delta_spark_vs_delta_rs", {}).items():
        print(f"delta-spark / delta-rs  {label:<26}"
              + "  ".join(f"{k} {v}" for k, v in ratios.items()))
    RESULTS.mkdir(exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    suffix = "-backends" if args.backends else ""
    path = RESULTS / f"incremental-{args.orders}{suffix}-{stamp}.json"
    for backend, runs in by_backend.items():
        if PROFILED in runs:
            profile = RESULTS / f"incremental-profile-{backend or 'default'}-{stamp}.txt"
            profile.write_text(runs[PROFILED].pop("profile"))
            print(f"profile of the {PROFILED} on {backend or 'the default backend'}: {profile}")
    path.write_text(json.dumps(report, indent=2))
    print(f"written {path}  (load average {report['load_average']})")
    sys.stdout.flush()


def _between(by_backend: dict[BackendChoice | None, dict[str, dict]]) -> dict[str, dict]:
    """delta-spark's figures over delta-rs's, run by run, when both ran."""
    if "delta-rs" not in by_backend or "delta-spark" not in by_backend:
        return {}
    rs, spark = by_backend["delta-rs"], by_backend["delta-spark"]
    return {
        label: {name: round(spark[label][name] / rs[label][name], 2) if rs[label][name] else None
                for name in ("seconds", "executor_cpu_s", "stages", "input_records")}
        for label in rs if label in spark
    }


if __name__ == "__main__":
    main()
