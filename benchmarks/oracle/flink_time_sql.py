"""Differential check of chronolake's time SQL against real Apache Flink: CUMULATE, window
offsets, SESSION windows, window Top-N and deduplication, event-time interval joins.

Generates random small cases (`_time_cases.py`), runs each in chronolake (real Delta tables,
DDL through `Catalog`, `DerivedTable.run()` after each round of commits) and in Flink (one
JVM serving every job, `_flink_sql_side.py`), with Flink's source watermark moved exactly
where chronolake's runs move it, and compares run by run (an interval join's matches that
depend on how Flink's two join inputs interleave, or on when it cleans its state, are left
out and counted). See benchmarks/README.md, "Time SQL against Apache Flink".

    .venv/bin/python benchmarks/oracle/flink_time_sql.py --lakes 4 --seed 1
    .venv/bin/python benchmarks/oracle/flink_time_sql.py --families cumulate,session_keyed

Needs a separate virtualenv with PyPI's `apache-flink` 2.x and Java 17 (`--flink-python`,
default /tmp/flinkvenv/bin/python); never part of CI or of the project's dependencies.
Exits 1 on any mismatch, after printing each failing case minimized.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _cases import BASE_MS  # noqa: E402
from _time_cases import (  # noqa: E402
    FAMILIES,
    Lake,
    Shrink,
    generate,
    is_flush,
    lazy_cleanup,
    order_sensitive,
    released,
)
from _time_chronolake import Runs, ddl, run_lake  # noqa: E402

from chronolake.spark.session import local_spark_session  # noqa: E402

HERE = Path(__file__).resolve().parent
RESULTS = HERE.parent / "results" / "flink_time_sql.txt"
_TICK = "~tick"

Rows = Counter[tuple[object, ...]]


class Flink:
    """The Flink server subprocess: one JVM, one request per job."""

    def __init__(self, python: str, log: Path) -> None:
        self._log = log.open("w")
        self._process = subprocess.Popen(
            [python, str(HERE / "_flink_sql_side.py")], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=self._log, text=True)
        self.version = "?"
        self.seconds = 0.0

    def run(self, lake: Lake, n_rounds: int) -> list[list[object]] | str:
        """Flink's rows (row kind first) over the first `n_rounds` rounds (flush included
        when `n_rounds` covers it), or Flink's error message."""
        started = time.monotonic()
        assert self._process.stdin is not None and self._process.stdout is not None
        self._process.stdin.write(json.dumps(request(lake, n_rounds)) + "\n")
        self._process.stdin.flush()
        line = self._process.stdout.readline()
        self.seconds += time.monotonic() - started
        if not line:
            raise SystemExit(f"the Flink side died; see {self._log.name}")
        answer = json.loads(line)
        self.version = answer["flink"]
        return answer["error"] if "error" in answer else answer["rows"]

    def close(self) -> None:
        assert self._process.stdin is not None
        self._process.stdin.close()
        self._process.wait(timeout=60)
        self._log.close()


def request(lake: Lake, n_rounds: int) -> dict[str, object]:
    """The Flink job for a prefix of `lake`: rows in arrival order, each carrying the
    watermark in force when its run started, and a tick row after each round raising the
    watermark to the one chronolake's run ends with."""
    watermarks = lake.watermarks()
    rows: list[list[object]] = []
    before: int | None = None
    for arrived, after in list(zip(lake.all_rounds(), watermarks, strict=True))[:n_rounds]:
        in_force = None if before is None else BASE_MS + before
        rows += [[a.table, a.id, a.k, a.v, BASE_MS + a.t, in_force] for a in arrived]
        rows.append([_TICK, 0, "", 0, BASE_MS, None if after is None else BASE_MS + after])
        before = after
    views = [[name, f"SELECT id, k, v, ts FROM arrivals WHERE tbl = '{name}'"]
             for name in lake.family.tables]
    return {"rows": rows, "views": views, "query": lake.query()}


