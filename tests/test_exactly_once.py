"""Exactly once under crashes and concurrency, and full refresh.

A crash test kills a run with SIGKILL at a named fault point (in a subprocess,
`CHRONOLAKE_FAULT=<point>`), runs again, and compares the output row for row
with a run that never crashed over the same commits: nothing lost, nothing
twice. Between the crash and the rerun, a reader of the output sees the rows of
the last committed run or of the crashed run as a whole, never a part of it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import pytest
from _crash import (
    EXERCISED,
    REPO,
    SIGKILL_RETURNCODE,
    add_batch,
    build_tiny_lake,
    delta_rows,
    files_under,
    finish,
    run_in_subprocess,
    same_rows,
    start_run,
)
from pyspark.sql import DataFrame, SparkSession

from chronolake import Catalog, RunResult
from chronolake.catalog.checkpoint import Checkpoint
from chronolake.errors import RunError, RunLockedError
from chronolake.faults import RUN_FAULT_POINTS, FaultPoint
from chronolake.lake import DeltaRsBackend, backend_for
from chronolake.lake.layout import lock_dir, output_path
from chronolake.lake.lock import LEASE_TTL_S, RENEW_EVERY_S, Lease, lease_name, run_lock
from chronolake.lake.scratch import Writer
from chronolake.runtime.derived import DerivedTable
from chronolake.runtime.result import RunStatus

VIEW = "orders_enriched"
# Before this point a killed run has written nothing a reader sees.
_FIRST_WRITE = RUN_FAULT_POINTS.index(FaultPoint.AFTER_OUTPUT)


@dataclass(frozen=True)
class Reference:
    """Runs that never crashed: `template` after run 1 (batch 0); `lake` after runs 2 and
    3 (batches 1 and 2); each run's output version and checkpoint."""

    template: Path
    lake: Path
    output_versions: dict[int, int]
    checkpoints: dict[int, Checkpoint]

    def output(self, spark: SparkSession, run: int) -> DataFrame:
        path = output_path(self.lake, VIEW)
        return DeltaRsBackend(spark).snapshot(path, self.output_versions[run])


def _run(spark: SparkSession, lake: Path) -> RunResult:
    return DerivedTable(Catalog(lake, spark), VIEW).run()


def _checkpoint(lake: Path) -> Checkpoint:
    return DerivedTable(Catalog(lake), VIEW).store.latest()


