"""Restatement (issue #45): does restating one hour cost in proportion to the hour?

Builds a lake of `--orders` orders over `--days` days (a CDC table keyed by order_id, the
change data feed on, one append commit per day) and rates with a version per currency each
day, declares the reference platform's shape (`pipelines.py`'s `enriched`: orders LEFT JOIN rates
FOR SYSTEM_TIME AS OF order_time, and `per_hour`: a TUMBLE over `enriched`, the second hop;
and `per_currency`: a 10-minute TUMBLE over orders) and runs the three views over the history.
Then the upstream system replays one hour (`--hour`, from the first order): a predicate
overwrite of that hour in which a tenth of its orders are gone, a tenth corrected and 1% new.

It measures `chronolake restate orders` over that hour against the reference, a full refresh
of the three views over the rewritten source, in the same process: seconds, rows Spark read
from the lake and rows each hop wrote, and checks that inside the restated region both give
the same rows (in Spark: `exceptAll` both ways). The report is printed and written as JSON
under `benchmarks/results/`.

    .venv/bin/python benchmarks/restatement.py --orders 20000000 --days 30
    .venv/bin/python benchmarks/restatement.py --orders 200000 --days 3     # a quick look
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable, write_deltalake
from incremental import EVENT_LOG, RESULTS, START_US, StageMeter, _ascending
from pipelines import CDF_ON, HOUR_US
from pipelines import DDL as PIPELINE_DDL
from pipelines import _orders as orders_at
from pipelines import _rates as rates_at
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from chronolake import Catalog
from chronolake.lake.layout import output_path
from chronolake.runtime.derived import DerivedTable
from chronolake.runtime.restate_plan import run_restatement
from chronolake.runtime.result import RunResult
from chronolake.spark.session import local_spark_session

DAY_US = 24 * HOUR_US
DDL = PIPELINE_DDL + """
CREATE VIEW per_currency AS
SELECT window_start, window_end, currency, COUNT(*) AS orders, SUM(amount) AS amount
FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(order_time), INTERVAL '10' MINUTES))
GROUP BY window_start, window_end, currency;
"""
VIEWS = ("enriched", "per_hour", "per_currency")


def _rates(days: int) -> pa.Table:
    """A version per currency at the start and each day after, and one past the orders' end
    (so the join's watermark passes every order)."""
    return rates_at([START_US - HOUR_US + day * DAY_US for day in range(days + 1)])


def _replayed(rng: np.random.Generator, table: pa.Table, first_id: int, start_us: int
              ) -> pa.Table:
    """The hour's orders as the upstream system re-exports them: a tenth gone, a tenth
    corrected, 1% new."""
    rows = table.num_rows
    kept = table.filter(pa.array(rng.random(rows) >= 0.1))
    corrected = pa.array(rng.random(kept.num_rows) < 0.1)
    amounts = pc.if_else(corrected, pc.add(kept["amount"], 1), kept["amount"])
    kept = kept.set_column(kept.schema.get_field_index("amount"), "amount", amounts)
    new = max(rows // 100, 1)
    times = start_us + np.sort(rng.integers(0, HOUR_US, new, dtype=np.int64))
    return pa.concat_tables([kept, orders_at(rng, first_id, times).cast(kept.schema)])


def _measured(meter: StageMeter, work: Callable[[], list[RunResult]]
              ) -> tuple[list[RunResult], dict]:
    """`work`'s results, its seconds, the rows Spark read from the lake and each view wrote."""
    meter.start()
    started = time.perf_counter()
    results = work()
    seconds = time.perf_counter() - started
    spark = meter.read()
    written: dict[str, int] = {}
    for result in results:  # a view's runs, summed
        rows_out = int(result.figures.get("rows_out", 0))
        written[result.table] = written.get(result.table, 0) + rows_out
    return results, {"seconds": round(seconds, 3), "rows_written": written,
                     "lake_rows_read": spark["lake_rows_read"],
                     "input_records": spark["input_records"],
                     "executor_cpu_s": spark["executor_cpu_s"], "stages": spark["stages"],
                     "rows_read_by_site": dict(list(spark["rows_read_by_site"].items())[:8])}


def _region(catalog: Catalog, view: str, start_us: int, end_us: int) -> DataFrame:
    """The view's rows of the restated region: orders in the hour, or windows overlapping it."""
    rows = catalog.backend.snapshot(output_path(catalog.root, view))
    start, end = (F.timestamp_micros(F.lit(us)) for us in (start_us, end_us))
    if "order_time" in rows.columns and "window_start" not in rows.columns:
        return rows.where((F.col("order_time") >= start) & (F.col("order_time") < end))
    return rows.where((F.col("window_start") < end) & (F.col("window_end") > start))


def main() -> None:
    """Build the lake, run the views, replay an hour; restate it, then refresh; report."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--orders", type=int, default=20_000_000, help="history orders")
    parser.add_argument("--days", type=int, default=30, help="days the history spans")
    parser.add_argument("--hour", type=int, default=None,
                        help="the hour replayed, counted from the first order (default: the "
                        "middle of the history)")
    args = parser.parse_args()
    hour = args.hour if args.hour is not None else args.days * 12
    rng = np.random.default_rng(7)
    report: dict = {"date": datetime.now(UTC).isoformat(timespec="seconds"),
                    "load_average": os.getloadavg(), "cpus": os.cpu_count(), "args": vars(args)}
    with tempfile.TemporaryDirectory(prefix="chronolake-restatement-") as folder:
        root, events = Path(folder) / "lake", Path(folder) / "events"
        events.mkdir(parents=True)
        spark = local_spark_session("chronolake-bench-restatement",
                                    settings={**EVENT_LOG, "spark.eventLog.dir": events.as_uri()})
        meter = StageMeter(spark)
        times = _ascending(rng, args.orders, START_US, args.days * DAY_US)
        history = orders_at(rng, 0, times)
        days = np.array_split(np.arange(args.orders), args.days)

        def land(day: np.ndarray) -> None:
            write_deltalake(str(root / "orders"), history.take(pa.array(day)), mode="append",
                            configuration=CDF_ON)

        land(days[0])
        write_deltalake(str(root / "rates"), _rates(args.days), configuration=CDF_ON)
        catalog = Catalog(root, spark)
        catalog.declare(DDL)

        def daily_history() -> list[RunResult]:
            """Each day's orders land, and the views run after them, as a scheduled pipeline
            builds its tables (so each view's files hold a day or so, as in production)."""
            results = []
            for number, day in enumerate(days):
                if number:
                    land(day)
                results += [DerivedTable(catalog, view).run() for view in VIEWS]
            return results

        _, report["history_run"] = _measured(meter, daily_history)
        print(f"history run: {report['history_run']}", flush=True)

        start_us = START_US + hour * HOUR_US
        end_us = start_us + HOUR_US
        stamp = pa.timestamp("us")
        hour_rows = DeltaTable(str(root / "orders")).to_pyarrow_table(filters=[
            ("order_time", ">=", pa.scalar(start_us, stamp)),
            ("order_time", "<", pa.scalar(end_us, stamp))])
        replayed = _replayed(rng, hour_rows, args.orders, start_us)
        start_text, end_text = (datetime.fromtimestamp(us / 1e6, UTC).strftime("%Y-%m-%d %H:%M:%S")
                                for us in (start_us, end_us))
        write_deltalake(str(root / "orders"), replayed, mode="overwrite",
                        predicate=f"order_time >= '{start_text}' AND order_time < '{end_text}'")
        report["hour"] = {"from": start_text, "to": end_text, "orders_before": hour_rows.num_rows,
                          "orders_after": replayed.num_rows}

        _, report["restatement"] = _measured(meter, lambda: run_restatement(
            catalog, "orders", start_ms=start_us // 1000, end_ms=end_us // 1000))
        print(f"restatement: {report['restatement']}", flush=True)
        restated = {view: _region(catalog, view, start_us, end_us).localCheckpoint()
                    for view in VIEWS}
        _, report["full_refresh"] = _measured(
            meter, lambda: [DerivedTable(catalog, view).run(full_refresh=True) for view in VIEWS])
        print(f"full refresh: {report['full_refresh']}", flush=True)
        report["equal_in_region"] = {
            view: restated[view].exceptAll(refreshed).isEmpty()
            and refreshed.exceptAll(restated[view]).isEmpty()
            for view in VIEWS
            for refreshed in [_region(catalog, view, start_us, end_us)]
        }
        restate, refresh = report["restatement"], report["full_refresh"]
        report["ratios"] = {
            "seconds": round(restate["seconds"] / refresh["seconds"], 4),
            "lake_rows_read": round(restate["lake_rows_read"] / max(refresh["lake_rows_read"], 1),
                                    6),
            "rows_written": round(sum(restate["rows_written"].values())
                                  / max(sum(refresh["rows_written"].values()), 1), 6),
        }
        print(f"equal in the region: {report['equal_in_region']}; restatement / refresh: "
              f"{report['ratios']}", flush=True)
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"restatement-{args.orders}-{args.days}d.json"
    out.write_text(json.dumps(report, indent=2))
    print(f"report: {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
