"""Differential check of chronolake's event-time temporal join against real Apache Flink.

Generates random cases (probe rows; a build changelog with +I/-U/+U/-D, updates, deletes,
duplicate timestamps, out-of-order and late arrival; inner and LEFT joins, some with a
further ON condition), runs each in chronolake (real Delta tables, DDL through `Catalog`,
`DerivedTable.run()` after each round of commits) and in Flink (PyFlink, one JVM for all
cases, see `_flink_side.py`), and compares. See benchmarks/README.md, "Differential check
against Apache Flink", for what is and is not checked.

    .venv/bin/python benchmarks/oracle/flink_temporal_join.py --cases 200 --seed 1

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
from _cases import (  # noqa: E402
    CONDITION,
    Case,
    Event,
    Lake,
    Probe,
    epoch_ms,
    flink_rule,
    generate,
    smaller,
)
from _chronolake_side import LakeRuns, query, run_lake  # noqa: E402

from chronolake.spark.session import local_spark_session  # noqa: E402

HERE = Path(__file__).resolve().parent
RESULTS = HERE.parent / "results" / "flink_oracle.txt"


@dataclass
class Mismatch:
    lake: str
    case: int
    check: str
    detail: str


@dataclass
class Report:
    lakes: list[Lake]
    runs: dict[str, LakeRuns]
    mismatches: list[Mismatch] = field(default_factory=list)
    counts: Counter[str] = field(default_factory=Counter)


# -- Flink ------------------------------------------------------------------------------------


def _flink_jobs(lakes: Sequence[Lake], runs: dict[str, LakeRuns]
                ) -> tuple[list[dict], dict[tuple[str, int], int]]:
    """One Flink job per (join type, condition); each (lake, run) prefix is one `cid`."""
    jobs: dict[tuple[bool, bool], dict] = {}
    cids: dict[tuple[str, int], int] = {}
    for lake in lakes:
        lake_runs = runs[lake.name]
        if lake_runs.error is not None:
            continue
        key = (lake.config.left, lake.config.condition)
        job = jobs.setdefault(key, {
            "name": f"{'left' if key[0] else 'inner'}{'_cond' if key[1] else ''}",
            "left": key[0], "condition": CONDITION if key[1] else None,
            "probe": [], "build": []})
        for index, (probe, build) in enumerate(zip(lake_runs.probe, lake_runs.build,
                                                   strict=True)):
            cid = cids[(lake.name, index)] = len(cids)
            job["probe"] += [[cid, p.id, p.key, epoch_ms(p.t)] for p in probe]
            job["build"] += [[cid, e.key, e.value, epoch_ms(e.t), e.kind] for e in build]
    return list(jobs.values()), cids


def run_flink(jobs: list[dict], flink_python: str) -> tuple[str, dict[str, list[list]]]:
    """All jobs in one Flink subprocess (one JVM); returns Flink's version and rows per job."""
    result = subprocess.run(
        [flink_python, str(HERE / "_flink_side.py")], input=json.dumps({"jobs": jobs}),
        capture_output=True, text=True, timeout=1800, check=False,
    )
    if result.returncode != 0:
        raise SystemExit(f"the Flink side failed (exit {result.returncode}):\n"
                         f"{result.stderr[-4000:]}")
    answer = json.loads(result.stdout)
    return answer["flink"], answer["results"]


def _flink_rows(jobs: list[dict], results: dict[str, list[list]]
                ) -> dict[int, dict[int, int | None]]:
    """Flink's rows per cid: probe id -> value (None: LEFT's null row)."""
    rows: dict[int, dict[int, int | None]] = {}
    for job in jobs:
        for cid, id_, value in results[job["name"]]:
            rows.setdefault(cid, {})[id_] = value
    return rows


# -- what chronolake should have emitted --------------------------------------------------------


def watermarks(lake: Lake, runs: LakeRuns) -> list[int | None]:
    """The join's watermark (seconds) after each run by chronolake's rule (`docs/design.md`,
    A derived table's output watermark), not Flink's: a run is one tick; each side's
    watermark is max(time) - delay over every row it has read, -U and -D included; the join's
    is the min of both, never decreasing, and does not move while a side has read nothing."""
    config = lake.config
    watermark: int | None = None
    out = []
    for probe, build in zip(runs.probe, runs.build, strict=True):
        if probe and build:
            combined = min(max(p.t for p in probe) - config.probe_delay,
                           max(e.t for e in build) - config.build_delay)
            watermark = combined if watermark is None else max(watermark, combined)
        out.append(watermark)
    return out


