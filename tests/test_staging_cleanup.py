"""Scratch left by killed writers is removed by the next write, and a live writer's never is.

A run killed with SIGKILL while Spark writes a table's files into staging leaves
its `.chronolake-staging-…` folder; the next run of the table removes it and
commits what a run that never crashed commits. Scratch is removed by who made it
(`chronolake.lake.scratch`), not by a lock: another process's staging folder
survives a write into the same table while that process lives.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from _crash import (
    REPO,
    SIGKILL_RETURNCODE,
    add_batch,
    build_tiny_lake,
    delta_rows,
    run_in_subprocess,
    same_rows,
)
from deltatables import unreferenced_files
from pyspark.sql import SparkSession

from chronolake import Catalog
from chronolake.catalog.checkpoint import Checkpoint, CheckpointStore
from chronolake.errors import SourceError
from chronolake.faults import FaultPoint
from chronolake.lake import DeltaRsBackend, backend_for
from chronolake.lake.in_place import MARKERS
from chronolake.lake.layout import output_path
from chronolake.lake.scratch import (
    FOREIGN_SCRATCH_TTL_S,
    STAGING_PREFIX,
    TEMP_PREFIX,
    Writer,
    sweep,
)
from chronolake.lake.staging import write_staged
from chronolake.lake.storage import Storage
from chronolake.runtime.derived import DerivedTable
from chronolake.runtime.result import RunStatus

VIEW = "orders_enriched"


def _debris(root: Path) -> list[str]:
    """Every scratch file or folder below `root`: chronolake's, delta-rs's, Spark's."""
    return sorted(
        str(p.relative_to(root)) for p in root.rglob("*")
        if p.name.startswith((STAGING_PREFIX, TEMP_PREFIX, "_temporary"))
        or p.name.endswith(".tmp")
    )


def _start(code: str, **kwargs: object) -> subprocess.Popen[str]:
    """A Python process running `code` with chronolake importable."""
    return subprocess.Popen(  # type: ignore[call-overload]
        [sys.executable, "-c", textwrap.dedent(code)], cwd=REPO, text=True,
        stdout=subprocess.PIPE, **kwargs,
    )


@pytest.mark.slow
@pytest.mark.spark
def test_a_run_killed_while_spark_writes_into_staging_is_redone_and_leaves_no_debris(
    spark: SparkSession, tmp_path: Path
) -> None:
    if not backend_for(spark).stages_output_files:
        pytest.skip(f"the {backend_for(spark).kind} backend stages no output files")
    template = tmp_path / "template"
    assert DerivedTable(build_tiny_lake(template, spark), VIEW).run().status is (
        RunStatus.COMMITTED
    )
    reference, lake = tmp_path / "reference", tmp_path / "lake"
    for root in (reference, lake):
        shutil.copytree(template, root)
        add_batch(root, 1)
    assert DerivedTable(Catalog(reference, spark), VIEW).run().status is RunStatus.COMMITTED

    killed = run_in_subprocess(lake, VIEW, fault=FaultPoint.IN_STAGING.value)
    assert killed.returncode == SIGKILL_RETURNCODE, killed.stderr[-3000:]
    left = _debris(lake)
    assert left and all(STAGING_PREFIX in name for name in left), left

    rerun = DerivedTable(Catalog(lake, spark), VIEW).run()
    assert (rerun.status, rerun.run) == (RunStatus.COMMITTED, 2)
    assert same_rows(
        delta_rows(spark, output_path(lake, VIEW)), delta_rows(spark, output_path(reference, VIEW))
    )
    assert _debris(lake) == []


@pytest.mark.slow
@pytest.mark.spark
def test_a_write_keeps_a_live_writers_staging_and_removes_a_killed_ones(
    spark: SparkSession, tmp_path: Path
) -> None:
    table = tmp_path / "table"
    backend = DeltaRsBackend(spark)
    rows = spark.createDataFrame([(1, "a")], "id BIGINT, label STRING")
    backend.append_dataframe(rows, table, app_id="t", app_version=1)
    stage = f"""
        import os, signal, sys
        from pathlib import Path
        from chronolake.lake.scratch import TEMP_PREFIX, scratch_name, staging_name
        table = Path({str(table)!r})
        folder = table / staging_name()
        (folder / "_temporary").mkdir(parents=True)
        (folder / "part-0.parquet").write_bytes(b"being written")
        (table / "_delta_log" / scratch_name(TEMP_PREFIX)).write_text("a commit")
        print(folder, flush=True)
        if sys.argv[1:] == ["kill"]:
            os.kill(os.getpid(), signal.SIGKILL)
        sys.stdin.read()  # writing until the test closes stdin
        """
    live = _start(stage, stdin=subprocess.PIPE)
    assert live.stdout is not None
    live_folder = Path(live.stdout.readline().strip())
    killed = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(stage), "kill"], cwd=REPO, text=True,
        capture_output=True, check=False,
    )
    assert killed.returncode == SIGKILL_RETURNCODE, killed.stderr
    killed_folder = Path(killed.stdout.strip())
    assert killed_folder.is_dir()
    try:
        assert backend.append_dataframe(rows, table, app_id="t", app_version=2) == 2
        assert not killed_folder.exists()
        assert live_folder.is_dir() and (live_folder / "part-0.parquet").exists()
        assert len(_debris(table)) == 3  # the live writer's folder, its `_temporary`, its commit
    finally:
        live.communicate("")
    backend.append_dataframe(rows, table, app_id="t", app_version=3)
    assert _debris(table) == []
    assert backend.snapshot(table).count() == 3