def flink_rows(lake: Lake, answer: list[list[object]]) -> list[dict[str, object]]:
    """Flink's changelog applied (the final rows), as dicts, times in ms after BASE."""
    table: Rows = Counter()
    for kind, *values in answer:
        row = tuple(value - BASE_MS if name in lake.family.times and value is not None
                    else value for name, value in zip(lake.family.columns, values, strict=True))
        table[row] += 1 if kind in ("+I", "+U") else -1
    return [dict(zip(lake.family.columns, row, strict=True))
            for row, n in table.items() for _ in range(n)]


@dataclass
class Outcome:
    """One lake compared: per run, Flink's rows and chronolake's, and what differs."""

    lake: Lake
    runs: Runs
    mismatches: list[str] = field(default_factory=list)
    flink_error: str | None = None
    compared: int = 0
    late_on_arrival: int = 0
    order_dependent: int = 0
    """Final rows left out (either system's): matches Flink decides by arrival order within
    a round (`order_sensitive`)."""
    lazy_cleanup: int = 0
    """Final rows left out (either system's), the rest: matches that depend on when Flink
    cleans an interval join's state (`lazy_cleanup`)."""


def _key(row: dict[str, object], lake: Lake) -> tuple[object, ...]:
    return tuple(row[c] for c in lake.family.columns)


def compare(lake: Lake, runs: Runs, flink: Flink) -> Outcome:
    outcome = Outcome(lake, runs)
    if runs.error is not None:
        outcome.mismatches.append(f"chronolake failed: {runs.error}")
        return outcome
    watermarks = lake.watermarks()
    n_runs = len(lake.all_rounds())
    left_out = [("order_dependent", order_sensitive(lake)),
                ("lazy_cleanup", lazy_cleanup(lake) - order_sensitive(lake))]
    for index in range(n_runs):
        answer = flink.run(lake, index + 1)
        if isinstance(answer, str):
            outcome.flink_error = answer
            return outcome
        final = index == n_runs - 1
        theirs = Counter(_key(r, lake) for r in flink_rows(lake, answer)
                         if not is_flush(r, lake.family)
                         and (final or released(r, lake.family, watermarks[index])))
        ours = Counter(_key(r, lake) for r in runs.outputs[index]
                       if not is_flush(r, lake.family)
                       and (final or not lake.family.join or released(r, lake.family, None)))
        for reason, ids in left_out:
            dropped: Rows = Counter()
            for rows in (theirs, ours):
                for row in [r for r in rows if ids & set(r)]:
                    dropped[row] = max(dropped[row], rows.pop(row))
            if final:
                setattr(outcome, reason, getattr(outcome, reason) + sum(dropped.values()))
        outcome.compared += sum(theirs.values()) if final else 0
        if theirs != ours:
            what = "after the flush" if final else f"after run {index + 1}"
            outcome.mismatches.append(
                f"{what} (watermark {watermarks[index]} ms): Flink only "
                f"{_rows(theirs - ours, lake)}; chronolake only {_rows(ours - theirs, lake)}")
        if runs.watermarks[index] is not None and runs.watermarks[index] != watermarks[index] \
                and not lake.family.join:
            outcome.mismatches.append(
                f"run {index + 1}: chronolake's watermark {runs.watermarks[index]} ms, "
                f"expected {watermarks[index]} ms")
    before: int | None = None
    for arrived, after in zip(lake.all_rounds(), watermarks, strict=True):
        outcome.late_on_arrival += sum(1 for a in arrived if before is not None and a.t <= before)
        before = after
    return outcome


def _rows(rows: Rows, lake: Lake) -> str:
    if not rows:
        return "-"
    shown = sorted(rows.elements(), key=repr)
    return " ".join("(" + ", ".join(f"{c}={v}" for c, v in zip(lake.family.columns, r,
                                                               strict=True)) + ")"
                    for r in shown)


def check(lake: Lake, spark: object, flink: Flink) -> Outcome:
    with tempfile.TemporaryDirectory(prefix="flink-time-sql-") as directory:
        runs = run_lake(lake, Path(directory), spark)
    return compare(lake, runs, flink)


