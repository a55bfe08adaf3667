"""Bounded state in a catch-up run: split watermark alignment on a skewed backlog.

Writes one skewed backlog with delta-rs: `orders` (append, split by `region`) whose regions
arrive interleaved, row for row; the last region's orders all fall in the last
`--hours - --lead-h` hours, the others' spread over all `--hours`, so the last region runs
hours ahead; and `rates` (change data feed, versioned by `currency`) updated every
`--rate-every-s` seconds over the whole time range. Both tables
bound their ticks (`'scan.max-rows-per-tick'`); an event-time temporal join enriches every
order with the rate valid at its order time.

Runs the join twice in one Spark session on copies of the same lake: with `orders` and
`rates` in one alignment group (`--drift-min` max drift, updated every tick), and without
alignment. Reports each run's peak buffered rows (the join's pending orders plus kept rate
versions, after each tick), ticks, pauses and seconds, checks the two outputs are identical,
and checks the target: aligned peak at most the rows within max drift plus one tick per split,
and at least 10× below the unaligned peak. Prints a table and writes JSON under
`benchmarks/results/`.

    .venv/bin/python benchmarks/alignment.py
    .venv/bin/python benchmarks/alignment.py --rows-per-region 600 --max-rows-per-tick 60  # quick
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from deltalake import write_deltalake

from chronolake import Catalog, RunResult
from chronolake.lake import DeltaRsBackend
from chronolake.lake.layout import output_path
from chronolake.runtime.derived import DerivedTable
from chronolake.spark.session import local_spark_session

RESULTS = Path(__file__).resolve().parent / "results"
T0_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z
HOUR_MS = 3_600_000
CURRENCIES = ("USD", "EUR", "JPY", "GBP", "CHF")
VIEW = "orders_enriched"


def generate(root: Path, args: argparse.Namespace) -> dict[str, np.ndarray]:
    """The skewed backlog; returns every row's rowtime (ms) per table, for the bound."""
    regions = [f"region-{i}" for i in range(args.regions)]
    per, total_ms, lead_ms = args.rows_per_region, int(args.hours * HOUR_MS), int(
        args.lead_h * HOUR_MS
    )
    frames = []
    for index, region in enumerate(regions):
        start = lead_ms if index == len(regions) - 1 else 0
        offsets = start + np.arange(per, dtype=np.int64) * (total_ms - start) // per
        ids = np.arange(per, dtype=np.int64) * len(regions) + index
        frames.append((ids, np.full(per, region), T0_MS + offsets))
    # arrival order interleaves the regions: row i of every region, then row i + 1, ...
    ids = np.stack([f[0] for f in frames], axis=1).ravel()
    region = np.stack([f[1] for f in frames], axis=1).ravel()
    order_ms = np.stack([f[2] for f in frames], axis=1).ravel()
    rng = np.random.default_rng(7)
    orders = pa.table({
        "order_id": ids,
        "region": pa.array(region.astype(str)),
        "currency": pa.array(np.array(CURRENCIES)[ids % len(CURRENCIES)]),
        "amount": rng.integers(100, 100_000, size=len(ids)) / 100,
        "order_time": _timestamps(order_ms),
    })
    _write(root / "orders", orders, args.commits, cdf=False)

    end_ms = T0_MS + total_ms
    steps = np.arange(T0_MS, end_ms + 1, args.rate_every_s * 1000, dtype=np.int64)
    rate_ms = np.repeat(steps, len(CURRENCIES))
    rates = pa.table({
        "currency": pa.array(np.tile(CURRENCIES, len(steps))),
        "rate": 1 + rng.integers(0, 1000, size=len(rate_ms)) / 1000,
        "currency_time": _timestamps(rate_ms),
    })
    _write(root / "rates", rates, args.commits, cdf=True)
    return {"orders": order_ms, "rates": rate_ms}


def _timestamps(millis: np.ndarray) -> pa.Array:
    return pa.array(millis, pa.int64()).cast(pa.timestamp("ms")).cast(pa.timestamp("us"))


