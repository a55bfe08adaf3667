"""Helpers for the exactly-once and bad-input tests: a tiny reference lake, runs in a
subprocess with a fault armed, and row-for-row table comparison.

The tiny lake holds the reference platform's `orders` (append) and `rates`
(change data feed) tables with a few rows each, and registers
`assets/platform.sql`; every build writes the same rows (seeded), so a lake
built twice gives the same derived rows (commit timestamps differ, and the
views do not select them).
"""

from __future__ import annotations

import os
import pickle
import random
import subprocess
import sys
import textwrap
from dataclasses import dataclass, field
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from pyspark.sql import DataFrame, SparkSession

from chronolake import Catalog
from chronolake.demo.lake import CDF_ON, DEMO_START, RATES_SCHEMA, append_orders, change_rate
from chronolake.faults import FAULT_ENV
from chronolake.lake import DeltaRsBackend
from chronolake.location import LocationLike, as_location

REPO = Path(__file__).resolve().parents[1]
PLATFORM_SQL = REPO / "assets" / "platform.sql"
ORDERS_PER_BATCH = 40
SIGKILL_RETURNCODE = -9
SUBPROCESS_TIMEOUT_S = 600


@dataclass
class ChaosFigures:
    """What the chaos test did (`tests/test_chaos.py`): its rounds; the runs of the attacked
    lake's tables (every one started in a subprocess, and every fault-free one that
    committed); how many SIGKILL ended (at a named fault point, or a random delay after the
    run began writing); its rounds with two runs of one table started together, and the runs
    they refused; the rows it compared with a lake where nothing failed; its wall time."""

    seed: int | None = None
    rounds: int = 0
    runs: int = 0
    subprocess_runs: int = 0
    fault_point_kills: int = 0
    timed_kills: int = 0
    concurrent_rounds: int = 0
    refused_runs: int = 0
    rows_compared: int = 0
    seconds: float = 0.0

    @property
    def kills(self) -> int:
        return self.fault_point_kills + self.timed_kills

    def line(self) -> str:
        if self.seed is None:
            return "chaos: not run"
        return (
            f"chaos (seed {self.seed}): {self.rounds} rounds, {self.runs} runs "
            f"({self.subprocess_runs} in subprocesses), {self.kills} killed with SIGKILL "
            f"({self.fault_point_kills} at fault points, {self.timed_kills} after a random "
            f"delay), {self.concurrent_rounds} concurrent rounds ({self.refused_runs} runs "
            f"refused), {self.rows_compared} rows compared, {self.seconds:.0f} s"
        )


@dataclass
class Exercised:
    """What the reliability tests exercised, for the summary at the end of the run."""

    fault_points: set[str] = field(default_factory=set)
    crash_restarts: int = 0
    bad_inputs: set[str] = field(default_factory=set)
    concurrent_runs: int = 0
    chaos: ChaosFigures = field(default_factory=ChaosFigures)

    def lines(self) -> list[str]:
        faults = ", ".join(sorted(self.fault_points))
        bad = "; ".join(sorted(self.bad_inputs))
        return [
            f"fault points killed with SIGKILL: {len(self.fault_points)} ({faults})",
            f"crash-restart cycles: {self.crash_restarts}",
            f"bad inputs: {len(self.bad_inputs)} ({bad})",
            f"concurrent-run checks: {self.concurrent_runs}",
            self.chaos.line(),
        ]


    def merge(self, other: Exercised) -> None:
        """Add what another pytest process (an xdist worker) exercised."""
        self.fault_points |= other.fault_points
        self.crash_restarts += other.crash_restarts
        self.bad_inputs |= other.bad_inputs
        self.concurrent_runs += other.concurrent_runs
        if other.chaos.seed is not None:
            self.chaos = other.chaos


EXERCISED = Exercised()
_WORKER_KEY = "chronolake-exercised"


class _ReliabilitySummary:
    """A pytest plugin that prints `EXERCISED` at the end of the run: with xdist, each worker
    hands its own to the controller, which prints them merged."""

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        output = getattr(session.config, "workeroutput", None)
        if output is not None:  # an xdist worker: only data crosses to the controller
            output[_WORKER_KEY] = pickle.dumps(EXERCISED).hex()

    def pytest_testnodedown(self, node: Any, error: object) -> None:
        """xdist's hook, in the controller, as a worker ends."""
        handed = getattr(node, "workeroutput", {}).get(_WORKER_KEY)
        if handed is not None:
            EXERCISED.merge(pickle.loads(bytes.fromhex(handed)))

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        terminalreporter.section("reliability: what the tests exercised")
        for line in EXERCISED.lines():
            terminalreporter.write_line(line)


