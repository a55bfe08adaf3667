"""Runs launched from Dagster's UI: today's `dagster dev` against `chronolake dev`'s warm engine.

Each variant starts its UI server on a copy of the demo lake, whose derived tables are up to
date, and launches `orders_enriched` through the server's GraphQL API, as the UI's
Materialize button does: through the run launcher, each run in a process of its own. Times
are from the launch to the run's success:

- no new data: nothing moved since the last run;
- small change: after one `demo_feed` (100 orders, a correction, a cancellation, a rate
  change);

one warm-up run first (the first run on a fresh server meets its cold JVM), then `--repeat`
of each, medians reported. Variants: `dagster dev` (each run starts its own Spark driver in
a process the code server spawns for it), `chronolake dev` with Dagster's default launcher
(a local Spark Connect server the runs share, a fresh process per run) and `chronolake dev`
as `./dev` configures it (the same server, each run forked from a warm process,
`chronolake.dagster.run_launcher`). Every run's output must equal the other variants' at the same
step (rows, order ids and amounts), else exit 1.
Each run's phases (the run process's start, each step) come from its event log.
Usage: `.venv/bin/python benchmarks/ui_runs.py --repeat 3`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path

import yaml
from dagster import DagsterEventType, DagsterInstance, DagsterRunStatus
from dagster_graphql import DagsterGraphQLClient
from deltalake import DeltaTable

from chronolake import Catalog
from chronolake.dagster.home import write_instance_settings
from chronolake.demo.lake import build_demo_lake, feed_demo_lake
from chronolake.lake.layout import output_path
from chronolake.spark.connect_server import free_port, stop_process_group

ROOT = Path(__file__).resolve().parent.parent
VIEW = "orders_enriched"
DEFAULT_LAUNCHER = {"module": "dagster.core.launcher", "class": "DefaultRunLauncher"}
VARIANTS: dict[str, tuple[list[str], dict[str, str] | None]] = {
    "dagster dev": (["dagster", "dev", "-w", "workspace.yaml"], DEFAULT_LAUNCHER),
    "chronolake dev, a process per run": (["chronolake", "dev"], DEFAULT_LAUNCHER),
    "chronolake dev": (["chronolake", "dev"], None),
}
"""Each variant's server and run launcher: Dagster's default (the code server spawns a
process per run) or, with None, the one `./dev` configures (`chronolake.dagster.run_launcher`)."""


def _prepared_lake(root: Path) -> Path:
    """The demo lake with the reference platform registered."""
    build_demo_lake(root)
    Catalog(root).declare((ROOT / "assets" / "platform.sql").read_text())
    return root


def _checksum(lake: Path) -> tuple[int, int, str]:
    """Rows of the output, the sum of their order ids and of their amounts: what must not
    depend on the variant (a feed's order times follow the wall clock, so they differ)."""
    table = DeltaTable(str(output_path(lake, VIEW))).to_pyarrow_table()
    ids, amounts = table["order_id"].to_pylist(), table["amount"].to_pylist()
    return len(ids), sum(ids), str(sum(amounts))


def _serve(command: list[str], env: dict[str, str], log: Path) -> tuple[subprocess.Popen, int]:
    port = free_port()
    binary = str(Path(sys.executable).with_name(command[0]))
    with log.open("wb") as out:
        process = subprocess.Popen(
            [binary, *command[1:], "-p", str(port), "-h", "127.0.0.1"], cwd=ROOT, env=env,
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/server_info", timeout=2)
            return process, port
        except OSError:
            time.sleep(0.5)
    raise RuntimeError(f"{command} did not serve within 300 s; see {log}")


def _launched_run(client: DagsterGraphQLClient, run_ids: list[str] | None = None) -> float:
    """Seconds from launching `VIEW`'s materialization to the run's success (its id appended
    to `run_ids`)."""
    started = time.monotonic()
    run_id = client.submit_job_execution("__ASSET_JOB", asset_selection=[[VIEW]])
    while (status := client.get_run_status(run_id)) not in (
        DagsterRunStatus.SUCCESS, DagsterRunStatus.FAILURE, DagsterRunStatus.CANCELED
    ):
        time.sleep(0.1)
    if status is not DagsterRunStatus.SUCCESS:
        raise RuntimeError(f"run {run_id} ended {status.value}")
    if run_ids is not None:
        run_ids.append(run_id)
    return time.monotonic() - started


def _phases(home: Path, run_id: str) -> dict[str, float]:
    """Where a run's time went, from its event log: from its creation to its process's start
    (`RUN_START`: the launch, the process and the code location's load), each step, and
    from the last step to the run's success."""
    instance = DagsterInstance.from_config(str(home))
    try:
        events = [(entry.timestamp, entry.dagster_event) for entry in instance.all_logs(run_id)
                  if entry.dagster_event is not None]
        created = instance.get_run_record_by_id(run_id).create_timestamp.timestamp()
    finally:
        instance.dispose()
    at = {event.event_type: stamp for stamp, event in events if event.step_key is None}
    phases = {"to the run's process": at[DagsterEventType.RUN_START] - created}
    starts: dict[str, float] = {}
    for stamp, event in events:
        if event.event_type is DagsterEventType.STEP_START:
            starts[event.step_key] = stamp
        elif event.event_type is DagsterEventType.STEP_SUCCESS:
            phases[event.step_key] = stamp - starts[event.step_key]
            last = stamp
    phases["after the steps"] = at[DagsterEventType.RUN_SUCCESS] - last
    return {name: round(seconds, 2) for name, seconds in phases.items()}


def _variant(name: str, template: Path, folder: Path, repeat: int, feeds_from: datetime
             ) -> dict[str, object]:
    """Launch the runs on a copy of `template`; the feeds happen at `feeds_from` + 1 min per
    step, the same in every variant (by the wall clock they would differ)."""
    lake, home = folder / "lake", folder / "dagster-home"
    shutil.copytree(template, lake)
    command, launcher = VARIANTS[name]
    if launcher is not None:
        home.mkdir(parents=True)
        (home / "dagster.yaml").write_text(yaml.safe_dump({"run_launcher": launcher}))
    write_instance_settings(home)  # as `./dev` writes .dagster-home's, keeping a launcher
    env = {key: value for key, value in os.environ.items()
           if key not in ("CHRONOLAKE_SPARK_REMOTE", "CHRONOLAKE_SPARK_MASTER")}
    env |= {"CHRONOLAKE_LAKE": str(lake), "DAGSTER_HOME": str(home)}
    process, port = _serve(command, env, folder / "server.log")
    client = DagsterGraphQLClient("127.0.0.1", port_number=port)
    try:
        first = _launched_run(client)
        quiet, changed, sums, quiet_ids, changed_ids = [], [], [], [], []
        for step in range(repeat):
            quiet.append(_launched_run(client, quiet_ids))
            feed_demo_lake(lake, seed=step, now=feeds_from + timedelta(minutes=step + 1))
            changed.append(_launched_run(client, changed_ids))
            sums.append(_checksum(lake))
    finally:
        stop_process_group(process)
    return {"first_run_s": round(first, 2), "no_new_data_s": [round(s, 2) for s in quiet],
            "small_change_s": [round(s, 2) for s in changed], "checksums": sums,
            "no_new_data_phases": [_phases(home, run_id) for run_id in quiet_ids],
            "small_change_phases": [_phases(home, run_id) for run_id in changed_ids]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="Runs of each kind (median).")
    parser.add_argument("--variant", choices=list(VARIANTS), action="append",
                        help="Only this variant (repeatable); both by default.")
    args = parser.parse_args()
    results: dict[str, dict[str, object]] = {}
    with tempfile.TemporaryDirectory(prefix="chronolake-ui-runs-") as scratch:
        template = _prepared_lake(Path(scratch) / "template")
        first = subprocess.run(  # bring the derived tables up to date, as after `./dev demo`
            [str(Path(sys.executable).with_name("chronolake")), "run", VIEW, "--lake",
             str(template)], cwd=ROOT, capture_output=True, text=True,
        )
        if first.returncode != 0:
            sys.exit(first.stderr)
        feeds_from = datetime.now(tz=UTC).replace(tzinfo=None, microsecond=0)
        for name in args.variant or VARIANTS:
            results[name] = _variant(name, template, Path(scratch) / name.replace(" ", "-"),
                                     args.repeat, feeds_from)
    load = os.getloadavg()
    print(f"{datetime.now():%Y-%m-%d %H:%M}, load {load[0]:.1f}/{load[1]:.1f}, "
          f"--repeat {args.repeat}: median seconds from launch to success")
    print("| variant | first run | no new data | small change |")
    print("|---|---:|---:|---:|")
    for name, result in results.items():
        print(f"| {name} | {result['first_run_s']} | "
              f"{statistics.median(result['no_new_data_s']):.2f} | "  # type: ignore[arg-type]
              f"{statistics.median(result['small_change_s']):.2f} |")  # type: ignore[arg-type]
    out = ROOT / "benchmarks" / "results" / f"ui_runs-{datetime.now():%Y%m%d-%H%M}.json"
    out.write_text(json.dumps({"load": load, "repeat": args.repeat, **results}, indent=2))
    print(f"(all runs: {out.relative_to(ROOT)})")
    for name, result in results.items():
        for kind in ("no_new_data", "small_change"):
            print(f"{name}, the last {kind.replace('_', ' ')}'s seconds: "
                  f"{result[f'{kind}_phases'][-1]}")  # type: ignore[index]
    sums = [result["checksums"] for result in results.values()]
    if any(other != sums[0] for other in sums):
        sys.exit(f"outputs differ between the variants: {sums}")


if __name__ == "__main__":
    main()