def released(lake: Lake, runs: LakeRuns) -> list[set[int]]:
    """Probe ids the join's watermark has reached after each run."""
    return [{p.id for p in probe if watermark is not None and p.t <= watermark}
            for probe, watermark in zip(runs.probe, watermarks(lake, runs), strict=True)]


def _case_of(lake: Lake) -> dict[int, int]:
    return {p.id: case.number for case in lake.cases for r in case.rounds for p in r.probe}


def compare(report: Report, cids: dict[tuple[str, int], int],
            flink: dict[int, dict[int, int | None]]) -> None:
    """Every check, per lake and run; mismatches go to `report.mismatches` by case."""
    for lake in report.lakes:
        runs = report.runs[lake.name]
        case_of = _case_of(lake)
        if runs.error is not None:
            report.mismatches.append(Mismatch(lake.name, -1, "error", runs.error))
            continue
        if runs.duplicates:
            for id_ in runs.duplicates:
                report.mismatches.append(Mismatch(lake.name, case_of[id_], "emitted twice",
                                                  f"probe id {id_}"))
        for index, (ours, theirs) in enumerate(zip(watermarks(lake, runs), runs.watermarks,
                                                   strict=True)):
            if ours is not None and theirs is not None and epoch_ms(ours) != theirs:
                report.mismatches.append(Mismatch(
                    lake.name, -1, f"run {index + 1} watermark",
                    f"chronolake {theirs} ms, expected {epoch_ms(ours)} ms"))
        before: set[int] = set()
        for index, reached in enumerate(released(lake, runs)):
            oracle = flink.get(cids[(lake.name, index)], {})
            probe = {p.id: p for p in runs.probe[index]}
            _check_rule_reading(report, lake, runs.build[index], probe, oracle, case_of)
            new = reached - before
            expected = {i: oracle[i] for i in new if i in oracle}
            got = runs.emitted[index]
            report.counts["rows compared"] += len(expected)
            report.counts["late probe rows compared"] += sum(
                1 for i in expected if _late_on_arrival(probe[i], runs, lake, index))
            for i in expected:
                report.counts.update(_decided_by(runs.build[index], probe[i],
                                                 condition=lake.config.condition))
            final = flink.get(cids[(lake.name, len(runs.probe) - 1)], {})
            report.counts["compared rows a later build event would change"] += sum(
                1 for i in expected if final.get(i) != expected[i])
            if index > 0:
                previous = flink.get(cids[(lake.name, index - 1)], {})
                report.counts["pending rows changed by build rows of their run"] += sum(
                    1 for i in expected if i in previous and previous[i] != expected[i])
            for id_ in sorted(set(expected) | set(got)):
                if expected.get(id_, "absent") != got.get(id_, "absent"):
                    report.mismatches.append(Mismatch(
                        lake.name, case_of[id_], f"run {index + 1}",
                        f"probe id {id_}: chronolake {got.get(id_, 'not emitted')}, Flink "
                        f"{expected.get(id_, 'no row') if id_ in new else 'not released yet'}"))
            before = reached
        last = flink.get(cids[(lake.name, len(runs.probe) - 1)], {})
        report.counts["bounded rows compared"] += len(last)
        for id_ in sorted(set(last) | set(runs.bounded)):
            if last.get(id_, "absent") != runs.bounded.get(id_, "absent"):
                report.mismatches.append(Mismatch(
                    lake.name, case_of[id_], "batch query",
                    f"probe id {id_}: chronolake {runs.bounded.get(id_, 'no row')}, "
                    f"Flink {last.get(id_, 'no row')}"))


def _late_on_arrival(row: Probe, runs: LakeRuns, lake: Lake, index: int) -> bool:
    """Whether a probe row that arrived in round `index` was at or below the probe
    watermark of the runs before (max time read - delay)."""
    if index == 0 or row in runs.probe[index - 1] or not runs.probe[index - 1]:
        return False
    return row.t <= max(p.t for p in runs.probe[index - 1]) - lake.config.probe_delay


