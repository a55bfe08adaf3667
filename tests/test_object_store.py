"""A lake on an object store: the run protocol against an S3 emulator (moto's server).

The catalog, leases, intents, checkpoints and the Delta commits chronolake writes itself go
through `chronolake.lake.storage`; the output's data files go through the same staging folder,
move and commit as Spark's in a run (`chronolake.lake.staging`, `chronolake.lake.appends`), and
delta-rs writes the state tables.
S3 has no rename: everything here holds by put-if-absent writes alone.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path, PurePosixPath
from uuid import uuid4

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from _object_store_run import APP_ID, VIEW, input_rows
from _orders_and_rates import ORDERS_AND_RATES
from _s3 import BUCKET
from click.testing import CliRunner
from dagster import AssetKey, DagsterInstance, Definitions, build_sensor_context
from deltalake import CommitProperties, DeltaTable, Schema, write_deltalake
from deltatables import table_rows
from pyarrow.fs import FileSystem
from pyspark.sql import SparkSession

from chronolake import Catalog
from chronolake.catalog.checkpoint import CheckpointStore
from chronolake.cli.app import main as cli
from chronolake.dagster import (
    LakeResource,
    chronolake_asset_checks,
    chronolake_assets,
    local_pyspark_resource,
)
from chronolake.errors import DefinitionError
from chronolake.lake import DeltaRsBackend
from chronolake.lake.appends import commit_appended, open_or_create
from chronolake.lake.files import file_uri
from chronolake.lake.layout import lock_dir, output_path
from chronolake.lake.lock import LEASE_TTL_S, lease_name
from chronolake.lake.scratch import STAGING_PREFIX
from chronolake.lake.staging import write_staged
from chronolake.lake.storage import Storage, missing
from ops import JOBS, sensors

REPO = Path(__file__).resolve().parents[1]
RUN = REPO / "tests" / "_object_store_run.py"
SIGKILLED = -signal.SIGKILL


@pytest.fixture
def lake(s3: str) -> str:
    return f"s3://{BUCKET}/{uuid4().hex[:12]}"


def test_documents_are_created_once_and_replaced_whole(lake: str) -> None:
    storage = Storage(lake)
    with ThreadPoolExecutor(8) as pool:
        created = list(pool.map(lambda i: storage.create_text("c/doc.json", f"writer {i}"),
                                range(8)))
    assert created.count(True) == 1  # of eight writers of one name, exactly one
    assert storage.read_text("c/doc.json") == f"writer {created.index(True)}"
    storage.write_text("c/doc.json", "replaced")
    storage.write_text("c/d/inner.json", "{}")
    assert storage.read_text("c/doc.json") == "replaced"
    assert (storage.names("c"), storage.folders("c")) == (["doc.json"], ["d"])
    assert storage.read_text("c/none.json") is None and not storage.exists("c/none.json")

    storage.delete_tree("c/d")
    storage.delete("c/doc.json")

    assert not storage.holds("c")


def test_a_catalog_declares_reads_and_drops_on_an_object_store(lake: str) -> None:
    catalog = Catalog(lake)
    catalog.declare(ORDERS_AND_RATES + _ENRICHED)
    subprocess.run([sys.executable, str(RUN), lake], check=True, capture_output=True)

    assert Catalog(lake).names() == ["enriched", "orders", "rates"]
    assert str(Catalog(lake).table_path(Catalog(lake).spec("orders"))) == f"{lake}/orders"
    with pytest.raises(DefinitionError, match="view enriched reads it"):
        catalog.declare("DROP TABLE orders;")
    catalog.declare(f"DROP VIEW {VIEW};")  # under its lease; its output and state go too

    storage = Storage(lake)
    assert Catalog(lake).names() == ["orders", "rates"]
    assert not storage.holds(f"_chronolake/views/{VIEW}")
    assert not storage.holds(f"_chronolake/state/{VIEW}")
    assert storage.names("_chronolake/locks") == []


@pytest.mark.slow
def test_runs_commit_exactly_once_through_kills_redos_and_concurrent_attempts(lake: str) -> None:
    assert _run(lake).stdout.strip() == "1"
    output = Storage(output_path(lake, VIEW))
    for point in ("after_intent", "in_staging", "after_output", "before_checkpoint"):
        killed = _run(lake, fault=point, check=False)
        assert killed.returncode == SIGKILLED, killed.stderr
        assert _checkpoint(lake)["run"] == _committed(lake)  # nothing counted twice yet
        if point == "in_staging":  # its files stay in its staging folder, out of the table
            assert _staging(output) and output.sizes(_staging(output)[0])
    for _ in range(4):  # each killed run is redone: no run is lost in between
        _run(lake)
    assert _committed(lake) == 5

    together = [_start(lake) for _ in range(2)]  # two runs started at the same moment
    results = [(p.wait(120), p.communicate()) for p in together]
    assert [code for code, _ in results].count(0) >= 1
    for code, (_, err) in results:
        assert code == 0 or "another run of 'enriched' is in progress" in err, err

    stalled = _start(lake, fault="before_checkpoint:stop")  # holds its lease, then freezes
    _wait_until_stopped(stalled)
    _expire_lease(lake)  # as when its host is cut off: the lease ages past its TTL
    taken_over = _run(lake)
    os.kill(stalled.pid, signal.SIGCONT)
    _, err = stalled.communicate(timeout=120)
    assert stalled.returncode == 1
    assert f"run {taken_over.stdout.strip()} was committed by another run" in err

    runs = _committed(lake)
    ids = sorted(table_rows(output_path(lake, VIEW))["order_id"].to_pylist())
    expected = sorted(i for run in range(1, runs + 1)
                      for i in input_rows(run)["order_id"].to_pylist())
    assert ids == expected  # every run's rows, each once
    assert DeltaTable(str(output_path(lake, VIEW))).transaction_version(APP_ID) == runs
    checkpoint = _checkpoint(lake)
    assert checkpoint["counters"]["rows_out"] == len(expected)
    store = CheckpointStore.of(lake, VIEW)
    assert store.storage.folders() == [store.run_dir(runs - 1), store.run_dir(runs)]
    winner = PurePosixPath(checkpoint["state"]["pending"]).parent.name
    assert store.storage.folders(store.run_dir(runs)) == [winner]  # the stalled one's is gone
    assert DeltaTable(str(store.location(checkpoint["state"]["pending"]))).version() == 0
    assert Storage(lock_dir(lake)).names() == []  # no lease left behind
    assert _staging(output) == []  # the killed write's folder went with the next write


def test_the_embedded_backend_reads_a_tables_log_on_an_object_store(
    lake: str, spark: SparkSession
) -> None:
    """What the delta-rs backend reads itself (the commits, past a checkpoint) comes from the
    bucket through the storage layer, as from a local folder."""
    uri = f"{lake}/events"
    for batch in range(3):
        write_deltalake(uri, pa.table({"id": [batch]}), mode="append",
                        commit_properties=CommitProperties(custom_metadata={"batch": str(batch)}))
    DeltaTable(uri).create_checkpoint()
    write_deltalake(uri, pa.table({"id": [3]}), mode="append")
    backend = DeltaRsBackend(spark)

    commits = backend.commits(uri, 1)

    assert [(c.version, c.operation, c.is_data_change) for c in commits] == [
        (1, "WRITE", True), (2, "WRITE", True), (3, "WRITE", True)
    ]
    assert backend.commit_infos(uri, 2, 2)[2]["batch"] == "2"
    assert (backend.is_delta_table(uri), backend.latest_version(uri)) == (True, 3)


def test_files_in_escaped_partition_folders_are_staged_committed_and_found(lake: str) -> None:
    """A partition value Spark escapes in its folder's name (`10:00` in `dt=10%3A00`): the
    staged file moves into that folder, is committed with the value, and is found there."""
    uri = f"{lake}/by_time"
    table = open_or_create(uri, Schema.from_arrow(pa.schema([("id", pa.int64()),
                                                              ("dt", pa.string())])),
                           partition_by=["dt"])
    rows = pa.table({"id": [1, 2]})

    def as_spark_writes(where: str) -> None:  # the value escaped in the folder's name
        filesystem, folder = FileSystem.from_uri(where)
        pq.write_table(rows, f"{folder}/dt=10%3A00/part-00000.parquet", filesystem=filesystem)

    added = write_staged(Storage(uri), as_spark_writes)
    commit_appended(table, uri, added, app_id="t", app_version=1)

    assert [a.partition_values for a in added] == [{"dt": "10:00"}]
    stored = table_rows(uri).to_pylist()
    assert sorted((r["id"], r["dt"]) for r in stored) == [(1, "10:00"), (2, "10:00")]
    logged = pa.table(DeltaTable(uri).get_add_actions(flatten=False))["path"].to_pylist()
    files = [file_uri(uri, path) for path in logged]  # where the backend has Spark read them
    assert all("/dt=10%3A00/" in f for f in files) and missing(files) == set()
    assert missing([f"{uri}/dt=10%3A00/part-gone.parquet"]) == {
        f"{uri}/dt=10%3A00/part-gone.parquet"}


def test_a_code_location_on_a_bucket_shows_its_assets_observes_and_senses_new_versions(
    lake: str,
) -> None:
    """Dagster pointed at a lake on an object store (`LakeResource(root="s3://…")`): every
    catalog entry is an asset located in the bucket, observing a source reads its Delta version
    there, and the platform's sensor asks for a run once per new version."""
    Catalog(lake).declare(ORDERS_AND_RATES + _ENRICHED)
    orders = f"{lake}/orders"
    write_deltalake(orders, pa.table({"order_id": [1, 2]}))
    write_deltalake(f"{lake}/rates", pa.table({"currency": ["EUR"]}))
    resource = LakeResource(root=lake)
    definitions = Definitions(
        assets=chronolake_assets(lake), jobs=JOBS, sensors=sensors(resource.location),
        resources={"lake": resource, "pyspark": local_pyspark_resource()},
    )
    instance = DagsterInstance.ephemeral()

    located = {spec.key.path[-1]: spec.metadata.get("dagster/uri")
               for spec in definitions.resolve_all_asset_specs()}
    assert located == {"orders": orders, "rates": f"{lake}/rates",
                       VIEW: str(output_path(lake, VIEW))}
    assert {c.asset_key.path[-1] for check in chronolake_asset_checks(lake)
            for c in check.check_specs} == {"orders", "rates", VIEW}  # the join keeps order_id
    observed = definitions.resolve_job_def("observe_sources").execute_in_process(
        instance=instance
    )
    assert observed.success
    [version] = [e.asset_observation_data.asset_observation.data_version
                 for e in observed.get_asset_observation_events()
                 if e.asset_key == AssetKey("orders")]
    assert version == "0"

    sensor = definitions.resolve_sensor_def("new_delta_versions")
    first = sensor.evaluate_tick(build_sensor_context(instance=instance))
    assert [r.run_key for r in first.run_requests] == ["refresh_views:orders@0,rates@0"]
    quiet = sensor.evaluate_tick(build_sensor_context(instance=instance, cursor=first.cursor))
    assert quiet.run_requests == [] and quiet.skip_message
    write_deltalake(orders, pa.table({"order_id": [3]}), mode="append")
    moved = sensor.evaluate_tick(build_sensor_context(instance=instance, cursor=first.cursor))
    assert [r.run_key for r in moved.run_requests] == ["refresh_views:orders@1,rates@0"]


