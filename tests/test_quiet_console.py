"""A quiet console: a successful command prints its result and nothing else (no Spark log
lines, no JVM or Dagster notices), while what a user should act on still shows."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pyarrow.compute as pc
import pytest
import yaml
from dagster import DagsterInstance, QueuedRunCoordinator
from deltatables import table_rows

from chronolake.dagster.home import write_instance_settings
from chronolake.dagster.run_launcher import PrewarmedRunLauncher
from chronolake.demo.lake import build_demo_lake, feed_demo_lake

ROOT = Path(__file__).resolve().parent.parent
CLI = Path(sys.executable).with_name("chronolake")
NOISE = re.compile(r"WARN|compiler directives|restricted mode|BetaWarning|log4j|dagster\.yaml")
"""What must not reach the console: Spark's and the JVM's notices, Dagster's beta warnings."""

pytestmark = pytest.mark.slow

Results = dict[str, subprocess.CompletedProcess[str]]


def _chronolake(*args: str, env: dict[str, str], stdin: str | None = None) -> (
    subprocess.CompletedProcess[str]
):
    return subprocess.run(
        [str(CLI), *args], input=stdin, capture_output=True, text=True, env=env, cwd=ROOT,
        timeout=600,
    )


def _noise(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if NOISE.search(line)]


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    log = tmp_path_factory.mktemp("log") / "spark.log"
    clean = {k: v for k, v in os.environ.items() if k != "CHRONOLAKE_SPARK_CONSOLE_LOG"}
    return {**clean, "CHRONOLAKE_SPARK_LOG": str(log)}


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory, env: dict[str, str]) -> Path:
    """The demo lake with the reference platform declared."""
    root = tmp_path_factory.mktemp("quiet") / "lake"
    build_demo_lake(root)
    declared = _chronolake("sql", "--lake", str(root), "-f", "assets/platform.sql", env=env)
    assert declared.returncode == 0, declared.stderr
    assert not _noise(declared.stderr), declared.stderr
    return root


@pytest.fixture(scope="module")
def results(lake: Path, env: dict[str, str]) -> Results:
    """A query, a run and a status, each in its own process, as a user types them."""
    query = "SELECT currency, COUNT(*) AS n FROM orders GROUP BY currency ORDER BY currency;"
    return {
        "sql": _chronolake("sql", "--lake", str(lake), "-f", "-", "--format", "jsonl",
                           env=env, stdin=query),
        "run": _chronolake("run", "orders_enriched", "--lake", str(lake), env=env),
        "status": _chronolake("status", "--lake", str(lake), env=env),
    }


def test_a_query_prints_its_rows_and_nothing_else(lake: Path, results: Results) -> None:
    result = results["sql"]
    assert result.returncode == 0, result.stderr
    assert result.stderr.strip() == "", result.stderr
    orders = table_rows(lake / "orders")
    counts = pc.value_counts(orders["currency"]).to_pylist()
    expected = sorted(
        ({"currency": c["values"], "n": c["counts"]} for c in counts),
        key=lambda row: row["currency"],
    )
    assert [json.loads(line) for line in result.stdout.splitlines()] == expected


def test_a_run_prints_its_outcome_and_nothing_else(results: Results) -> None:
    result = results["run"]
    assert result.returncode == 0, result.stderr
    assert result.stderr.strip() == "", result.stderr
    assert result.stdout.startswith("orders_enriched"), result.stdout


def test_status_prints_its_table_and_nothing_else(results: Results) -> None:
    result = results["status"]
    assert result.returncode == 0, result.stderr
    assert result.stderr.strip() == "", result.stderr
    assert "orders_enriched" in result.stdout and "revenue_per_currency" in result.stdout


def test_spark_warnings_are_kept_in_the_log_file(results: Results, env: dict[str, str]) -> None:
    """pip's pyspark ships no native Hadoop library: Spark warns of it at every start."""
    log = Path(env["CHRONOLAKE_SPARK_LOG"]).read_text()
    assert "WARN NativeCodeLoader" in log, log


def test_a_warning_to_act_on_still_shows(
    lake: Path, env: dict[str, str], results: Results
) -> None:
    """New orders after orders_enriched's run: revenue_per_currency, which reads it, runs on
    what it has committed, and says so (a note, not noise)."""
    assert results["run"].returncode == 0
    feed_demo_lake(lake, seed=3)
    result = _chronolake("run", "revenue_per_currency", "--lake", str(lake), env=env)
    assert result.returncode == 0, result.stderr
    assert "orders_enriched" in result.stderr and "--with-upstream" in result.stderr
    assert not _noise(result.stderr), result.stderr
    assert result.stdout.startswith("revenue_per_currency"), result.stdout


def test_the_reference_platform_loads_without_beta_warnings(lake: Path) -> None:
    """Dagster APIs in beta that chronolake uses on purpose do not warn; any other would."""
    load = (
        "import warnings, dagster; warnings.simplefilter('error', dagster.BetaWarning); "
        "import assets.definitions"
    )
    result = subprocess.run(
        [sys.executable, "-c", load], capture_output=True, text=True, cwd=ROOT, timeout=300,
        env={**os.environ, "CHRONOLAKE_LAKE": str(lake)},
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr.strip() == "", result.stderr


def test_the_dev_instance_settings_turn_telemetry_and_the_pop_up_off_and_launch_runs_warm(
    tmp_path: Path,
) -> None:
    home = tmp_path / "dagster-home"
    home.mkdir()
    (home / "dagster.yaml").write_text(yaml.safe_dump({  # as an earlier release wrote it
        "run_coordinator": {"module": "dagster.core.run_coordinator",
                            "class": "QueuedRunCoordinator",
                            "config": {"dequeue_interval_seconds": 1}},
        "run_launcher": {"module": "chronolake.run_launcher", "class": "PrewarmedRunLauncher"},
    }))
    written = subprocess.run(  # as ./dev writes them
        [sys.executable, "-m", "chronolake.dagster.home", str(home)],
        capture_output=True, text=True, timeout=60,
    )
    assert written.returncode == 0, written.stderr
    instance = DagsterInstance.from_config(str(home))
    try:
        assert instance.telemetry_enabled is False
        assert instance.nux_enabled is False
        # no queue that a daemon looks at now and then: the UI's request launches the run,
        # into a process forked from a warm one
        assert not isinstance(instance.run_coordinator, QueuedRunCoordinator)
        assert isinstance(instance.run_launcher, PrewarmedRunLauncher)
    finally:
        instance.dispose()


def test_the_instance_settings_keep_what_a_user_chose(tmp_path: Path) -> None:
    chosen = {"telemetry": {"enabled": True}, "run_queue": {"max_concurrent_runs": 2},
              "run_launcher": {"module": "dagster.core.launcher", "class": "DefaultRunLauncher"}}
    (tmp_path / "dagster.yaml").write_text(yaml.safe_dump(chosen))
    path = write_instance_settings(tmp_path)
    assert yaml.safe_load(path.read_text()) == {**chosen, "nux": {"enabled": False}}
    instance = DagsterInstance.from_config(str(tmp_path))
    try:
        assert instance.telemetry_enabled is True
        assert instance.nux_enabled is False
    finally:
        instance.dispose()