def _write(path: Path, table: pa.Table, commits: int, *, cdf: bool) -> None:
    size = -(-table.num_rows // commits)
    for start in range(0, table.num_rows, size):
        write_deltalake(
            str(path), table.slice(start, size), mode="append",
            configuration={"delta.enableChangeDataFeed": "true"} if cdf else None,
        )


def ddl(args: argparse.Namespace, *, aligned: bool) -> str:
    def options(table: str, extra: dict[str, str]) -> str:
        values = {"connector": "delta", "path": table, **extra,
                  "scan.max-rows-per-tick": str(args.max_rows_per_tick)}
        if aligned:
            values |= {
                "scan.watermark.alignment.group": "catch-up",
                "scan.watermark.alignment.max-drift": f"{args.drift_min} min",
                "scan.watermark.alignment.update-interval": "200 ms",
            }
        return ", ".join(f"'{key}' = '{value}'" for key, value in values.items())

    return f"""
    CREATE TABLE orders (order_id BIGINT, region STRING, currency STRING, amount DOUBLE,
      order_time TIMESTAMP(3), WATERMARK FOR order_time AS order_time - INTERVAL '1' SECOND)
      WITH ({options("orders", {"changelog": "append", "scan.split-by": "region"})});
    CREATE TABLE rates (currency STRING, rate DOUBLE, currency_time TIMESTAMP(3),
      WATERMARK FOR currency_time AS currency_time - INTERVAL '1' SECOND,
      PRIMARY KEY (currency) NOT ENFORCED)
      WITH ({options("rates", {"changelog": "cdf"})});
    CREATE VIEW {VIEW} AS
    SELECT o.order_id, o.region, o.currency, o.amount, o.order_time, r.rate,
           o.amount * r.rate AS amount_usd
    FROM orders AS o
    LEFT JOIN rates FOR SYSTEM_TIME AS OF o.order_time AS r ON o.currency = r.currency;
    """


def rows_within_drift(rowtimes: dict[str, np.ndarray], drift_ms: int) -> int:
    """The most rows (both tables) whose rowtimes fall in any window of `drift_ms`."""
    times = np.sort(np.concatenate(list(rowtimes.values())))
    ends = np.searchsorted(times, times + drift_ms, side="right")
    return int((ends - np.arange(len(times))).max())


def timed_run(catalog: Catalog) -> tuple[RunResult, float]:
    start = time.perf_counter()
    result = DerivedTable(catalog, VIEW).run()
    return result, time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--regions", type=int, default=2)
    parser.add_argument("--rows-per-region", type=int, default=2_000)
    parser.add_argument("--hours", type=float, default=6.0)
    parser.add_argument("--lead-h", type=float, default=5.7)
    parser.add_argument("--rate-every-s", type=int, default=300)
    parser.add_argument("--max-rows-per-tick", type=int, default=50)
    parser.add_argument("--drift-min", type=int, default=1)
    parser.add_argument("--commits", type=int, default=4)
    args = parser.parse_args()

    spark = local_spark_session("chronolake-bench-alignment")
    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        rowtimes = generate(root / "aligned", args)
        shutil.copytree(root / "aligned", root / "unaligned")
        outputs = {}
        for name in ("aligned", "unaligned"):
            catalog = Catalog(root / name, spark)
            list(catalog.run_script(ddl(args, aligned=name == "aligned")))
            result, seconds = timed_run(catalog)
            assert result.ticks is not None
            results[name] = {
                "seconds": seconds,
                "ticks": result.ticks.ticks,
                "peak_buffered_rows": max(result.ticks.buffered_rows),
                "buffered_rows": result.ticks.buffered_rows,
                "pauses": result.ticks.pauses,
                "resumes": result.ticks.resumes,
                "rows_out": result.figures["rows_out"],
            }
            outputs[name] = DeltaRsBackend(spark).snapshot(output_path(root / name, VIEW))
        aligned, unaligned = outputs["aligned"], outputs["unaligned"]
        identical = aligned.exceptAll(unaligned).isEmpty() and unaligned.exceptAll(
            aligned
        ).isEmpty()
        rows_out = aligned.count()
    splits = args.regions + 1
    within = rows_within_drift(rowtimes, args.drift_min * 60_000)
    bound = within + args.max_rows_per_tick * splits
    peak = {name: int(r["peak_buffered_rows"]) for name, r in results.items()}
    ratio = peak["unaligned"] / max(peak["aligned"], 1)
    checks = {
        "outputs identical": identical,
        f"aligned peak <= bound ({bound:,})": peak["aligned"] <= bound,
        "unaligned peak >= 10x aligned": ratio >= 10,
    }
    rates = len(rowtimes["rates"])
    print(f"{args.regions} regions x {args.rows_per_region:,} orders (the last one's in the "
          f"last {args.hours - args.lead_h:.1f} h of {args.hours} h), {rates:,} rate versions, "
          f"{args.max_rows_per_tick} rows per split and tick, max drift {args.drift_min} min; "
          f"{rows_out:,} rows out")
    print(f"{'run':<12}{'ticks':>7}{'peak buffered':>15}{'pauses':>8}{'seconds':>10}")
    for name, figures in results.items():
        pauses = sum(figures["pauses"].values())
        print(f"{name:<12}{figures['ticks']:>7}{peak[name]:>15,}{pauses:>8}"
              f"{figures['seconds']:>10.1f}")
    print(f"rows within max drift {within:,} + one tick per split "
          f"{args.max_rows_per_tick * splits:,} = bound {bound:,}; unaligned / aligned "
          f"{ratio:.1f}x")
    for check, ok in checks.items():
        print(f"{'ok  ' if ok else 'FAIL'} {check}")
    RESULTS.mkdir(exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    report = {
        "benchmark": "alignment", "args": vars(args), "results": results,
        "rows_out": rows_out, "rows_within_drift": within, "bound": bound, "ratio": ratio,
        "checks": checks, "load_average": os.getloadavg(),
    }
    (RESULTS / f"alignment-{stamp}.json").write_text(json.dumps(report, indent=2) + "\n")
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