def test_the_cli_declares_into_and_shows_a_lake_on_a_bucket(lake: str, tmp_path: Path) -> None:
    """`--lake s3://…`: a script declares the lake's tables and view there, `status` shows where
    the view's last run left it, and a prefix without a lake is refused and left empty."""
    ddl = tmp_path / "platform.sql"
    ddl.write_text(ORDERS_AND_RATES + _ENRICHED)
    declared = CliRunner().invoke(cli, ["sql", "--lake", lake, "-f", str(ddl)])
    assert declared.exit_code == 0, declared.output
    assert f"-- registered view {VIEW}" in declared.output
    _run(lake)

    shown = CliRunner().invoke(cli, ["status", "--lake", lake, "--format", "json"])

    assert shown.exit_code == 0, shown.output
    rows = {row["name"]: row for row in map(json.loads, shown.output.splitlines())}
    assert sorted(rows) == ["enriched", "orders", "rates"]
    assert (rows[VIEW]["what"], rows[VIEW]["last_run"]) == ("view", 1)
    empty = f"{lake}-nothing"
    refused = CliRunner().invoke(cli, ["status", "--lake", empty])
    assert refused.exit_code == 1
    assert refused.output.startswith(f"error: no lake at {empty}: it holds no chronolake")
    unreachable = CliRunner().invoke(cli, ["status", "--lake", "s3://no-such-bucket/lake"])
    assert unreachable.exit_code == 1
    assert unreachable.output.startswith(
        "error: the lake at s3://no-such-bucket/lake could not be read or written: ")
    assert len(unreachable.output.splitlines()) == 1  # no traceback
    usage = CliRunner().invoke(cli, ["sql", "--lake", lake, "-f", str(ddl), "-e", "SELECT 1"])
    assert usage.exit_code == 2  # the SQL: -f or -e, not both (neither: the shell, or stdin)
    assert usage.output.endswith("Error: expected the SQL in a file (-f FILE, '-' for standard "
                                 "input) or on the command line (-e SQL), found both\n")