def _decided_by(build: list[Event], row: Probe, *, condition: bool) -> list[str]:
    """Which of the finer rules decide this probe row's answer (for the coverage figures)."""
    at_time = [e for e in build if e.key == row.key and e.kind != "-U" and e.t <= row.t]
    if not at_time:
        return ["decided: no version yet"]
    latest = max(e.t for e in at_time)
    winners = [e for e in at_time if e.t == latest]
    out = ["decided: same-time tie"] if len(winners) > 1 else []
    if winners[-1].kind == "-D":
        out.append("decided: delete")
    elif condition and winners[-1].value % 3 == 0:
        out.append("decided: ON condition fails")
    if any(e.key == row.key and e.kind == "-U" and e.t <= row.t for e in build):
        out.append("decided: with a -U in range")
    return out


def _check_rule_reading(report: Report, lake: Lake, build: list[Event], probe: dict[int, Probe],
                        oracle: dict[int, int | None], case_of: dict[int, int]) -> None:
    """Our reading of TemporalRowTimeJoinOperator (`flink_rule`) against Flink's rows."""
    for id_, row in probe.items():
        ours = flink_rule(build, row.key, row.t, condition=lake.config.condition)
        theirs = oracle.get(id_, "no row")
        if ours is None and not lake.config.left:
            ours = "no row"
        report.counts["rule-reading rows"] += 1
        if ours != theirs:
            report.mismatches.append(Mismatch(
                lake.name, case_of[id_], "reading of Flink's rule",
                f"probe id {id_}: flink_rule {ours}, Flink {theirs}"))


# -- minimizing a mismatch ----------------------------------------------------------------------


def _fails_alone(lake: Lake, case: Case, spark: object) -> tuple[bool, LakeRuns]:
    """Run `case` alone in a lake of its own; expectation from `flink_rule` (checked against
    Flink on every generated case) and the release rule."""
    alone = Lake(f"{lake.name}-case{case.number}", lake.config, [case])
    with tempfile.TemporaryDirectory(prefix="flink-oracle-min-") as directory:
        try:
            runs = run_lake(alone, Path(directory), spark)
        except Exception as error:  # noqa: BLE001 - a crash is a failure to minimize too
            return True, LakeRuns(error=repr(error))
    before: set[int] = set()
    for index, reached in enumerate(released(alone, runs)):
        probe = {p.id: p for p in runs.probe[index]}
        expected = {}
        for id_ in reached - before:
            value = flink_rule(runs.build[index], probe[id_].key, probe[id_].t,
                               condition=alone.config.condition)
            if value is not None or alone.config.left:
                expected[id_] = value
        if expected != runs.emitted[index] or runs.duplicates:
            return True, runs
        before = reached
    return False, runs


def minimize(lake: Lake, case: Case, spark: object, *, budget_s: float) -> Case | None:
    """The smallest case (greedy, one row at a time) that still fails alone; None if the case
    passes alone (then the failure needs the other cases of its lake)."""
    failing, _ = _fails_alone(lake, case, spark)
    if not failing:
        return None
    deadline = time.monotonic() + budget_s
    progress = True
    while progress and time.monotonic() < deadline:
        progress = False
        for candidate in smaller(case):
            if time.monotonic() > deadline:
                break
            if _fails_alone(lake, candidate, spark)[0]:
                case, progress = candidate, True
                break
    return case


def describe(lake: Lake, case: Case) -> str:
    c = lake.config
    lines = [f"case {case.number} ({lake.name}): {'LEFT' if c.left else 'inner'} join, "
             f"probe delay {c.probe_delay} s, build delay {c.build_delay} s, build changelog "
             f"{c.changelog.value}{', ON ... AND ' + CONDITION if c.condition else ''}",
             f"  query: {query(lake)}"]
    for index, chosen in enumerate(case.rounds):
        lines.append(f"  round {index + 1} (then a run):")
        lines += [f"    probe id={p.id} k={p.key} t={p.t}s" for p in chosen.probe]
        lines += [f"    build {e.kind} k={e.key} v={e.value} t={e.t}s" for e in chosen.build]
    return "\n".join(lines)


