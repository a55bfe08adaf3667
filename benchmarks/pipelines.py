"""Pipelines of derived tables: does a run that updates a few rows write in proportion to them?

Builds a lake with `--orders` orders (a CDC table keyed by order_id, the change data feed on)
and a few rate versions, declares `enriched` (orders LEFT JOIN rates FOR SYSTEM_TIME AS OF
order_time: a derived table keyed by order_id) and `per_hour` (a TUMBLE window over
`enriched`'s change feed: the second hop), runs both once over the history, then measures
three increments, each followed by a run of both views:

1. `append`: `--new-percent` new orders, after the history (today's append-only cost);
2. `recent updates`: `--update-percent` of the orders corrected, the most recent ones (the
   common case: an order is corrected soon after it was placed);
3. `uniform updates`: as many corrections spread uniformly over all orders (the worst case
   for copy-on-write: every data file holds a corrected order; a file where few rows change
   gets a deletion vector instead of being rewritten).

For each increment it reports the seconds of each hop, the output rows by kind, and what the
output commit of `enriched` rewrote, from its Delta log: files and bytes removed (rewritten),
files marked by deletion vectors (kept as they are) and added, as ratios of the table's
files and bytes before the run; and what Spark read and wrote (its status store). The
report is printed and written as JSON under `benchmarks/results/`.

    .venv/bin/python benchmarks/pipelines.py --orders 5000000
    .venv/bin/python benchmarks/pipelines.py --orders 1000000 --copy-on-write   # reference
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pyarrow as pa
from deltalake import DeltaTable, write_deltalake
from incremental import RESULTS, START_US, StageMeter, _ascending

from chronolake import Catalog, materialize_view
from chronolake.lake import upserts
from chronolake.lake.layout import output_path
from chronolake.location import Location
from chronolake.spark.session import local_spark_session

HOUR_US = 3_600_000_000
DDL = """
CREATE TABLE orders (
  order_id BIGINT, currency BIGINT, order_time TIMESTAMP(3), amount BIGINT,
  WATERMARK FOR order_time AS order_time - INTERVAL '5' SECOND,
  PRIMARY KEY (order_id) NOT ENFORCED
) WITH ('path' = 'orders', 'changelog' = 'cdf');
CREATE TABLE rates (
  currency BIGINT, rate BIGINT, currency_time TIMESTAMP(3),
  WATERMARK FOR currency_time AS currency_time - INTERVAL '5' SECOND,
  PRIMARY KEY (currency) NOT ENFORCED
) WITH ('path' = 'rates', 'changelog' = 'cdf');
CREATE VIEW enriched AS
SELECT o.order_id, o.currency, o.order_time, o.amount, r.rate, o.amount * r.rate AS value
FROM orders AS o LEFT JOIN rates FOR SYSTEM_TIME AS OF o.order_time AS r
ON o.currency = r.currency;
CREATE VIEW per_hour AS
SELECT window_start, window_end, currency, COUNT(*) AS orders, SUM(value) AS value
FROM TABLE(TUMBLE(TABLE enriched, DESCRIPTOR(order_time), INTERVAL '1' HOUR))
GROUP BY window_start, window_end, currency;
"""
CDF_ON = {"delta.enableChangeDataFeed": "true"}
KINDS = ("inserts_out", "update_befores_out", "update_afters_out", "deletes_out")


def _orders(rng: np.random.Generator, first_id: int, times_us: np.ndarray) -> pa.Table:
    rows = len(times_us)
    return pa.table({
        "order_id": np.arange(first_id, first_id + rows, dtype=np.int64),
        "currency": rng.integers(0, 20, rows, dtype=np.int64),
        "order_time": pa.array(times_us, type=pa.timestamp("us")),
        "amount": rng.integers(1, 100_000, rows, dtype=np.int64),
    })


def _rates(currency_times_us: list[int]) -> pa.Table:
    rows = [(c, 100 + i, t) for i, t in enumerate(currency_times_us) for c in range(20)]
    return pa.table({
        "currency": pa.array([r[0] for r in rows], pa.int64()),
        "rate": pa.array([r[1] for r in rows], pa.int64()),
        "currency_time": pa.array([r[2] for r in rows], pa.timestamp("us")),
    })


def _output_commit(path: Location, version: int | None) -> dict[str, float]:
    """Files and bytes the output commit rewrote (removed, not re-added with a deletion vector),
    marked (re-added with one) and added, from its Delta log."""
    if version is None:
        return {}
    log = path.path / "_delta_log" / f"{version:020d}.json"
    actions = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    marked = [a["add"] for a in actions if "deletionVector" in a.get("add", {})]
    kept = {a["path"] for a in marked}
    removed = [a["remove"] for a in actions if "remove" in a and a["remove"]["path"] not in kept]
    added = [a["add"] for a in actions if "add" in a and a["add"]["path"] not in kept]
    change = [a["cdc"] for a in actions if "cdc" in a]
    return {
        "files_removed": len(removed), "bytes_removed": sum(a.get("size", 0) for a in removed),
        "files_marked": len(marked),
        "deletion_vector_bytes": sum(a["deletionVector"]["sizeInBytes"] for a in marked),
        "files_added": len(added), "bytes_added": sum(a["size"] for a in added),
        "change_data_bytes": sum(a["size"] for a in change),
    }


def _table_size(path: Location) -> tuple[int, int]:
    actions = pa.table(DeltaTable(str(path)).get_add_actions(flatten=True))
    return actions.num_rows, int(pa.compute.sum(actions["size_bytes"]).as_py() or 0)


def _ratio(part: float, whole: float) -> float | None:
    return round(part / whole, 5) if whole else None


def _run_both(catalog: Catalog, meter: StageMeter, label: str) -> dict:
    out = output_path(catalog.root, "enriched")
    files_before, bytes_before = _table_size(out) if out.path.exists() else (0, 0)
    meter.start()
    started = time.perf_counter()
    enriched = materialize_view(catalog, "enriched")
    join_seconds = time.perf_counter() - started
    spark = meter.read()
    started = time.perf_counter()
    materialize_view(catalog, "per_hour")
    window_seconds = time.perf_counter() - started
    commit = _output_commit(out, enriched.output_version)
    kinds = {k: int(enriched.figures.get(k, 0)) for k in KINDS}
    ratios = {
        "files_rewritten": _ratio(commit.get("files_removed", 0), files_before),
        "bytes_rewritten": _ratio(commit.get("bytes_removed", 0), bytes_before),
        "bytes_written": _ratio(commit.get("bytes_added", 0), bytes_before),
    }
    print(
        f"{label:<18} join {join_seconds:>7.2f}s  window {window_seconds:>6.2f}s  kinds "
        f"{'/'.join(str(v) for v in kinds.values())}  files {commit.get('files_removed', 0)}/"
        f"{files_before} rewritten, {commit.get('files_marked', 0)} marked (deletion vectors "
        f"{commit.get('deletion_vector_bytes', 0):,} B), bytes {ratios['bytes_rewritten']} of "
        "the table rewritten, "
        f"{ratios['bytes_written']} written; spark read {spark['input_records']:,} wrote "
        f"{spark['output_records']:,}",
        flush=True,
    )
    return {"join_seconds": round(join_seconds, 3), "window_seconds": round(window_seconds, 3),
            "kinds": kinds, "commit": commit, "table_files_before": files_before,
            "table_bytes_before": bytes_before, "ratios": ratios, **spark}


def main() -> None:
    """Build the lake, run the chain once, then each increment; report."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--orders", type=int, default=1_000_000, help="history orders")
    parser.add_argument("--commits", type=int, default=20, help="commits of the history")
    parser.add_argument("--new-percent", type=float, default=0.1)
    parser.add_argument("--update-percent", type=float, default=1.0)
    parser.add_argument("--copy-on-write", action="store_true",
                        help="rewrite every touched file (no deletion vectors): the reference")
    args = parser.parse_args()
    if args.copy_on_write:
        upserts.REWRITE_BELOW_ROWS = sys.maxsize
    rng = np.random.default_rng(7)
    spark = local_spark_session("chronolake-pipelines-benchmark")
    meter = StageMeter(spark)
    report: dict = {"date": datetime.now(UTC).isoformat(timespec="seconds"),
                    "load_average": os.getloadavg(), "cpus": os.cpu_count(), "args": vars(args)}
    span = 48 * HOUR_US
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        times = _ascending(rng, args.orders, START_US, span)
        history = _orders(rng, 0, times)
        for piece in np.array_split(np.arange(history.num_rows), args.commits):
            write_deltalake(str(root / "orders"), history.take(pa.array(piece)), mode="append",
                            configuration=CDF_ON)
        write_deltalake(str(root / "rates"), _rates([START_US - HOUR_US, START_US + span // 2,
                                                     START_US + 2 * span]),
                        configuration=CDF_ON)
        catalog = Catalog(root, spark)
        catalog.declare(DDL)
        report["first"] = _run_both(catalog, meter, "first run")
        new = int(args.orders * args.new_percent / 100)
        later = _ascending(rng, new, START_US + span, HOUR_US)
        write_deltalake(str(root / "orders"), _orders(rng, args.orders, later), mode="append")
        report["append"] = _run_both(catalog, meter, "append")
        updated = int(args.orders * args.update_percent / 100)
        DeltaTable(str(root / "orders")).update(
            updates={"amount": "amount + 1"}, predicate=f"order_id >= {args.orders - updated}"
        )
        report["recent_updates"] = _run_both(catalog, meter, "recent updates")
        step = max(int(100 / args.update_percent), 1)
        DeltaTable(str(root / "orders")).update(
            updates={"amount": "amount + 1"}, predicate=f"order_id % {step} = 3"
        )
        report["uniform_updates"] = _run_both(catalog, meter, "uniform updates")
    RESULTS.mkdir(exist_ok=True)
    policy = "-copy-on-write" if args.copy_on_write else ""
    out = RESULTS / f"pipelines-{args.orders}{policy}.json"
    out.write_text(json.dumps(report, indent=2))
    print(f"report: {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
