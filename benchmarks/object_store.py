"""The reference platform on the local disk and on an S3 server, counted in requests.

For each lake backend (`--backends`, default delta-rs,delta-spark), the reference platform
(`assets/platform.sql` over the demo lake) goes through the phases a user drives: the demo's
sources written (`build_demo_lake`, delta-rs), the platform declared (`chronolake sql -f`:
`Catalog.run_script`), the first run of every view (`chronolake run`: `materialize_view` in
dependency order, one catalog), new data (`chronolake feed`: `feed_demo_lake`, with the
clock of `tests/test_spark_on_s3.py`) and an incremental run of every view; once on a folder
of the local disk and once on `s3://lake/<backend>` in moto's S3 server on loopback. All in
one process and one Spark session (Delta's jars and S3A loaded, so both backends and both
places work in it). On the bucket, every phase's requests are counted from moto's own
request log by kind (GET, LIST, PUT, HEAD, DELETE, POST: `_moto_requests`); on both, its
seconds. The report is printed and written as JSON under `benchmarks/results/`.

    .venv/bin/python benchmarks/object_store.py
    .venv/bin/python benchmarks/object_store.py --backends delta-rs --places s3
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from pyspark.sql import SparkSession

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _moto_requests import BUCKET, KINDS, RequestLog, counted_moto_s3  # noqa: E402
from incremental import backend_list  # noqa: E402

from chronolake import Catalog, materialize_view  # noqa: E402
from chronolake.demo.lake import DEMO_START, ORDER_COMMITS, build_demo_lake, feed_demo_lake  # noqa: E402
from chronolake.spark.session import local_spark_session  # noqa: E402
from chronolake.spark.stack import BACKEND_ENV, BackendChoice  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).resolve().parent / "results"
PLATFORM_SQL = REPO / "assets" / "platform.sql"
VIEWS = ("latest_rates", "orders_enriched", "orders_enriched_latest", "orders_per_currency",
         "revenue_per_currency")
"""The reference platform's views in dependency order (`revenue_per_currency` reads
`orders_enriched`)."""
FED_AT = DEMO_START + timedelta(minutes=15 * ORDER_COMMITS + 10)
"""The feed's clock, as in `tests/test_spark_on_s3.py`: the same new orders on every lake."""
PLACES = ("local", "s3")


def _platform_pass(
    root: str, backend: BackendChoice, requests: RequestLog | None, spark: SparkSession
) -> dict[str, dict]:
    """Every phase on the lake at `root` through `backend`: seconds, and requests when
    `requests` counts the server it lives on (a run's phase also per view; its seconds are
    the views' sum, without the pauses the counting takes)."""
    phases: dict[str, dict] = {}

    def phase(name: str, work: Callable[[], object]) -> None:
        if requests:
            requests.take()  # whatever came between phases is nobody's
        started = time.perf_counter()
        detail = work()
        seconds = round(time.perf_counter() - started, 2)
        phases[name] = {"seconds": seconds, **({"requests": requests.take()} if requests else {})}
        if isinstance(detail, dict):  # a run: the views' sums
            phases[name]["views"] = detail
            seconds = phases[name]["seconds"] = round(
                sum(view["seconds"] for view in detail.values()), 2)
            if requests:
                counts = [phases[name]["requests"], *(v["requests"] for v in detail.values())]
                targets = sum((Counter(c["by_target"]) for c in counts), Counter())
                phases[name]["requests"] = {k: sum(c[k] for c in counts) for k in counts[0]
                                            if k != "by_target"}
                phases[name]["requests"]["by_target"] = dict(targets.most_common(25))
        counted = phases[name].get("requests", {})
        print(f"  {name:<18}{seconds:>8.2f} s  "
              + "  ".join(f"{kind} {counted[kind]}" for kind in (*KINDS, "total") if counted),
              flush=True)

    def run_every_view() -> dict[str, dict]:
        """As `chronolake run` does: one catalog (its reading counts with the first view)."""
        views = {}
        started = time.perf_counter()
        catalog = Catalog(root, spark, backend=backend)
        for view in VIEWS:
            result = materialize_view(catalog, view)
            views[view] = {"seconds": round(time.perf_counter() - started, 2),
                           "status": str(result.status),
                           **({"requests": requests.take()} if requests else {})}
            started = time.perf_counter()
        return views

    def declare() -> None:
        catalog = Catalog(root, spark, backend=backend)
        list(catalog.run_script(PLATFORM_SQL.read_text()))

    phase("build (sources)", lambda: build_demo_lake(root) and None)
    phase("declare", declare)
    phase("first run", run_every_view)
    phase("feed", lambda: feed_demo_lake(root, seed=1, now=FED_AT) and None)
    phase("incremental run", run_every_view)
    return phases