@pytest.mark.slow
@pytest.mark.spark
@pytest.mark.lake_contract
def test_a_write_removes_the_files_a_killed_write_left_in_the_table_and_keeps_a_live_ones(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Delta's JVM writer writes a table's files in place, and the delta-rs backend moves
    them in, before the commit names them: a writer killed in between leaves files no
    commit references, which the next write removes once that writer is gone."""
    table = tmp_path / "table"
    backend = backend_for(spark)
    rows = spark.createDataFrame([(1, "a")], "id BIGINT, label STRING")
    backend.append_dataframe(rows, table, app_id="t", app_version=1)
    write = f"""
        import os, signal, sys
        from pathlib import Path
        from chronolake.lake.in_place import writing_in_place
        from chronolake.lake.storage import Storage
        who, table = sys.argv[1], Path({str(table)!r})
        with writing_in_place(Storage(table)):
            files = [table / f"part-{{who}}.parquet", table / "day=1" / f"part-{{who}}.parquet"]
            for file in files:
                file.parent.mkdir(exist_ok=True)
                file.write_bytes(b"PAR1 rows PAR1")
            print(who, flush=True)
            if who == "killed":
                os.kill(os.getpid(), signal.SIGKILL)
            sys.stdin.read()  # still writing
        """
    live = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(write), "live"], cwd=REPO, text=True,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
    )
    try:
        assert live.stdout is not None and live.stdout.readline().strip() == "live"
        killed = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(write), "killed"], cwd=REPO, text=True,
            capture_output=True, check=False,
        )
        assert killed.returncode == SIGKILL_RETURNCODE, killed.stderr
        assert backend.append_dataframe(rows, table, app_id="t", app_version=2) == 2
        # Nothing goes while another writer may still be writing: its files have no commit.
        assert {f"{folder}part-{who}.parquet" for folder in ("", "day=1/")
                for who in ("killed", "live")} <= set(unreferenced_files(table))
    finally:
        live.send_signal(signal.SIGKILL)
        live.communicate()

    assert backend.append_dataframe(rows, table, app_id="t", app_version=3) == 3
    assert unreferenced_files(table) == []
    assert not Storage(table).objects(MARKERS)
    assert backend.snapshot(table).count() == 3


def test_a_checkpoint_write_removes_the_upload_a_killed_writer_left_once_older_than_any_write(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "state"
    store = CheckpointStore(Storage(folder))
    store.commit(Checkpoint(run=1))
    # What a writer killed in the middle of a document's write leaves on a local disk:
    # object_store's staged upload beside the document (`<name>#<n>`), whose writer is unknown.
    recent, old = folder / "checkpoint-00000002.json#0", folder / "intent-00000002.json#1"
    for staged in (recent, old):
        staged.write_text('{"run": 2')
    aged = time.time() - FOREIGN_SCRATCH_TTL_S - 60
    os.utime(old, (aged, aged))

    assert store.latest().run == 1  # neither is taken for a document
    assert store.commit(Checkpoint(run=2))

    assert recent.exists() and not old.exists()
    assert store.latest().run == 2


def test_scratch_of_another_host_or_writer_goes_only_once_older_than_any_write(
    tmp_path: Path,
) -> None:
    now_ms = int(time.time() * 1000)
    old_ms = now_ms - (FOREIGN_SCRATCH_TTL_S + 60) * 1000
    names = {
        "recent, other host": f"{STAGING_PREFIX}elsewhere.42.77.{now_ms}.a1",
        "old, other host": f"{STAGING_PREFIX}elsewhere.42.77.{old_ms}.b2",
        "recent, older chronolake": f"{STAGING_PREFIX}0123abcd",
        "old, older chronolake": f"{STAGING_PREFIX}4567cdef",
        "recent, delta-rs commit": "_commit_3f2a-9c.json.tmp",
        "old, delta-rs commit": "_commit_7b1d-0e.json.tmp",
    }
    for label, name in names.items():
        (tmp_path / name).mkdir() if STAGING_PREFIX in name else (tmp_path / name).touch()
        if label.startswith("old"):
            os.utime(tmp_path / name, (old_ms / 1000, old_ms / 1000))
    (tmp_path / "part-00000.parquet").touch()  # the table's own files are never scratch

    removed = {path.name for path in sweep(tmp_path)}

    assert removed == {name for label, name in names.items() if label.startswith("old")}
    assert (tmp_path / "part-00000.parquet").exists()


def test_scratch_of_a_process_id_reused_by_a_later_process_is_removed(tmp_path: Path) -> None:
    me = Writer.current()
    mine = tmp_path / f"{TEMP_PREFIX}{me.tag()}.c3"
    reused = Writer(me.host, me.pid, "1", me.made_ms)  # this pid, started long before us
    earlier = tmp_path / f"{TEMP_PREFIX}{reused.tag()}.d4"
    for path in (mine, earlier):
        path.touch()
    assert sweep(tmp_path) == ([earlier] if me.started else [])
    assert mine.exists()


def test_a_staged_file_that_is_not_parquet_stops_the_write_and_leaves_the_table_as_it_was(
    tmp_path: Path,
) -> None:
    """A file cut short (or of another format) in staging is refused with the file's name,
    before anything moves into the table; its staging folder goes all the same."""
    table = Storage(tmp_path / "table")

    def cut_short(folder: str) -> None:
        Path(folder).mkdir(parents=True)
        (Path(folder) / "part-00000.parquet").write_bytes(b"PAR1 and no footer")

    with pytest.raises(SourceError, match=r"part-00000\.parquet: not a readable Parquet file"):
        write_staged(table, cut_short)
    assert list((tmp_path / "table").iterdir()) == []