_ENRICHED = (f"CREATE VIEW {VIEW} AS SELECT o.order_id, o.amount * r.rate AS usd FROM orders "
             "AS o JOIN rates FOR SYSTEM_TIME AS OF o.order_time AS r "
             "ON o.currency = r.currency;")


def _staging(table: Storage) -> list[str]:
    return [name for name in table.folders() if name.startswith(STAGING_PREFIX)]


def _run(lake: str, *, fault: str = "", check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([sys.executable, str(RUN), lake], capture_output=True, text=True,
                          env={**os.environ, "CHRONOLAKE_FAULT": fault}, check=False)
    if check:
        assert done.returncode == 0, done.stderr[-3000:]
    return done


def _start(lake: str, *, fault: str = "") -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, str(RUN), lake], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "CHRONOLAKE_FAULT": fault})


def _checkpoint(lake: str) -> dict:
    store = CheckpointStore.of(lake, VIEW)
    return json.loads(store.latest().model_dump_json())


def _committed(lake: str) -> int:
    return CheckpointStore.of(lake, VIEW).latest().run


def _wait_until_stopped(process: subprocess.Popen[str]) -> None:
    stat = Path(f"/proc/{process.pid}/stat")
    deadline = time.monotonic() + 120
    while process.poll() is None and time.monotonic() < deadline:
        if stat.read_text().rsplit(")", 1)[1].split()[0] == "T":
            return
        time.sleep(0.05)
    pytest.fail(f"the run never stopped at its fault point: {process.communicate()[1]}")


def _expire_lease(lake: str) -> None:
    locks, name = Storage(lock_dir(lake)), lease_name(VIEW)
    fields = json.loads(locks.read_text(name) or "{}")
    fields["renewed_ms"] -= int(LEASE_TTL_S * 1000) + 1
    locks.write_text(name, json.dumps(fields))
