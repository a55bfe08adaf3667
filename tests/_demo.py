"""One `chronolake demo` per test run, copied for each test that starts from it.

The demo (the demo lake built, the reference platform declared and materialized once through
Dagster, recorded in its Dagster home) takes a few minutes of Spark; the tour and the asset
checks each start from it and change it. It is built once per pytest run, under the run's
temporary root (shared by xdist's workers, so whichever worker asks first builds it while the
other waits on a lock), and each test gets a copy of the lake and of the Dagster home: the
lake's tables name their files by relative paths, and the home's `dagster.yaml` names no
folder, so a copy is a demo of its own.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CHRONOLAKE = Path(sys.executable).with_name("chronolake")
_BUILT = "built"
"""Written last in the shared folder: the demo there is complete."""


@dataclass(frozen=True)
class Demo:
    """A demo lake and the Dagster home its first materialization is recorded in."""

    lake: Path
    dagster_home: Path


def _shared_root(factory: pytest.TempPathFactory) -> Path:
    """The run's temporary root: an xdist worker's base folder is a child of it."""
    base = factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def demo_copy(factory: pytest.TempPathFactory, lake: Path, dagster_home: Path) -> Demo:
    """A copy of this run's demo at `lake` and `dagster_home`, the demo built first if no
    test of the run has built it yet."""
    shared = _shared_root(factory) / "shared-demo"
    shared.mkdir(exist_ok=True)
    built = Demo(shared / "demo-lake", shared / "dagster-home")
    with open(shared / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the other worker waits while one builds it
        if not (shared / _BUILT).exists():
            shutil.rmtree(built.lake, ignore_errors=True)
            shutil.rmtree(built.dagster_home, ignore_errors=True)
            subprocess.run(
                [CHRONOLAKE, "demo", "--project", ROOT, "--lake", built.lake],
                env={**os.environ, "DAGSTER_HOME": str(built.dagster_home)},
                check=True, capture_output=True, timeout=600, cwd=shared,
            )
            (shared / _BUILT).touch()
    shutil.copytree(built.lake, lake)
    shutil.copytree(built.dagster_home, dagster_home)
    return Demo(lake, dagster_home)