def register_summary(config: pytest.Config) -> None:
    """Print what was exercised at the end of the session (conftest registers it)."""
    config.pluginmanager.register(_ReliabilitySummary(), "chronolake-reliability")


def build_tiny_lake(
    root: Path, spark: SparkSession | None = None, *, rates_cdf: bool = True
) -> Catalog:
    """Batch 0 of `orders` and `rates` (with an update), the reference DDL registered;
    `rates_cdf=False` writes `rates` without the change data feed."""
    root.mkdir(parents=True, exist_ok=True)
    t = DEMO_START
    rates = pa.table(
        {
            "currency": ["USD", "EUR", "JPY"],
            "rate": pa.array([Decimal("1.0"), Decimal("1.08"), Decimal("0.0067")],
                             pa.decimal128(38, 10)),
            "currency_time": pa.array([t, t, t], pa.timestamp("us")),
        },
        schema=RATES_SCHEMA,
    )
    write_deltalake(root / "rates", rates, configuration=CDF_ON if rates_cdf else None)
    change_rate(DeltaTable(root / "rates"), "EUR", "1.10", t + timedelta(minutes=5))
    add_batch(root, 0)
    catalog = Catalog(root, spark)
    list(catalog.run_script(PLATFORM_SQL.read_text()))
    return catalog


def add_batch(root: LocationLike, batch: int) -> None:
    """One more commit of orders 15 minutes later than the last, and a rate change after
    them (so the build watermark lets the batch's orders through)."""
    start = DEMO_START + timedelta(minutes=15 * batch)
    append_orders(as_location(root) / "orders", rng=random.Random(batch),
                  first_id=batch * ORDERS_PER_BATCH, count=ORDERS_PER_BATCH, start=start)
    rate = str(Decimal("1.10") + Decimal(batch + 1) / 100)
    rates = DeltaTable(str(as_location(root) / "rates"))
    change_rate(rates, "EUR", rate, start + timedelta(minutes=16))


def start_run(
    lake: LocationLike, name: str, *, fault: str | None = None, full_refresh: bool = False,
    staged: bool = False,
) -> subprocess.Popen[str]:
    """Start a run of derived table `name` in a fresh Python process (its own JVM), with
    `fault` armed; it prints the run's result as JSON. `staged=True` runs it as the Dagster
    job does (prepare, read, assign and operate without the run lock; commit under it)."""
    if staged:
        run = f"""
            table = DerivedTable(Catalog({str(lake)!r}), {name!r})
            plan = table.prepare(full_refresh={full_refresh})
            if plan is None:
                result = table.up_to_date()
            else:
                reads = table.assign(table.read(plan))
                result = table.commit(plan, reads, table.operate(plan, reads))
            """
    else:
        run = f"""
            table = DerivedTable(Catalog({str(lake)!r}), {name!r})
            result = table.run(full_refresh={full_refresh})
            """
    code = textwrap.dedent(
        """
        from chronolake import Catalog
        from chronolake.runtime.derived import DerivedTable
        """
    ) + textwrap.dedent(run) + "print(result.model_dump_json())\n"
    env = {key: value for key, value in os.environ.items() if key != FAULT_ENV}
    if fault is not None:
        env[FAULT_ENV] = fault
    return subprocess.Popen(
        [sys.executable, "-c", code], env=env, cwd=REPO, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )


def run_in_subprocess(
    lake: LocationLike, name: str, *, fault: str | None = None, full_refresh: bool = False
) -> subprocess.CompletedProcess[str]:
    """Run derived table `name` in a fresh Python process (its own JVM), with `fault` armed."""
    process = start_run(lake, name, fault=fault, full_refresh=full_refresh)
    return finish(process)


def finish(process: subprocess.Popen[str]) -> subprocess.CompletedProcess[str]:
    """Wait for a run started by `start_run` (and for its JVM, which holds its output pipes
    until it exits too)."""
    try:
        out, err = process.communicate(timeout=SUBPROCESS_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        out, err = process.communicate()
        raise
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


def delta_rows(spark: SparkSession, path: LocationLike) -> DataFrame:
    """The latest snapshot of the Delta table at `path`."""
    return DeltaRsBackend(spark).snapshot(path)


def same_rows(left: DataFrame, right: DataFrame) -> bool:
    """Equal as multisets of rows: nothing missing, nothing extra, nothing twice."""
    if sorted(left.columns) != sorted(right.columns):
        return False
    right = right.select(*left.columns)
    return left.exceptAll(right).isEmpty() and right.exceptAll(left).isEmpty()


def files_under(path: Path) -> set[str]:
    """Every file below `path` (relative names), to prove a failed run wrote nothing."""
    if not path.exists():
        return set()
    return {str(p.relative_to(path)) for p in path.rglob("*") if p.is_file()}
