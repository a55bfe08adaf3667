"""History as a table (issue 41): a history view over a long change stream, then an
incremental run for 1% new changes, against a full recompute and against a MERGE-based SCD2.

Builds a lake with an op-column `rates` changelog (`--changes` changes of `--keys` keys in
`--commits` commits, each key's changes in event-time order) and the view
`rates_history` = `SELECT currency, rate, valid_from, valid_to, committed_at FROM rates FOR
SYSTEM_TIME ALL` (a derived table keyed by (currency, valid_from)), then times, in one process
and one Spark session (with Delta's jars, for the MERGE):

1. chronolake's first run of the view, over the history;
2. the MERGE-based SCD2 of Delta's docs (`tests/_scd2_merge.py`) applying the history as one
   batch to an empty table: the reference's first run;
3. after `--new-percent` (1%) new changes land in one commit, most on time (after the
   history), `--late-percent` of them timed anywhere in the history's day, `--tie-percent`
   at the time of a history change of their key (a correction), `--delete-percent` deletes:
   chronolake's incremental run of the view;
4. the MERGE applying that commit as one batch;
5. the full recompute: the bounded `FOR SYSTEM_TIME ALL` query over every change, written
   to a Delta table;
6. the view's full refresh (`full_refresh`): the derived table rebuilt from its source.

Checks (untimed, in Spark): the first run equals the MERGE's table row for row (the history
arrives in order); after the new commit, the incremental view equals the full recompute, and
the keys where it differs from the MERGE's table are among those the late changes and ties
touched. For each timed step it reports seconds, CPU-seconds of the process and Spark's JVM
and, from Spark's status store and event log (`incremental.StageMeter`), executor CPU,
stages, rows read (all passes, and from the lake's files) and written, by call site; the
incremental run is timed phase by phase (prepare and read, watermarks, the operator's step,
the commit): where its time goes. A warm-up sequence on `--warmup-changes` changes runs
first, unreported. The report is printed and written as JSON under `benchmarks/results/`.

    .venv/bin/python benchmarks/history.py --changes 2000000 --keys 200000
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import get_args

import deltalake
import numpy as np
import pyarrow as pa
from delta.tables import DeltaTable
from deltalake import write_deltalake
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "tests")]
from _scd2_merge import EFFECTIVE, END, ChangeStream, apply_batch, create_scd2_table  # noqa: E402
from incremental import EVENT_LOG, StageMeter  # noqa: E402

from chronolake import Catalog, full_refresh  # noqa: E402
from chronolake.runtime.derived import DerivedTable  # noqa: E402
from chronolake.runtime.result import RunResult  # noqa: E402
from chronolake.spark.session import local_spark_session  # noqa: E402
from chronolake.spark.stack import BackendChoice  # noqa: E402

RESULTS = HERE / "results"
START_MS = 1_704_067_200_000  # 2024-01-01T00:00:00
DAY_MS = 86_400_000
HOUR_MS = 3_600_000
VIEW = "rates_history"
DDL = f"""
CREATE TABLE rates (
  currency BIGINT, rate BIGINT, currency_time TIMESTAMP(3),
  WATERMARK FOR currency_time AS currency_time - INTERVAL '5' SECOND,
  PRIMARY KEY (currency) NOT ENFORCED
) WITH ('path' = 'rates', 'changelog' = 'op-column', 'changelog.op-column' = 'op');
CREATE VIEW {VIEW} AS
SELECT currency, rate, valid_from, valid_to, committed_at FROM rates FOR SYSTEM_TIME ALL;
"""
HISTORY_QUERY = ("SELECT currency, rate, valid_from, valid_to, committed_at "
                 "FROM rates FOR SYSTEM_TIME ALL")
STREAM = ChangeStream(key="currency", values=("rate",), time="currency_time")
VERSION_COLUMNS = ("currency", "rate", "valid_from", "valid_to")
FIGURES = ("rows_in", "versions_in", "touched_keys", "rows_out", "state_rows")


# --- data ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Changes:
    """A commit's changes, and the keys whose new changes arrive out of order (late, or at
    the time of an earlier change of their key)."""

    rows: pa.Table
    out_of_order_keys: np.ndarray


def _rows(keys: np.ndarray, rates: np.ndarray, times_ms: np.ndarray, ops: np.ndarray
          ) -> pa.Table:
    return pa.table({
        "currency": keys.astype(np.int64),
        "rate": rates.astype(np.int64),
        "currency_time": pa.array(times_ms * 1000, type=pa.timestamp("us")),
        "op": ops.astype(str),
    })


def _ops(rng: np.random.Generator, count: int, delete_percent: float) -> np.ndarray:
    return np.where(rng.random(count) < delete_percent / 100, "-D", "+U").astype(object)


def history(rng: np.random.Generator, changes: int, keys: int, delete_percent: float
            ) -> Changes:
    """`changes` over one day, arriving in time order (so each key's in event-time order):
    a key's first change `+I`, then `+U`, `delete_percent` `-D`; every change a new rate."""
    times = START_MS + np.sort(rng.integers(0, DAY_MS, changes))
    key = rng.integers(0, keys, changes)
    ops = _ops(rng, changes, delete_percent)
    ops[np.unique(key, return_index=True)[1]] = "+I"
    return Changes(_rows(key, np.arange(changes), times, ops), np.empty(0, dtype=np.int64))


def increment(rng: np.random.Generator, past: pa.Table, new: int, keys: int,
              args: argparse.Namespace) -> Changes:
    """`new` changes in one commit, in shuffled arrival order: on time (in the hour after the
    history), late (anywhere in the history's day) or a correction (a history change's key
    and time, a new rate); `args.delete_percent` of the first two are deletes."""
    late, ties = round(new * args.late_percent / 100), round(new * args.tie_percent / 100)
    on_time = new - late - ties
    picked = rng.integers(0, past.num_rows, ties)
    past_times = past["currency_time"].cast(pa.int64()).to_numpy() // 1000
    key = np.concatenate([rng.integers(0, keys, on_time + late),
                          past["currency"].to_numpy()[picked]])
    times = np.concatenate([START_MS + DAY_MS + rng.integers(0, HOUR_MS, on_time),
                            START_MS + rng.integers(0, DAY_MS, late), past_times[picked]])
    ops = np.concatenate([_ops(rng, on_time + late, args.delete_percent),
                          np.full(ties, "+U", dtype=object)])
    order = rng.permutation(new)
    rows = _rows(key[order], past.num_rows + np.arange(new), times[order], ops[order])
    return Changes(rows, np.unique(key[on_time:]))


def _append(path: Path, rows: pa.Table, commits: int) -> int:
    """`rows` appended in `commits` commits, in order; the table's last version."""
    for piece in np.array_split(np.arange(rows.num_rows), commits):
        write_deltalake(str(path), rows.take(pa.array(piece)), mode="append")
    return deltalake.DeltaTable(str(path)).version()


# --- timing -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Meter:
    """Spark's own accounting of the stages a step ran, and the process's CPU."""

    stages: StageMeter
    jvm_pid: int

    @classmethod
    def of(cls, spark: SparkSession) -> Meter:
        jvm = spark.sparkContext._jvm  # type: ignore[attr-defined]
        return cls(StageMeter(spark), jvm.java.lang.ProcessHandle.current().pid())

    def cpu_seconds(self) -> float:
        """CPU of this process (where delta-rs writes) and of Spark's JVM (the driver and, in
        local mode, the executors' threads; GC and JIT included): less hurt by a busy
        machine than seconds, and fair to both lake backends, where executor CPU is not."""
        fields = Path(f"/proc/{self.jvm_pid}/stat").read_text().rsplit(")", 1)[1].split()
        return time.process_time() + (int(fields[11]) + int(fields[12])) / os.sysconf(
            "SC_CLK_TCK")


def _measure(meter: Meter, label: str, step: Callable[[], dict | None]) -> dict:
    """One step's seconds and work; `step` may return figures to report beside them."""
    meter.stages.start()
    started, cpu = time.perf_counter(), meter.cpu_seconds()
    figures = step()
    seconds, cpu = time.perf_counter() - started, meter.cpu_seconds() - cpu
    spark = meter.stages.read()
    print(f"{label:<44}{seconds:>8.2f}s  cpu {cpu:>7.2f}s  executor cpu "
          f"{spark['executor_cpu_s']:>7.2f}s  stages {spark['stages']:>3}  read "
          f"{spark['input_records']:>11,}  written {spark['output_records']:>11,}", flush=True)
    return {"seconds": round(seconds, 3), "cpu_s": round(cpu, 3), **spark,
            "figures": figures or {}}


def _phased_run(meter: Meter, view: DerivedTable) -> dict:
    """A run of `view` timed phase by phase, through the calls `run()` makes in turn (as the
    Dagster asset's ops do): where an incremental run's time goes."""
    held: dict = {}

    def prepare() -> None:
        held["plan"] = view.prepare()
        held["reads"] = view.read(held["plan"])

    def assign() -> None:
        held["reads"] = view.assign(held["reads"])

    def operate() -> None:
        held["step"] = view.operate(held["plan"], held["reads"])

    def commit() -> None:
        held["result"] = view.commit(held["plan"], held["reads"], held["step"])

    print("chronolake, incremental run, by phase:")
    phases = {name: _measure(meter, f"  {name}", call) for name, call in (
        ("prepare and read (lazy)", prepare), ("assign watermarks", assign),
        ("operate (the step, lazy)", operate), ("commit (output, state, checkpoint)", commit))}
    total = {measure: round(sum(p[measure] for p in phases.values()), 3)
             for measure in ("seconds", "cpu_s", "executor_cpu_s", "stages", "input_records",
                             "output_records")}
    print(f"{'chronolake, incremental run':<44}{total['seconds']:>8.2f}s  cpu "
          f"{total['cpu_s']:>7.2f}s  executor cpu {total['executor_cpu_s']:>7.2f}s  stages "
          f"{total['stages']:>3}", flush=True)
    return {**total, "figures": _run_figures(held["result"]), "phases": phases}


def _run_figures(result: RunResult) -> dict:
    return {name: int(result.figures.get(name, 0)) for name in FIGURES}


def _versions(frame: DataFrame) -> DataFrame:
    return frame.select(*VERSION_COLUMNS)


def _scd2_versions(spark: SparkSession, path: Path) -> DataFrame:
    """The MERGE's table as history rows (read anew: a `DeltaTable.toDF()` keeps the
    snapshot it first ran on)."""
    table = spark.read.format("delta").load(str(path))
    return table.select("currency", "rate", F.col(EFFECTIVE).alias("valid_from"),
                        F.col(END).alias("valid_to"))


def _rows_apart(left: DataFrame, right: DataFrame) -> DataFrame:
    return left.exceptAll(right).unionByName(right.exceptAll(left))


# --- the sequence -------------------------------------------------------------------------------


def sequence(spark: SparkSession, meter: Meter, folder: Path, changes: int, keys: int,
             args: argparse.Namespace, backend: BackendChoice | None) -> dict:
    """Build the lake under `folder`, time the six steps, check the results; the report."""
    rng = np.random.default_rng(41)
    lake = folder / "lake"
    past = history(rng, changes, keys, args.delete_percent)
    last = _append(lake / "rates", past.rows, args.commits)
    catalog = Catalog(lake, spark, backend=backend)
    list(catalog.run_script(DDL))
    view = DerivedTable(catalog, VIEW)
    scd2_path = folder / "scd2"
    steps: dict[str, dict] = {}
    steps["chronolake, first run"] = _measure(
        meter, "chronolake, first run", lambda: _run_figures(view.run()))

    def merge_history() -> None:
        batch = catalog.changelog("rates", 0, last)
        apply_batch(create_scd2_table(spark, str(scd2_path), batch, STREAM), batch, STREAM)

    steps["MERGE, first batch"] = _measure(meter, "MERGE SCD2, the history as one batch",
                                           merge_history)
    first_apart = _rows_apart(_versions(catalog.table(VIEW)),
                              _scd2_versions(spark, scd2_path)).count()

    new = increment(rng, past.rows, round(changes * args.new_percent / 100), keys, args)
    version = _append(lake / "rates", new.rows, 1)
    steps["chronolake, incremental run"] = _phased_run(meter, view)

    def merge_increment() -> None:
        apply_batch(DeltaTable.forPath(spark, str(scd2_path)),
                    catalog.changelog("rates", version, version), STREAM)

    steps["MERGE, the new batch"] = _measure(meter, "MERGE SCD2, the new batch",
                                             merge_increment)
    recomputed = folder / "recomputed"

    def recompute() -> None:
        catalog.backend.overwrite_dataframe(catalog.sql(HISTORY_QUERY), recomputed)

    steps["full recompute"] = _measure(meter, "full recompute (FOR SYSTEM_TIME ALL written)",
                                       recompute)
    ours = _versions(catalog.table(VIEW))
    incremental_apart = _rows_apart(
        ours, _versions(catalog.backend.snapshot(recomputed))).count()
    apart_keys = _rows_apart(ours, _scd2_versions(spark, scd2_path)).select("currency").distinct()
    late_keys = spark.createDataFrame(pa.table({"currency": new.out_of_order_keys}))
    checks = {
        "first_run_rows_apart_from_merge": first_apart,
        "incremental_rows_apart_from_full_recompute": incremental_apart,
        "keys_apart_from_merge": apart_keys.count(),
        "keys_apart_from_merge_not_late_or_tied": apart_keys.join(
            late_keys, "currency", "left_anti").count(),
        "late_or_tied_keys": len(new.out_of_order_keys),
    }
    steps["full refresh"] = _measure(meter, "full refresh of the view",
                                     lambda: _run_figures(full_refresh(catalog, VIEW)))
    checks["full_refresh_rows_apart_from_full_recompute"] = _rows_apart(
        _versions(catalog.table(VIEW)), _versions(catalog.backend.snapshot(recomputed))).count()
    print("checks:", checks, flush=True)
    return {"backend": catalog.backend.kind, "changes": changes, "keys": keys,
            "new_changes": new.rows.num_rows, "history_version": last, "steps": steps,
            "checks": checks, "incremental_speed_up": _speed_ups(steps)}


def _speed_ups(steps: dict[str, dict]) -> dict[str, dict[str, float | None]]:
    """The incremental run's speed-up against each reference run in the same process (the
    reference's measure over the run's): above 1, the incremental run took less."""
    incremental = steps["chronolake, incremental run"]

    def against(name: str) -> dict[str, float | None]:
        return {measure: round(steps[name][measure] / incremental[measure], 2)
                if incremental[measure] else None
                for measure in ("seconds", "cpu_s", "executor_cpu_s")}

    return {f"against the {name}": against(name)
            for name in ("full recompute", "full refresh", "MERGE, the new batch")}


def _agreed(checks: dict[str, int]) -> bool:
    return not (checks["first_run_rows_apart_from_merge"]
                or checks["incremental_rows_apart_from_full_recompute"]
                or checks["keys_apart_from_merge_not_late_or_tied"]
                or checks["full_refresh_rows_apart_from_full_recompute"])


def main() -> None:
    """Warm up, run the sequence, check, report."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--changes", type=int, default=2_000_000, help="history changes")
    parser.add_argument("--keys", type=int, default=200_000, help="distinct keys")
    parser.add_argument("--new-percent", type=float, default=1.0,
                        help="new changes, percent of the history")
    parser.add_argument("--late-percent", type=float, default=10.0,
                        help="of the new changes, timed anywhere in the history's day")
    parser.add_argument("--tie-percent", type=float, default=2.0,
                        help="of the new changes, at the time of a history change of their key")
    parser.add_argument("--delete-percent", type=float, default=3.0,
                        help="deletes among the history's and the new on-time and late changes")
    parser.add_argument("--commits", type=int, default=10, help="commits of the history")
    parser.add_argument("--backend", choices=get_args(BackendChoice),
                        help="chronolake's lake backend (default: the session's, delta-spark "
                        "as it has Delta's jars)")
    parser.add_argument("--warmup-changes", type=int, default=20_000,
                        help="first run the sequence unreported on this many changes (0: none)")
    args = parser.parse_args()
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="chronolake-history-") as name:
        folder = Path(name)
        events = folder / "events"
        events.mkdir()
        spark = local_spark_session(
            "chronolake-bench-history",
            settings={**EVENT_LOG, "spark.eventLog.dir": events.as_uri()},
            backend="delta-spark",
        )
        meter = Meter.of(spark)
        if args.warmup_changes:
            print(f"warm-up ({args.warmup_changes:,} changes, unreported)")
            sequence(spark, meter, folder / "warmup", args.warmup_changes,
                     max(args.warmup_changes * args.keys // args.changes, 1), args, args.backend)
        print(f"--- {args.changes:,} changes of {args.keys:,} keys")
        report = sequence(spark, meter, folder / "run", args.changes, args.keys, args,
                          args.backend)
    report = {
        "benchmark": "history",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        **report,
        "new_percent": args.new_percent, "late_percent": args.late_percent,
        "tie_percent": args.tie_percent, "delete_percent": args.delete_percent,
        "commits": args.commits, "warmup_changes": args.warmup_changes,
        "cpus": os.cpu_count(), "load_average": {"before": load_before,
                                                 "after": os.getloadavg()},
        "agreed": _agreed(report["checks"]),
    }
    for name, ratio in report["incremental_speed_up"].items():
        print(f"incremental run's speed-up {name:<34}seconds {ratio['seconds']}  CPU "
              f"{ratio['cpu_s']}  executor CPU {ratio['executor_cpu_s']}")
    RESULTS.mkdir(exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    path = RESULTS / f"history-{args.changes}-{stamp}.json"
    path.write_text(json.dumps(report, indent=2))
    print(f"written {path}  (load average {report['load_average']})")
    if not report["agreed"]:
        sys.exit("the checks failed: see them above")


if __name__ == "__main__":
    main()