@pytest.fixture(scope="module")
def reference(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Reference:
    root = tmp_path_factory.mktemp("exactly_once")
    template, lake = root / "template", root / "reference"
    results = {1: DerivedTable(build_tiny_lake(template, spark), VIEW).run()}
    checkpoints = {1: _checkpoint(template)}
    shutil.copytree(template, lake)
    for run in (2, 3):
        add_batch(lake, run - 1)
        results[run] = _run(spark, lake)
        checkpoints[run] = _checkpoint(lake)
    assert all(r.status is RunStatus.COMMITTED and r.output_version for r in results.values())
    versions = {run: r.output_version or 0 for run, r in results.items()}
    return Reference(template, lake, versions, checkpoints)


def _assert_same_position(checkpoint: Checkpoint, expected: Checkpoint) -> None:
    assert checkpoint.run == expected.run
    assert {n: p.version for n, p in checkpoint.inputs.items()} == {
        n: p.version for n, p in expected.inputs.items()
    }
    assert checkpoint.watermark == expected.watermark
    # The same figures too: a redone run counts what its skipped writes counted before
    assert checkpoint.counters == expected.counters


def _crash(lake: Path, fault: FaultPoint, *, full_refresh: bool = False) -> None:
    crashed = run_in_subprocess(lake, VIEW, fault=fault.value, full_refresh=full_refresh)
    assert crashed.returncode == SIGKILL_RETURNCODE, crashed.stderr[-3000:]
    EXERCISED.fault_points.add(fault.value)
    EXERCISED.crash_restarts += 1


@pytest.mark.lake_contract
@pytest.mark.slow
@pytest.mark.spark
@pytest.mark.parametrize("fault", RUN_FAULT_POINTS, ids=[f.value for f in RUN_FAULT_POINTS])
def test_a_run_killed_at_any_fault_point_is_redone_exactly_once(
    spark: SparkSession, reference: Reference, tmp_path: Path, fault: FaultPoint
) -> None:
    if fault is FaultPoint.IN_STAGING and not backend_for(spark).stages_output_files:
        pytest.skip(f"the {backend_for(spark).kind} backend stages no output files")
    lake = tmp_path / "lake"
    shutil.copytree(reference.template, lake)
    add_batch(lake, 1)
    _crash(lake, fault)

    seen = delta_rows(spark, output_path(lake, VIEW))
    wrote = RUN_FAULT_POINTS.index(fault) >= _FIRST_WRITE
    assert same_rows(seen, reference.output(spark, 2 if wrote else 1))

    rerun = _run(spark, lake)
    done = fault is FaultPoint.AFTER_CHECKPOINT
    assert rerun.status is (RunStatus.UP_TO_DATE if done else RunStatus.COMMITTED)
    assert rerun.run == 2
    assert same_rows(delta_rows(spark, output_path(lake, VIEW)), reference.output(spark, 2))
    _assert_same_position(_checkpoint(lake), reference.checkpoints[2])


@pytest.mark.slow
@pytest.mark.spark
def test_incremental_runs_across_two_crashes_match_runs_that_never_crashed(
    spark: SparkSession, reference: Reference, tmp_path: Path
) -> None:
    lake = tmp_path / "lake"
    shutil.copytree(reference.template, lake)
    for batch, fault in ((1, FaultPoint.AFTER_SIDE_OUTPUT), (2, FaultPoint.AFTER_STATE)):
        add_batch(lake, batch)
        _crash(lake, fault)
        assert _run(spark, lake).status is RunStatus.COMMITTED
    assert same_rows(
        delta_rows(spark, output_path(lake, VIEW)), reference.output(spark, 3)
    )
    _assert_same_position(_checkpoint(lake), reference.checkpoints[3])
    again = _run(spark, lake)  # no new commits: nothing to do, and it says so
    assert again.status is RunStatus.UP_TO_DATE
    assert again.message == "no new commits in any input since the last run: nothing to do"


@pytest.mark.slow
@pytest.mark.spark
def test_a_killed_full_refresh_is_finished_by_the_next_run_with_the_incremental_rows(
    spark: SparkSession, reference: Reference, tmp_path: Path
) -> None:
    lake = tmp_path / "lake"
    shutil.copytree(reference.lake, lake)
    _crash(lake, FaultPoint.AFTER_OUTPUT, full_refresh=True)
    # the refresh replaced the output in one commit: a reader sees all of it
    assert same_rows(delta_rows(spark, output_path(lake, VIEW)), reference.output(spark, 3))

    finished = _run(spark, lake)  # an ordinary run finishes the interrupted refresh first
    assert finished.message.startswith("run 4 rebuilt the table from scratch with")
    assert same_rows(delta_rows(spark, output_path(lake, VIEW)), reference.output(spark, 3))
    checkpoint, expected = _checkpoint(lake), reference.checkpoints[3]
    assert checkpoint.run == 4
    assert {n: p.version for n, p in checkpoint.inputs.items()} == {
        n: p.version for n, p in expected.inputs.items()
    }
    assert checkpoint.counters["pending_rows"] == expected.counters["pending_rows"]


def _wait_for_holder(path: Path, pid: int, process: subprocess.Popen[str]) -> None:
    """Until process `pid` holds the lock at `path` (it writes its pid there once it does)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and process.poll() is None:
        try:
            if json.loads(path.read_text() or "{}").get("pid") == pid:
                return
        except (OSError, json.JSONDecodeError):
            pass
        time.sleep(0.05)
    pytest.fail(f"the first run never took the lock: {process.communicate()[1][-3000:]}")


@pytest.mark.lake_contract
@pytest.mark.slow
@pytest.mark.spark
def test_two_runs_started_together_one_commits_the_other_fails_and_changes_nothing(
    spark: SparkSession, reference: Reference, tmp_path: Path
) -> None:
    lake = tmp_path / "lake"
    shutil.copytree(reference.template, lake)
    add_batch(lake, 1)
    code = (
        "from chronolake.catalog import Catalog\n"
        "from chronolake.runtime.derived import DerivedTable\n"
        f"print(DerivedTable(Catalog({str(lake)!r}), {VIEW!r}).run().model_dump_json())\n"
    )
    first = subprocess.Popen(
        [sys.executable, "-c", code], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_for_holder((lock_dir(lake) / lease_name(VIEW)).path, first.pid, first)
        with pytest.raises(
            RunLockedError, match=rf"another run of 'orders_enriched' is in progress \(pid "
            rf"{first.pid} on .*\); .*this run read and changed nothing"
        ):
            _run(spark, lake)
        out, err = first.communicate(timeout=600)
    finally:
        if first.poll() is None:
            first.kill()
    assert first.returncode == 0, err[-3000:]
    assert json.loads(out.splitlines()[-1])["status"] == RunStatus.COMMITTED.value
    assert same_rows(delta_rows(spark, output_path(lake, VIEW)), reference.output(spark, 2))
    _assert_same_position(_checkpoint(lake), reference.checkpoints[2])
    state = lake / "_chronolake" / "state" / VIEW
    assert not (state / "intent-00000003.json").exists()
    assert "run-00000003" not in {f.split("/")[0] for f in files_under(state)}
    EXERCISED.concurrent_runs += 1


def test_the_run_lock_admits_one_holder_and_is_freed_when_the_holder_is_killed(
    tmp_path: Path,
) -> None:
    busy = rf"another run of 't' is in progress \(pid {os.getpid()} on "
    with run_lock(tmp_path, "t"), pytest.raises(RunError, match=busy), run_lock(tmp_path, "t"):
        pass
    with run_lock(tmp_path, "t"):  # released on exit
        pass
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, time; from pathlib import Path\n"
         "from chronolake.lake.lock import run_lock\n"
         f"with run_lock(Path({str(tmp_path)!r}), 't'):\n"
         "    print('locked', flush=True); time.sleep(600)\n"],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        with pytest.raises(RunError, match=rf"\(pid {holder.pid} on "), run_lock(tmp_path, "t"):
            pass
        os.kill(holder.pid, signal.SIGKILL)  # no cleanup runs: the kernel frees the lock
        holder.wait(timeout=60)
    finally:
        if holder.poll() is None:
            holder.kill()
    with run_lock(tmp_path, "t"):
        pass
    EXERCISED.concurrent_runs += 1


def _wait_until_stopped(process: subprocess.Popen[str]) -> None:
    """Until `process` froze itself (SIGSTOP at its armed fault point)."""
    deadline = time.monotonic() + 300
    stat = Path(f"/proc/{process.pid}/stat")
    while time.monotonic() < deadline and process.poll() is None:
        if stat.read_text().rsplit(")", 1)[1].split()[0] == "T":
            return
        time.sleep(0.1)
    pytest.fail(f"the run never stopped at its fault point: {process.communicate()[1][-3000:]}")


def _expire(lease_file: Path) -> None:
    """Make the lease look unrenewed for longer than `LEASE_TTL_S`, as when its holder's
    host is cut off from the lake."""
    fields = json.loads(lease_file.read_text())
    fields["renewed_ms"] -= int(LEASE_TTL_S * 1000) + 1
    lease_file.write_text(json.dumps(fields))


@pytest.mark.slow
@pytest.mark.spark
@pytest.mark.parametrize("stop", [FaultPoint.AFTER_READ, FaultPoint.AFTER_INTENT,
                                  FaultPoint.AFTER_OUTPUT, FaultPoint.BEFORE_CHECKPOINT],
                         ids=lambda point: point.value)
def test_a_stalled_run_whose_lease_was_taken_over_is_refused_at_the_commit_point(
    spark: SparkSession, reference: Reference, tmp_path: Path, stop: FaultPoint
) -> None:
    """Two runs of one table that share nothing but the lake: the first stalls while
    holding the lease, which expires (its host is cut off); a second run takes it over and
    commits; then the first wakes up. Exactly one run's output is committed, nothing twice,
    and the first is refused with the reason and leaves no state behind."""
    lake = tmp_path / "lake"
    shutil.copytree(reference.template, lake)
    add_batch(lake, 1)
    stalled = start_run(lake, VIEW, fault=f"{stop.value}:stop")
    try:
        _wait_until_stopped(stalled)
        _expire((lock_dir(lake) / lease_name(VIEW)).path)
        assert _run(spark, lake).status is RunStatus.COMMITTED  # took the stale lease over
        os.kill(stalled.pid, signal.SIGCONT)
        woke = finish(stalled)
    finally:
        if stalled.poll() is None:
            stalled.kill()
    assert woke.returncode == 1, woke.stderr[-3000:]
    assert re.search(r"RunError: 'orders_enriched': run 2 was committed by another run while "
                     r"this one( \(run 2\))? was (computing|writing)", woke.stderr), \
        woke.stderr[-3000:]
    assert same_rows(delta_rows(spark, output_path(lake, VIEW)), reference.output(spark, 2))
    checkpoint = _checkpoint(lake)
    _assert_same_position(checkpoint, reference.checkpoints[2])
    assert checkpoint.counters["rows_out"] == reference.checkpoints[2].counters["rows_out"]
    store = DerivedTable(Catalog(lake), VIEW).store
    attempts = {PurePosixPath(name).parent.name for name in checkpoint.state.values()}
    assert set(store.storage.folders(store.run_dir(2))) == attempts  # the stalled run's is gone
    assert not (lock_dir(lake) / lease_name(VIEW)).path.exists()
    later = add_batch(lake, 2) or _run(spark, lake)  # and the table goes on as usual
    assert later.run == 3
    assert same_rows(delta_rows(spark, output_path(lake, VIEW)), reference.output(spark, 3))
    EXERCISED.concurrent_runs += 1


def test_a_lease_is_renewed_while_held_and_another_hosts_is_taken_over_only_once_expired(
    tmp_path: Path,
) -> None:
    with run_lock(tmp_path, "t"):
        first = json.loads((tmp_path / lease_name("t")).read_text())["renewed_ms"]
        time.sleep(RENEW_EVERY_S + 2)
        assert json.loads((tmp_path / lease_name("t")).read_text())["renewed_ms"] > first
    assert not (tmp_path / lease_name("t")).exists()  # released: removed

    now_ms = int(time.time() * 1000)
    elsewhere = Lease(Writer("another-host", 4242, "17", now_ms), "theirs", now_ms)
    (tmp_path / lease_name("t")).write_text(elsewhere.to_json())
    with pytest.raises(RunError, match=r"\(pid 4242 on another-host, "), run_lock(tmp_path, "t"):
        pass
    _expire(tmp_path / lease_name("t"))
    with run_lock(tmp_path, "t"):  # its holder stopped renewing it: taken over
        assert json.loads((tmp_path / lease_name("t")).read_text())["pid"] == os.getpid()
    EXERCISED.concurrent_runs += 1
