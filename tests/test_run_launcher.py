"""The run launcher's rules: runs are forked only where the forker imports what they
import, code edited since the forker started is not run stale, and Terminate interrupts
only the run's own process. (Launching through it, terminating and killing runs are tested
with `chronolake dev` in test_spark_connect.py.)"""

from __future__ import annotations

import dataclasses
import importlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from dagster import DagsterInstance, DagsterRunStatus
from dagster._core.test_utils import create_run_for_test

from chronolake.dagster.home import write_instance_settings
from chronolake.dagster.run_launcher import PROCESS_TAG, _changed_since, _forkable, _signal_name
from chronolake.lake.scratch import Writer


@pytest.fixture
def imported_module(tmp_path: Path) -> Iterator[Path]:
    """A module imported from `tmp_path`, forgotten again afterwards."""
    source = tmp_path / "chronolake_edited_module.py"
    source.write_text("ANSWER = 1\n")
    os.utime(source, (time.time() - 60, time.time() - 60))
    sys.path.insert(0, str(tmp_path))
    importlib.import_module(source.stem)
    try:
        yield source
    finally:
        sys.modules.pop(source.stem, None)
        sys.path.remove(str(tmp_path))


def test_a_process_whose_imported_code_is_untouched_runs_as_it_is(imported_module: Path) -> None:
    assert not _changed_since(time.time())


def test_an_edit_or_removal_after_the_start_makes_the_process_start_afresh(
    imported_module: Path,
) -> None:
    started = time.time()
    os.utime(imported_module, (started + 1, started + 1))  # saved again in an editor
    assert _changed_since(started)
    imported_module.unlink()
    assert _changed_since(started)


def test_runs_are_forked_only_where_the_forker_can_import_what_they_import() -> None:
    here = sys.executable
    assert _forkable(["dagster", "api", "execute_run", "{}"], here)
    assert _forkable([here, "-m", "dagster", "api", "execute_run", "{}"], here)
    other = "/opt/another-environment/bin/python"
    assert not _forkable([other, "-m", "dagster", "api", "execute_run", "{}"], other)
    assert not _forkable(["my-entry-point", "api", "execute_run", "{}"], here)


@pytest.fixture
def instance(tmp_path: Path) -> Iterator[DagsterInstance]:
    """An instance as `./dev` writes it, with chronolake's launcher."""
    write_instance_settings(tmp_path)
    instance = DagsterInstance.from_config(str(tmp_path))
    try:
        yield instance
    finally:
        instance.dispose()


def _started_run(instance: DagsterInstance, process: Writer) -> str:
    run = create_run_for_test(instance, status=DagsterRunStatus.STARTED,
                              tags={PROCESS_TAG: process.tag()})
    return run.run_id


def _status(instance: DagsterInstance, run_id: str) -> DagsterRunStatus | None:
    run = instance.get_run_by_id(run_id)
    return None if run is None else run.status


def test_terminating_a_run_whose_process_is_gone_cancels_it(instance: DagsterInstance) -> None:
    ended = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                             stdin=subprocess.PIPE)
    process = Writer.of_process(ended.pid)
    ended.communicate(b"")
    run_id = _started_run(instance, process)
    assert instance.run_launcher.terminate(run_id)
    assert _status(instance, run_id) is DagsterRunStatus.CANCELED


def test_a_process_of_another_host_or_a_later_one_with_its_pid_is_never_signalled(
    instance: DagsterInstance,
) -> None:
    """The pid alone does not name the run's process: this test's own process stands in for
    a later process that took a finished run's pid, and would be interrupted if it did."""
    here = Writer.current()
    elsewhere = dataclasses.replace(here, host="another-host")
    run_id = _started_run(instance, elsewhere)
    assert not instance.run_launcher.terminate(run_id)
    assert _status(instance, run_id) is DagsterRunStatus.STARTED
    earlier = dataclasses.replace(here, started=str(int(here.started or 0) - 1))
    run_id = _started_run(instance, earlier)
    assert instance.run_launcher.terminate(run_id)  # no process to interrupt: canceled
    assert _status(instance, run_id) is DagsterRunStatus.CANCELED


def test_a_run_killed_by_any_signal_is_reported_by_its_name_or_number() -> None:
    assert _signal_name(9) == "SIGKILL"
    assert _signal_name(40) == "signal 40"  # a real-time signal has no name
