"""The chaos test on a bucket: runs killed with SIGKILL at random points, and concurrent runs,
on moto's S3 server, with Spark writing the data files through S3A, on each lake backend.

A JVM loads its jars once, so the chaos test (`test_chaos.py`) runs in a pytest process of its
own per backend, pointed at the bucket by `CHRONOLAKE_TEST_LAKE`: its session, its runs and
the runs it kills all reach the bucket through S3A. What it checks is the chaos test's: every
table equal to a fault-free lake's, nothing lost or doubled, no scratch, no data file that no
commit names, every table readable.

It runs where the lake contract on delta-spark runs, beside the suite (`./dev test`): one round
on delta-spark, whose commits on a bucket go through chronolake's own log store. More rounds
(`CHRONOLAKE_CHAOS_ROUNDS`) and delta-rs too (`CHRONOLAKE_CHAOS_BACKENDS=delta-rs,delta-spark`)
are a soak's; delta-rs's commits on a bucket are killed at each fault point and raced in the
suite already (`test_object_store.py`).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from _crash import REPO
from _s3 import BUCKET, TEST_LAKE_ENV

from chronolake.spark.stack import BACKEND_ENV

CHAOS_TEST = ("tests/test_chaos.py::"
              "test_runs_killed_at_random_points_leave_every_table_as_in_a_fault_free_lake")
ROUNDS_ENV = "CHRONOLAKE_CHAOS_ROUNDS"
BACKENDS_ENV = "CHRONOLAKE_CHAOS_BACKENDS"
TIMEOUT_S = 1800
"""A hang guard for the chaos run (quiet, about 10 minutes; beside the suite, up to 20)."""

pytestmark = [
    pytest.mark.slow, pytest.mark.spark, pytest.mark.lake_contract,
    pytest.mark.timeout(TIMEOUT_S + 120),
    pytest.mark.skipif(
        os.environ.get(BACKEND_ENV) != "delta-spark" or TEST_LAKE_ENV in os.environ,
        reason="runs in the delta-spark contract beside the suite (./dev test), or with "
               f"{BACKEND_ENV}=delta-spark: a pytest process of its own per backend",
    ),
]


@pytest.mark.parametrize(
    "backend", os.environ.get(BACKENDS_ENV, "delta-spark").replace(" ", "").split(","))
def test_runs_killed_on_a_bucket_leave_every_table_as_in_a_fault_free_lake(
    s3: str, backend: str, tmp_path: Path
) -> None:
    environment = os.environ | {
        BACKEND_ENV: backend,
        TEST_LAKE_ENV: f"s3://{BUCKET}/{backend}",
        ROUNDS_ENV: os.environ.get(ROUNDS_ENV, "1"),
    }
    chaos = subprocess.run(
        [sys.executable, "-m", "pytest", CHAOS_TEST, "--slow", "-q", "-s", "-p", "no:cacheprovider",
         f"--timeout={TIMEOUT_S}", f"--basetemp={tmp_path / 'chaos'}"],
        cwd=REPO, env=environment, capture_output=True, text=True, timeout=TIMEOUT_S,
        check=False,
    )
    print(chaos.stdout[-4000:])
    assert chaos.returncode == 0, chaos.stdout[-12000:] + chaos.stderr[-4000:]
    assert "1 passed" in chaos.stdout