def minimize(outcome: Outcome, spark: object, flink: Flink, *, budget_s: float) -> Outcome:
    """The smallest lake (greedy: the mismatching keys only, a round less, a row less) whose
    check still fails, within `budget_s`."""
    deadline = time.monotonic() + budget_s
    keys = {str(v) for m in outcome.mismatches for v in _mentioned_keys(m)}
    progress = True
    while progress and time.monotonic() < deadline:
        progress = False
        for candidate in Shrink(outcome.lake, keys).candidates():
            if time.monotonic() > deadline:
                break
            smaller = check(candidate, spark, flink)
            if smaller.mismatches and smaller.flink_error is None:
                outcome, progress, keys = smaller, True, set()
                break
    return outcome


def _mentioned_keys(mismatch: str) -> list[str]:
    return [part.split("=")[1].rstrip(",)") for part in mismatch.split() if part.startswith("(k=")
            or part.startswith("k=")]


def describe(outcome: Outcome) -> list[str]:
    lake = outcome.lake
    lines = [f"{lake.name}: delays {lake.delays} s; rounds then a run each, times in ms "
             "after the start:"]
    lines += ["  " + line for line in ddl(lake).splitlines()]
    for index, arrived in enumerate(lake.rounds):
        lines.append(f"  round {index + 1}: " + " ".join(
            f"{a.table}(id={a.id} k={a.k} v={a.v} t={a.t})" for a in arrived))
    lines.append("  then the flush round (one row per table at t=10000000)")
    lines += [f"  MISMATCH {m}" for m in outcome.mismatches]
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--families", default=",".join(FAMILIES),
                        help=f"comma-separated, of: {', '.join(FAMILIES)}")
    parser.add_argument("--lakes", type=int, default=4, help="random cases per family")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--flink-python", default="/tmp/flinkvenv/bin/python")
    parser.add_argument("--minimize-s", type=float, default=300,
                        help="time to shrink each family's first failing case")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)

    started = time.monotonic()
    spark = local_spark_session("flink-time-sql")
    flink = Flink(args.flink_python, Path(tempfile.gettempdir()) / "flink_time_sql.log")
    lines: list[str] = []
    failed = False
    summary: list[str] = []
    try:
        for name in args.families.split(","):
            family = FAMILIES[name]
            outcomes = [check(lake, spark, flink) for lake in generate(family, args.seed,
                                                                        args.lakes)]
            bad = [o for o in outcomes if o.mismatches]
            refused = [o for o in outcomes if o.flink_error]
            summary.append(
                f"{name}: {len(outcomes)} cases, {sum(len(o.lake.all_rounds()) for o in outcomes)}"
                f" runs, {sum(o.compared for o in outcomes)} final rows compared, "
                f"{sum(o.late_on_arrival for o in outcomes)} rows late on arrival, "
                f"{sum(o.runs.late[-1] for o in outcomes if o.runs.late)} in chronolake's "
                f"side table; mismatching cases: {len(bad)}"
                + (f"; final rows left out: order-dependent "
                   f"{sum(o.order_dependent for o in outcomes)}, Flink's lazy cleanup "
                   f"{sum(o.lazy_cleanup for o in outcomes)}" if family.join else "")
                + (f"; Flink refused {len(refused)}: {refused[0].flink_error[:200]}"
                   if refused else ""))
            print(summary[-1], flush=True)
            if bad:
                failed = True
                errors = [o for o in bad if o.runs.error]
                first = (errors or bad)[0]
                if not first.runs.error:
                    first = minimize(first, spark, flink, budget_s=args.minimize_s)
                lines += ["", *describe(first)]
                print("\n".join(describe(first)), flush=True)
    finally:
        flink.close()
    head = [f"Time SQL differential check: chronolake vs Apache Flink {flink.version} "
            f"({datetime.now(UTC):%Y-%m-%d %H:%M} UTC), seed {args.seed}, {args.lakes} cases "
            f"per family; {time.monotonic() - started:.0f} s (Flink {flink.seconds:.0f} s)"]
    text = "\n".join(head + summary + lines) + "\n"
    print(text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
