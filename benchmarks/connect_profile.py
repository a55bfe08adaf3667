"""Where a small-change run's time goes over Spark Connect: round trips by kind and call site.

Builds the demo lake, starts a local Connect server (as `chronolake dev` does), runs the view
once, then `--feeds` times: one `demo_feed`, one run. Every request the Connect client sends
during a run (plan analysis, execution, config) is timed and attributed to the chronolake
line that sent it. Prints each run's totals and the call sites of the last run, slowest
first. The Dagster run around it (process start, ops, checks) is not included: see
`ui_runs.py` for the whole launch.

    .venv/bin/python benchmarks/connect_profile.py --view orders_enriched --feeds 3
"""

from __future__ import annotations

import argparse
import tempfile
import time
import traceback
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql.connect.client.core import SparkConnectClient

from chronolake import Catalog
from chronolake.demo.lake import build_demo_lake, feed_demo_lake
from chronolake.runtime.derived import DerivedTable
from chronolake.spark.connect_server import running_connect_server

ROOT = Path(__file__).resolve().parent.parent
REQUESTS = ("_analyze", "_execute_and_fetch", "config")
"""The client's methods that send a request: plan analysis (schemas), execution, config."""


class RequestLog:
    """Counts and times the Connect client's requests while `recording`, by kind and site."""

    def __init__(self) -> None:
        self.recording = False
        self.calls: Counter[str] = Counter()
        self.seconds: Counter[str] = Counter()

    def clear(self) -> None:
        self.calls.clear()
        self.seconds.clear()

    def attach(self) -> None:
        """Time every request method of the client class (the requests still go out)."""
        for name in REQUESTS:
            setattr(SparkConnectClient, name, self._timed(name, getattr(SparkConnectClient, name)))

    def _timed(self, kind: str, send):  # noqa: ANN001, ANN202 - the client's own signatures
        log = self

        def timed(client, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
            start = time.perf_counter()
            try:
                return send(client, *args, **kwargs)
            finally:
                if log.recording:
                    key = f"{kind} {_call_site()}"
                    log.calls[key] += 1
                    log.seconds[key] += time.perf_counter() - start

        return timed

    def by_kind(self) -> dict[str, tuple[int, float]]:
        totals: dict[str, tuple[int, float]] = {}
        for key, calls in self.calls.items():
            kind = key.split(" ", 1)[0]
            count, seconds = totals.get(kind, (0, 0.0))
            totals[kind] = (count + calls, seconds + self.seconds[key])
        return totals


HELPERS = frozenset({"reused"})
"""Shared helpers whose requests are named by their caller's line instead."""


def _call_site() -> str:
    """The innermost chronolake line on the stack (the code that sent the request), past
    the shared `HELPERS`."""
    for frame in reversed(traceback.extract_stack()[:-3]):
        if "/chronolake/" in frame.filename and frame.name not in HELPERS:
            return f"{frame.filename.split('/chronolake/')[1]}:{frame.lineno} {frame.name}"
    return "(outside chronolake)"


def main() -> None:
    """Run the view over `--feeds` small changes on a warm Connect server; print the requests."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--view", default="orders_enriched")
    parser.add_argument("--feeds", type=int, default=3)
    args = parser.parse_args()
    log = RequestLog()
    log.attach()
    with (
        tempfile.TemporaryDirectory(prefix="chronolake-connect-") as folder,
        running_connect_server(Path(folder) / "server.log") as url,
    ):
        lake = Path(folder) / "lake"
        build_demo_lake(lake)
        Catalog(lake).declare((ROOT / "assets" / "platform.sql").read_text())
        spark = SparkSession.builder.remote(url).getOrCreate()
        DerivedTable(Catalog(lake, spark), args.view).run()  # the first run, not measured
        feeds_from = datetime.now(tz=UTC).replace(tzinfo=None, microsecond=0)
        for step in range(args.feeds):
            feed_demo_lake(lake, seed=step, now=feeds_from + timedelta(minutes=step + 1))
            log.clear()
            log.recording = True
            start = time.perf_counter()
            result = DerivedTable(Catalog(lake, spark), args.view).run()
            seconds = time.perf_counter() - start
            log.recording = False
            kinds = ", ".join(
                f"{kind} {count}x {total:.2f} s" for kind, (count, total) in log.by_kind().items()
            )
            print(
                f"run after feed {step + 1}: {seconds:.2f} s, "
                f"{result.figures['rows_out']} rows out; {kinds}"
            )
    print("\nthe last run's requests, slowest sites first:")
    for key, total in log.seconds.most_common():
        print(f"{total:7.2f} s {log.calls[key]:4d}x  {key}")


if __name__ == "__main__":
    main()