# -- main --------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=200)
    parser.add_argument("--per-lake", type=int, default=10,
                        help="cases sharing one pair of Delta tables (and their watermarks)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--flink-python", default="/tmp/flinkvenv/bin/python")
    parser.add_argument("--minimize", type=int, default=3, help="failing cases to minimize")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)

    started = time.monotonic()
    lakes = generate(args.seed, args.cases, args.per_lake)
    spark = local_spark_session("flink-oracle")
    runs: dict[str, LakeRuns] = {}
    for lake in lakes:
        with tempfile.TemporaryDirectory(prefix="flink-oracle-") as directory:
            try:
                runs[lake.name] = run_lake(lake, Path(directory), spark)
            except Exception as error:  # noqa: BLE001 - reported as a mismatch of its lake
                runs[lake.name] = LakeRuns(error=repr(error))
        print(f"{lake.name}: {len(lake.cases)} cases, {lake.n_rounds} runs", flush=True)
    chronolake_s = time.monotonic() - started

    jobs, cids = _flink_jobs(lakes, runs)
    flink_started = time.monotonic()
    version, results = run_flink(jobs, args.flink_python)
    flink_s = time.monotonic() - flink_started

    report = Report(lakes, runs)
    compare(report, cids, _flink_rows(jobs, results))
    lines = _summary(report, args, version, chronolake_s, flink_s)
    failing = sorted({(m.lake, m.case) for m in report.mismatches if m.case >= 0})
    by_name = {lake.name: lake for lake in lakes}
    for lake_name, number in failing[: args.minimize]:
        lake = by_name[lake_name]
        case = next(c for c in lake.cases if c.number == number)
        small = minimize(lake, case, spark, budget_s=600)
        lines.append("")
        lines.append(describe(lake, case) if small is None else describe(lake, small))
        if small is None:
            lines.append("  (passes when run alone: the failure needs its lake's other cases)")
    text = "\n".join(lines) + "\n"
    print(text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    return 1 if report.mismatches else 0


def _summary(report: Report, args: argparse.Namespace, version: str, chronolake_s: float,
             flink_s: float) -> list[str]:
    lakes, counts = report.lakes, report.counts
    n_runs = sum(len(r.probe) for r in report.runs.values())
    kinds = Counter(e.kind for r in report.runs.values() for e in (r.build[-1] if r.build else []))
    lines = [
        f"Differential check: chronolake vs Apache Flink {version} "
        f"({datetime.now(UTC):%Y-%m-%d %H:%M} UTC)",
        f"seed {args.seed}: {args.cases} cases in {len(lakes)} lakes of up to {args.per_lake}, "
        f"{n_runs} chronolake runs; chronolake {chronolake_s:.0f} s, Flink {flink_s:.0f} s "
        "(one JVM)",
        "joins: " + ", ".join(f"{k} {v}" for k, v in sorted(Counter(
            ("left" if lake.config.left else "inner")
            + ("+condition" if lake.config.condition else "")
            + f"/{lake.config.changelog.value}" for lake in lakes).items())),
        "build rows: " + ", ".join(f"{k} {v}" for k, v in sorted(kinds.items())),
        f"rows compared run by run: {counts['rows compared']} "
        f"(late probe rows among them: {counts['late probe rows compared']}); "
        f"batch query rows: {counts['bounded rows compared']}; "
        f"rule-reading rows: {counts['rule-reading rows']}",
        "compared rows whose answer the build rows of later runs would change (results never "
        f"revised): {counts['compared rows a later build event would change']}; pending rows "
        "whose answer the build rows of their own run changed: "
        f"{counts['pending rows changed by build rows of their run']}",
        "compared rows whose answer " + ", ".join(
            f"{k.removeprefix('decided: ')} {v}" for k, v in sorted(counts.items())
            if k.startswith("decided: ")) + " decides",
        f"mismatches: {len(report.mismatches)}",
    ]
    for mismatch in report.mismatches[:50]:
        lines.append(f"  {mismatch.lake} case {mismatch.case} [{mismatch.check}] "
                     f"{mismatch.detail}")
    return lines


if __name__ == "__main__":
    sys.exit(main())
