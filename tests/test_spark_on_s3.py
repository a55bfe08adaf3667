"""Spark on a bucket: the reference platform end to end on an S3 emulator (moto's server), on
both lake backends.

Each backend gets a lake of its own in the bucket and processes of its own (a JVM loads its
jars once), driven as a user drives the platform: delta-rs writes the demo's source tables
into the bucket, `chronolake sql -f assets/platform.sql` declares the platform there,
`chronolake run` runs every view in one session, the demo is fed, Dagster materializes one of
the platform's views on the new commits (`dagster asset materialize`, the reference
platform's code location on the bucket), `chronolake sql -e` reads every derived table by
name, and `chronolake status` shows where each stands. Spark reads and writes the bucket
itself, through S3A (`chronolake.spark.stack`): under delta-spark Delta's JVM writer commits the
outputs, under delta-rs Spark writes their files and delta-rs commits them. Both lakes end
with the same rows.

Every process here names its backend, so the module runs once, in the pytest process of the
delta-spark contract beside the suite (`./dev test`), which has the time to spare.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest
from _dagster_events import latest_observation_metadata
from _s3 import BUCKET
from dagster import AssetKey, DagsterInstance

from chronolake.demo.lake import DEMO_START, ORDER_COMMITS, build_demo_lake, feed_demo_lake
from chronolake.lake.layout import output_path
from chronolake.lake.storage import Storage
from chronolake.location import LocationLike
from chronolake.spark.stack import BACKEND_ENV, s3a_settings

pytestmark = [
    pytest.mark.lake_contract,
    pytest.mark.timeout(2400),  # the module's fixture: two backends' passes, side by side
    pytest.mark.skipif(os.environ.get(BACKEND_ENV) != "delta-spark",
                       reason="runs in the delta-spark contract beside the suite (./dev test), "
                              f"or with {BACKEND_ENV}=delta-spark: its processes name their "
                              "backends"),
]

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
PLATFORM_SQL = REPO / "assets" / "platform.sql"
BACKENDS = ("delta-rs", "delta-spark")
VIEWS = ("latest_rates", "orders_enriched", "orders_enriched_latest", "orders_per_currency",
         "revenue_per_currency")
"""The reference platform's views, all derived tables (materialized by their runs)."""
MATERIALIZED = "orders_per_currency"
"""The view Dagster materializes on the fed commits: their orders close a window."""
FED_AT = DEMO_START + timedelta(minutes=15 * ORDER_COMMITS + 10)
"""The feed's clock: the same new orders in both lakes, after the demo's last ones."""
COMMAND_TIMEOUT_S = 1200
"""A hang guard per command: `run` takes about 4 minutes quiet, and up to 10 beside the suite."""
QUERY = "; ".join(f"SELECT '{view}' AS view_name, * FROM {view}" for view in VIEWS)


@dataclass(frozen=True)
class PlatformRun:
    """What one backend's pass over the platform left: the CLI's output, every derived
    table's rows as queried by name, the status rows, and the Dagster instance it ran in."""

    lake: str
    ran: str
    rows: dict[str, list[str]]
    status: dict[str, dict]
    dagster_home: Path
    seconds: dict[str, float]


def test_s3a_is_configured_from_the_environment_obstore_and_delta_rs_read() -> None:
    """What a user sets for an S3-compatible store (`_s3.moto_s3`'s environment) reaches S3A;
    credentials stay in the environment, where S3A's provider chain reads them."""
    emulator = {"AWS_ENDPOINT_URL": "http://127.0.0.1:9000", "AWS_ACCESS_KEY_ID": "key",
                "AWS_SECRET_ACCESS_KEY": "secret", "AWS_REGION": "eu-west-1",
                "AWS_ALLOW_HTTP": "true"}

    settings = s3a_settings(emulator)

    assert settings == {
        "spark.hadoop.fs.s3.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem",
        "spark.hadoop.fs.AbstractFileSystem.s3.impl": "org.apache.hadoop.fs.s3a.S3A",
        "spark.hadoop.fs.s3a.endpoint": "http://127.0.0.1:9000",
        "spark.hadoop.fs.s3a.path.style.access": "true",
        "spark.hadoop.fs.s3a.connection.ssl.enabled": "false",
        "spark.hadoop.fs.s3a.endpoint.region": "eu-west-1",
    }
    aws = s3a_settings({"AWS_REGION": "us-east-2"})  # AWS itself: its endpoints, over TLS
    assert "spark.hadoop.fs.s3a.endpoint" not in aws
    assert "spark.hadoop.fs.s3a.connection.ssl.enabled" not in aws
    assert aws["spark.hadoop.fs.s3a.endpoint.region"] == "us-east-2"


@pytest.fixture(scope="module")
def platforms(s3: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, PlatformRun]:
    """Both backends' passes, side by side (each mostly waits on its JVM or the emulator)."""
    with ThreadPoolExecutor(len(BACKENDS)) as pool:
        passes = {backend: pool.submit(_platform_pass, backend,
                                       tmp_path_factory.mktemp(f"dagster-{backend}"))
                  for backend in BACKENDS}
        return {backend: future.result() for backend, future in passes.items()}