def main() -> None:
    """Start moto's S3 server and one Spark session; pass over the platform per backend and
    place; report."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backends", type=backend_list, default=["delta-rs", "delta-spark"],
                        help="comma-separated lake backends, each passed in turn")
    parser.add_argument("--places", default=",".join(PLACES),
                        help="comma-separated: local (a folder), s3 (moto's S3 server)")
    parser.add_argument("--warmup", action="store_true",
                        help="first pass once per backend on a local folder, unreported (JIT "
                        "and first-use costs out of the measured seconds)")
    args = parser.parse_args()
    places = [place for place in args.places.split(",") if place]
    report: dict = {"benchmark": "object_store", "cpus": os.cpu_count(), "passes": {}}
    with tempfile.TemporaryDirectory(prefix="chronolake-object-store-") as folder, \
            counted_moto_s3(Path(folder)) as requests:
        spark = local_spark_session("chronolake-bench-object-store",
                                    lake=f"s3://{BUCKET}/session", backend="delta-spark")
        if args.warmup:
            for backend in args.backends:
                print(f"warm-up on {backend} (local, unreported)", flush=True)
                os.environ[BACKEND_ENV] = backend
                _platform_pass(str(Path(folder) / f"warmup-{backend}"), backend, None, spark)
        for backend in args.backends:
            os.environ[BACKEND_ENV] = backend  # for any reader not handed the catalog's
            for place in places:
                root = (f"s3://{BUCKET}/{backend}" if place == "s3"
                        else str(Path(folder) / f"lake-{backend}"))
                print(f"{backend} on {root}", flush=True)
                report["passes"][f"{backend} {place}"] = {
                    "backend": backend, "place": place, "root": root,
                    "phases": _platform_pass(root, backend, requests if place == "s3" else None,
                                             spark),
                }
        report["post_requests"] = dict(requests.details)
        RESULTS.mkdir(exist_ok=True)
        kept = RESULTS / f"object_store-moto-{datetime.now(UTC):%Y%m%dT%H%M%SZ}.log"
        kept.write_bytes(requests.path.read_bytes())  # every request, for a closer look
        report["moto_log"] = str(kept)
    report["load_average"] = os.getloadavg()
    _print(report)
    RESULTS.mkdir(exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    path = RESULTS / f"object_store-{stamp}.json"
    path.write_text(json.dumps(report, indent=2))
    print(f"written {path}  (load average {report['load_average']})")


def _print(report: dict) -> None:
    print(f"\n{'pass':<22}{'phase':<18}{'seconds':>9}  " + "".join(f"{k:>8}" for k in KINDS)
          + f"{'total':>8}")
    for name, run in report["passes"].items():
        for phase, figures in run["phases"].items():
            counted = figures.get("requests")
            cells = "".join(f"{counted[k]:>8}" for k in (*KINDS, "total")) if counted else ""
            print(f"{name:<22}{phase:<18}{figures['seconds']:>9.2f}  {cells}")
    if report.get("post_requests"):
        print(f"POST requests: {report['post_requests']}")


if __name__ == "__main__":
    main()