@pytest.mark.slow
@pytest.mark.dagster
def test_every_view_runs_on_a_bucket_under_both_backends(
    platforms: dict[str, PlatformRun],
) -> None:
    for backend, run in platforms.items():
        for view in VIEWS:
            assert f"{view}: run 1 committed" in run.ran, (backend, run.ran)
        views = {name: row for name, row in run.status.items() if row["what"] == "view"}
        assert sorted(views) == sorted(VIEWS)
        # run 1 by `chronolake run`; run 2 of one view by Dagster, on the fed commits
        assert {name: (row["last_run"], row["last_error"]) for name, row in views.items()} == {
            view: (2 if view == MATERIALIZED else 1, None) for view in VIEWS}


@pytest.mark.slow
@pytest.mark.dagster
def test_both_backends_leave_the_same_rows(platforms: dict[str, PlatformRun]) -> None:
    by_backend = [platforms[backend].rows for backend in BACKENDS]
    assert all(by_backend[0][view] for view in VIEWS), by_backend[0]
    for view in VIEWS:
        assert by_backend[0][view] == by_backend[1][view], view


@pytest.mark.slow
@pytest.mark.dagster
def test_delta_spark_commits_the_outputs_with_delta_lakes_own_writer(
    platforms: dict[str, PlatformRun],
) -> None:
    for backend, run in platforms.items():
        for view in VIEWS:
            engine = _latest_commit_info(output_path(run.lake, view)).get("engineInfo", "")
            assert ("Delta-Lake/4.4" in engine) == (backend == "delta-spark"), (view, engine)


@pytest.mark.slow
@pytest.mark.dagster
def test_dagster_materializes_a_view_of_the_platform_in_the_bucket(
    platforms: dict[str, PlatformRun],
) -> None:
    for run in platforms.values():
        instance = DagsterInstance.from_config(str(run.dagster_home))
        # the launch's day is not complete: the run's figures are an observation
        assert instance.get_latest_materialization_event(AssetKey(MATERIALIZED)) is None
        metadata = latest_observation_metadata(instance, MATERIALIZED)
        assert metadata["dagster/uri"] == str(output_path(run.lake, MATERIALIZED))
        assert metadata["dagster/row_count"] > 0


def _platform_pass(backend: str, dagster_home: Path) -> PlatformRun:
    lake = f"s3://{BUCKET}/{backend}"
    env = {name: value for name, value in os.environ.items()
           if name not in ("CHRONOLAKE_SPARK_MASTER", "CHRONOLAKE_SPARK_REMOTE")}
    env |= {"CHRONOLAKE_BACKEND": backend, "CHRONOLAKE_LAKE": lake,
            "DAGSTER_HOME": str(dagster_home)}
    seconds: dict[str, float] = {}

    def timed(step: str, *command: str | Path) -> str:
        started = time.monotonic()
        done = subprocess.run([str(part) for part in command], cwd=REPO, env=env,
                              capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S,
                              check=False)
        seconds[step] = round(time.monotonic() - started, 1)
        assert done.returncode == 0, (
            f"{backend}: {step} failed\n{done.stdout[-3000:]}\n{done.stderr[-5000:]}")
        return done.stdout

    started = time.monotonic()
    build_demo_lake(lake)  # delta-rs writes the sources into the bucket
    seconds["build"] = round(time.monotonic() - started, 1)
    timed("declare", BIN / "chronolake", "sql", "--lake", lake, "-f", PLATFORM_SQL)
    ran = timed("run", BIN / "chronolake", "run", *VIEWS, "--lake", lake, "--with-upstream")
    feed_demo_lake(lake, seed=1, now=FED_AT)
    timed("dagster", BIN / "dagster", "asset", "materialize", "-m", "assets.definitions",
          "-d", ".", "--select", MATERIALIZED, "--partition", FED_AT.strftime("%Y-%m-%d"))
    queried = timed("query", BIN / "chronolake", "sql", "--lake", lake, "-e", QUERY,
                    "--format", "jsonl")
    shown = timed("status", BIN / "chronolake", "status", "--lake", lake, "--format", "json")
    print(f"{backend} on {lake}: {seconds} s")
    rows: dict[str, list[str]] = {view: [] for view in VIEWS}
    for line in queried.splitlines():
        row = json.loads(line)
        rows[row.pop("view_name")].append(json.dumps(row, sort_keys=True))
    return PlatformRun(
        lake=lake, ran=ran, rows={view: sorted(found) for view, found in rows.items()},
        status={row["name"]: row for row in map(json.loads, shown.splitlines())},
        dagster_home=dagster_home, seconds=seconds,
    )


def _latest_commit_info(table: LocationLike) -> dict:
    """The `commitInfo` of a table's latest commit, read from its log in the bucket."""
    log = Storage(table)
    latest = max(name for name in log.names("_delta_log") if name.endswith(".json"))
    actions = map(json.loads, (log.read_text(f"_delta_log/{latest}") or "").splitlines())
    return next(action["commitInfo"] for action in actions if "commitInfo" in action)
