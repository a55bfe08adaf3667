"""Chaos: runs killed with SIGKILL at random points over many batches, some of them concurrent,
and every table the same as in a lake where nothing failed.

Two copies of the tiny lake (`_crash.build_tiny_lake`, every derived table run once) get the
same batches: each round appends orders and a rate change (and, every other round, a few
orders an hour late) to both. The chaos lake then starts runs of three tables that have work,
each in a subprocess (real Spark, real Delta), at once; each dies by SIGKILL at a named fault
point (`chronolake.faults`) or a random delay after it began writing (when the first
scratch its process names appears in the table's folders; until then a run has only read).
Every third round two of those runs are of one table, started together, one as `run()` and
one staged as the Dagster job runs it (prepare and compute without the lock, commit under it):
one commits and the other refuses with `RunError`, or finds nothing left to do; half the time
one of the two is killed too. After each round the chaos lake brings some tables up to date
and leaves others killed or behind, for a later round's runs to redo.

The fault-free reference runs a processing-time table after every batch, as the chaos lake
does (which rate its orders get depends on which batches a run reads), and each event-time
table once at the end: an event-time result does not depend on how runs group the batches,
so it is what the chaos lake's runs, however they grouped them, must give.

At the end each derived table of the chaos lake runs again without faults until it is up to
date, and then: every output and late side table equals the reference's row for row; each
checkpoint has read every input to its end, at the reference's source versions, with the same
watermark and pending rows; no scratch (staging folders, temporary files) and no state of old
runs remains; every run lock can be taken; every Delta table (sources, outputs, late rows,
history, state) is readable by delta-rs, as it was after every round.

The seed is printed (and in the summary at the end of the pytest run): set
`CHRONOLAKE_CHAOS_SEED` to repeat a plan (a kill after a delay lands where timing puts it), and
`CHRONOLAKE_CHAOS_ROUNDS` for a longer soak. With `CHRONOLAKE_TEST_LAKE` set to a bucket's URI
(`test_chaos_on_s3.py` does), the chaos lake is there and Spark writes it through S3A; the
fault-free one stays on the disk. Either way no data file is left that no commit names.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path, PurePosixPath

import pyarrow as pa
import pytest
from _crash import (
    EXERCISED,
    SIGKILL_RETURNCODE,
    ChaosFigures,
    add_batch,
    build_tiny_lake,
    delta_rows,
    finish,
    same_rows,
    start_run,
)
from _s3 import TEST_LAKE_ENV
from deltalake import DeltaTable
from deltatables import unreferenced_files
from pyspark.sql import SparkSession

from chronolake import Catalog, RunResult
from chronolake.catalog.checkpoint import RUN_PREFIX, CheckpointStore
from chronolake.demo.lake import DEMO_START, append_orders
from chronolake.faults import RUN_FAULT_POINTS, FaultPoint
from chronolake.lake.in_place import MARKERS, WriteMarker
from chronolake.lake.layout import late_path, lock_dir, output_path, state_path
from chronolake.lake.lock import run_lock
from chronolake.lake.log_reader import LOG
from chronolake.lake.scratch import SCRATCH_PREFIXES, writer_of
from chronolake.lake.storage import Storage
from chronolake.location import LocationLike, as_location
from chronolake.runtime.chain import behind, upstream_derived
from chronolake.runtime.derived import DerivedTable
from chronolake.runtime.result import RunStatus
from chronolake.sql.view_kinds import is_derived

SEED_ENV = "CHRONOLAKE_CHAOS_SEED"
ROUNDS_ENV = "CHRONOLAKE_CHAOS_ROUNDS"
DEFAULT_ROUNDS = 2
"""A concurrent round, then one with late orders: every kind of round, in CI's time."""
RUNS_PER_ROUND = 3
"""Subprocesses started together each round, a JVM each (~20 CPU-seconds)."""
CONCURRENT_EVERY = 3
WRITE_WINDOW_S = 2.0
"""A delayed kill lands up to this long after the run began writing (its writes take about
1.5 s here, so a few runs finish first: counted as runs, not kills)."""
CATCH_UP_RATE = 1 / 3
"""How often a round brings an event-time table up to date; the others stay behind."""
RUN_LIMIT = 4
"""Fault-free runs that bring a table up to date: a killed run's redo, then the rest."""
_POLL_S = 0.05
_REFUSED = ("chronolake.errors.RunError: ", "chronolake.errors.RunLockedError: ")
"""How a refused run's traceback ends: overtaken at its commit, or the lock held by another."""
_WHEN_READ = frozenset(
    {"proc_time", "source_commit_timestamp", "source_commit_version", "source_position",
     "_watermark"}
)
"""Columns of late rows that say when and where a run read them, not what they are."""


@dataclass(frozen=True)
class Attack:
    """A run the chaos lake starts in a subprocess, and how it dies: at `fault`, or `delay_s`
    after it began writing (neither: it runs to its end, or refuses)."""

    table: str
    fault: FaultPoint | None = None
    delay_s: float | None = None
    staged: bool = False

    def __str__(self) -> str:
        run = f"{'staged ' if self.staged else ''}{self.table}"
        if self.fault is not None:
            return f"{run} (kill at {self.fault.value})"
        if self.delay_s is not None:
            return f"{run} (kill {self.delay_s:.2f} s into its writes)"
        return run


@dataclass(frozen=True)
class Outcome:
    """How an attacked run ended."""

    attack: Attack
    process: subprocess.CompletedProcess[str]

    @property
    def killed(self) -> bool:
        return self.process.returncode == SIGKILL_RETURNCODE

    @property
    def result(self) -> RunResult | None:
        if self.process.returncode != 0:
            return None
        return RunResult.model_validate_json(self.process.stdout.splitlines()[-1])

    @property
    def refusal(self) -> str | None:
        """The `RunError` (or `RunLockedError`) the run stopped with, if it did."""
        lines = self.process.stderr.splitlines()
        return next((line for line in reversed(lines) if line.startswith(_REFUSED)), None)

    def __str__(self) -> str:
        if self.killed:
            return f"{self.attack}: killed"
        if (result := self.result) is not None:
            return f"{self.attack}: run {result.run} {result.status.value}"
        refusal = (self.refusal or "")[len(_REFUSED):].split(";")[0]
        return f"{self.attack}: exit {self.process.returncode} ({refusal})"


@dataclass(frozen=True)
class Lakes:
    """The lake the test attacks and the fault-free one; its derived tables, upstream first,
    and whether each is event-time."""

    chaos: LocationLike
    reference: Path
    views: list[str]
    event_time: dict[str, bool]


def _random_attack(rng: random.Random, table: str, *, staged: bool = False) -> Attack:
    if rng.random() < 0.5:
        return Attack(table, fault=rng.choice(RUN_FAULT_POINTS), staged=staged)
    return Attack(table, delay_s=rng.uniform(0, WRITE_WINDOW_S), staged=staged)


def _plan(rng: random.Random, due: list[str], *, concurrent: bool) -> list[Attack]:
    """The runs of one round, of tables with work to do: each of its own table, or
    (concurrent) the first two of one table, `run()` and staged, one attacked half the time."""
    tables = rng.sample(due, min(len(due), RUNS_PER_ROUND - concurrent))
    attacks = [_random_attack(rng, table) for table in tables]
    if concurrent and tables:
        pair = [Attack(tables[0]), Attack(tables[0], staged=True)]
        if rng.random() < 0.5:
            armed = rng.randrange(2)
            pair[armed] = _random_attack(rng, tables[0], staged=pair[armed].staged)
        rng.shuffle(pair)
        attacks[:1] = pair
    return attacks


def _writes_of(pid: int, folders: list[LocationLike]) -> bool:
    """Whether scratch or a write's marker of process `pid` is in `folders`: it began writing
    there."""
    for folder in folders:
        for stored in Storage(folder).objects():
            marker = WriteMarker.parse(stored)
            writers = [writer_of(name) for name in PurePosixPath(stored.key).parts]
            if marker is not None:
                writers.append(marker.writer)
            if any(writer is not None and writer.pid == pid for writer in writers):
                return True
    return False


def _kill_once_writing(process: subprocess.Popen[str], folders: list[LocationLike], delay_s: float
                       ) -> None:
    """SIGKILL `process` `delay_s` after it began writing into `folders`; nothing if it ends
    first."""
    while process.poll() is None:
        if _writes_of(process.pid, folders):
            time.sleep(delay_s)
            process.send_signal(signal.SIGKILL)  # a no-op once it has ended
            return
        time.sleep(_POLL_S)


def _start(lake: LocationLike, attacks: list[Attack]
           ) -> list[tuple[Attack, subprocess.Popen[str]]]:
    """Start every attack's run at once; a thread times each delayed kill."""
    started = []
    for attack in attacks:
        fault = None if attack.fault is None else attack.fault.value
        process = start_run(lake, attack.table, fault=fault, staged=attack.staged)
        if attack.delay_s is not None:
            folders = [output_path(lake, attack.table), late_path(lake, attack.table),
                       state_path(lake, attack.table)]
            threading.Thread(
                target=_kill_once_writing, args=(process, folders, attack.delay_s), daemon=True
            ).start()
        started.append((attack, process))
    return started


def _run(spark: SparkSession, lake: LocationLike, view: str) -> RunResult:
    return DerivedTable(Catalog(lake, spark), view).run()


def _catch_up(spark: SparkSession, lake: LocationLike, view: str) -> int:
    """Run `view` without faults until it is up to date; returns the runs that committed."""
    for committed in range(RUN_LIMIT):
        if _run(spark, lake, view).status is RunStatus.UP_TO_DATE:
            return committed
    pytest.fail(f"{view} in {lake} is still not up to date after {RUN_LIMIT} runs")


def _add_batch(root: LocationLike, batch: int) -> None:
    """`add_batch`, and on even batches three orders an hour before any watermark: late in
    every run, however runs group the batches."""
    add_batch(root, batch)
    if batch % 2 == 0:
        append_orders(as_location(root) / "orders", rng=random.Random(-batch),
                      first_id=100_000 + 10 * batch, count=3,
                      start=DEMO_START - timedelta(hours=1))


def _derived_in_order(catalog: Catalog) -> list[str]:
    """The lake's derived tables, each after the derived tables it reads."""
    derived = sorted(name for name, spec in catalog.specs().items() if is_derived(spec))
    ordered: list[str] = []
    for name in derived:
        ordered += [n for n in (*upstream_derived(catalog, name), name) if n not in ordered]
    return ordered


def _delta_tables(root: LocationLike) -> list[str]:
    """The Delta tables below `root`, as paths relative to it: folders whose log holds
    something. Not a removed table's empty S3A directory markers (its
    `_delta_log/_staged_commits/`), which outlive it on a bucket as `_scratch` says: no reader
    takes a log without commits for a table (`DeltaBackend.is_delta_table`)."""
    tables = set()
    for stored in Storage(root).objects():
        table, log, _ = f"/{stored.key}".partition(f"/{LOG}/")
        if log and stored.size > 0:
            tables.add(table.strip("/"))
    return sorted(tables)


def _unreadable(root: LocationLike) -> dict[str, str]:
    """The Delta tables below `root` that delta-rs cannot read, with the error: read by its
    own engine, which honours the deletion vectors Delta's MERGE writes (delta-spark)."""
    failed = {}
    for table in _delta_tables(root):
        try:
            rows = DeltaTable(str(as_location(root) / table)).scan()
            pa.RecordBatchReader.from_stream(rows).read_all()
        except Exception as error:  # noqa: BLE001 - whatever stops a reader is the finding
            failed[table] = repr(error)
    return failed


def _unreferenced(root: LocationLike) -> dict[str, list[str]]:
    """The data files of each Delta table below `root` that no commit names."""
    found = {table: unreferenced_files(as_location(root) / table) for table in _delta_tables(root)}
    return {table: files for table, files in found.items() if files}


def _scratch(root: LocationLike) -> list[str]:
    """Scratch anywhere below `root`: chronolake's, delta-rs's (`*.tmp`), Spark's, and the
    markers of writes that did not end. Not S3A's empty directory markers (`…/_temporary/0/`,
    made when Spark's job starts), which object_store lists without their trailing slash and
    cannot delete: an empty folder, no data (README, "Lake backends")."""
    return sorted(
        stored.key for stored in Storage(root).objects()
        if (any(part.startswith((*SCRATCH_PREFIXES, "_temporary")) or part == MARKERS
                for part in PurePosixPath(stored.key).parts) or stored.key.endswith(".tmp"))
        and not (stored.size == 0 and "_temporary" in PurePosixPath(stored.key).parts)
    )


def _stale_state(root: LocationLike, view: str) -> list[str]:
    """State nothing reads: folders of runs before the previous committed one, and of the
    last run's attempts other than the one its checkpoint names (killed ones). A folder whose
    objects are all empty holds none: on a bucket, S3A's directory markers (the
    `_delta_log/_staged_commits/` of a table Delta's writer made) outlive their folder, as
    `_scratch` says."""
    store = CheckpointStore.of(root, view)
    checkpoint = store.latest()
    runs = {store.run_dir(run) for run in (checkpoint.run - 1, checkpoint.run)}
    attempts = {PurePosixPath(name).parent.name for name in checkpoint.state.values()}
    last = store.run_dir(checkpoint.run)
    stale = [folder for folder in store.storage.folders()
             if folder.startswith(RUN_PREFIX) and folder not in runs]
    stale += [f"{last}/{a}" for a in store.storage.folders(last) if a not in attempts]
    return sorted(folder for folder in stale
                  if any(stored.size > 0 for stored in store.storage.objects(folder)))


def _position(spark: SparkSession, lake: LocationLike, view: str, *, event_time: bool
              ) -> dict[str, object]:
    """What `view`'s checkpoint says that does not depend on how runs grouped the batches:
    how far behind each input's end it is, the versions of source tables it read (a derived
    input's versions do depend on it), pending rows, and the watermark (a processing-time
    table's is the clock's)."""
    catalog = Catalog(lake, spark)
    checkpoint = CheckpointStore.of(lake, view).latest()
    inputs = DerivedTable(catalog, view).inputs
    ends = {
        name: catalog.backend.latest_version(catalog.table_path(spec.changelog_table))
        for name, spec in inputs.items()
    }
    return {
        "behind": {name: ends[name] - p.version for name, p in checkpoint.inputs.items()},
        "source_versions": {
            name: p.version for name, p in checkpoint.inputs.items()
            if not is_derived(catalog.spec(name))
        },
        "pending_rows": checkpoint.counters.get("pending_rows"),
        "watermark": checkpoint.watermark if event_time else None,
    }


def _lakes(spark: SparkSession, root: Path) -> Lakes:
    template = root / "template"
    catalog = build_tiny_lake(template, spark)
    views = _derived_in_order(catalog)
    for view in views:
        assert _run(spark, template, view).status is RunStatus.COMMITTED, view
    event_time = {view: DerivedTable(catalog, view).operator.event_time for view in views}
    bucket = os.environ.get(TEST_LAKE_ENV)
    lakes = Lakes(f"{bucket}/chaos" if bucket else root / "chaos", root / "reference", views,
                  event_time)
    shutil.copytree(template, lakes.reference)
    source, chaos = Storage(template), Storage(lakes.chaos)
    for stored in source.objects():
        chaos.write_bytes(stored.key, source.read_bytes(stored.key) or b"")
    return lakes


def _round(spark: SparkSession, lakes: Lakes, batch: int, rng: random.Random,
           figures: ChaosFigures) -> list[Outcome]:
    """One batch into both lakes, then a round of attacked runs in the chaos lake (and the
    reference's runs meanwhile, while the subprocesses start their JVMs)."""
    for lake in (lakes.chaos, lakes.reference):
        _add_batch(lake, batch)
    concurrent = batch % CONCURRENT_EVERY == 1  # the first round too: a one-round run has one
    due = behind(Catalog(lakes.chaos, spark), lakes.views)
    attacks = _plan(rng, due, concurrent=concurrent)
    started = _start(lakes.chaos, attacks)
    for view in lakes.views:
        if not lakes.event_time[view]:
            assert _run(spark, lakes.reference, view).status is RunStatus.COMMITTED, view
    outcomes = [Outcome(attack, finish(process)) for attack, process in started]
    pair = attacks[0].table if concurrent else None
    for outcome in outcomes:
        refused = outcome.attack.table == pair and outcome.refusal is not None
        assert outcome.killed or outcome.result is not None or refused, (
            f"seed {figures.seed}, round {batch}, {outcome}:\n{outcome.process.stderr[-3000:]}"
        )
        figures.fault_point_kills += outcome.killed and outcome.attack.fault is not None
        figures.timed_kills += outcome.killed and outcome.attack.fault is None
        figures.refused_runs += refused
    if concurrent:
        runs = [o.result.run for o in outcomes if o.attack.table == pair and o.result is not None
                and o.result.status is RunStatus.COMMITTED]
        assert len(runs) == len(set(runs)), f"seed {figures.seed}, round {batch}: {outcomes}"
        figures.concurrent_rounds += 1
    figures.subprocess_runs += len(outcomes)
    figures.rounds += 1
    return outcomes


@pytest.mark.slow
@pytest.mark.spark
@pytest.mark.own_processes  # the attacked runs are subprocesses
def test_runs_killed_at_random_points_leave_every_table_as_in_a_fault_free_lake(
    spark: SparkSession, tmp_path: Path
) -> None:
    began = time.monotonic()
    figures = EXERCISED.chaos
    figures.seed = seed = int(os.environ.get(SEED_ENV) or random.SystemRandom().randrange(2**31))
    rounds = int(os.environ.get(ROUNDS_ENV) or DEFAULT_ROUNDS)
    rng = random.Random(seed)
    print(f"chaos: seed {seed}, {rounds} rounds (repeat with {SEED_ENV}={seed})")
    lakes = _lakes(spark, tmp_path)
    chaos, reference = lakes.chaos, lakes.reference

    for batch in range(1, rounds + 1):
        outcomes = _round(spark, lakes, batch, rng, figures)
        print(f"round {batch} at {time.monotonic() - began:.0f} s: "
              + "; ".join(map(str, outcomes)))
        assert _unreadable(chaos) == {}, f"seed {seed}, round {batch}"
        if batch == rounds:  # no later round: every table is brought up to date below
            break
        for view in lakes.views:  # the others stay killed or behind until a later round
            if not lakes.event_time[view] or rng.random() < CATCH_UP_RATE:
                figures.runs += _catch_up(spark, chaos, view)
    for view in lakes.views:
        figures.runs += _catch_up(spark, chaos, view)
        assert _catch_up(spark, reference, view) <= 1, view
    figures.runs += figures.subprocess_runs

    for view in lakes.views:
        expected = delta_rows(spark, output_path(reference, view))
        assert same_rows(delta_rows(spark, output_path(chaos, view)), expected), (
            f"seed {seed}: {view}'s output differs from the fault-free lake's"
        )
        late, expected_late = (delta_rows(spark, late_path(lake, view)) for lake in (chaos,
                                                                                 reference))
        columns = [c for c in expected_late.columns if c not in _WHEN_READ]
        assert same_rows(late.select(*columns), expected_late.select(*columns)), (
            f"seed {seed}: {view}'s late rows differ from the fault-free lake's"
        )
        figures.rows_compared += expected.count() + expected_late.count()
        assert _position(spark, chaos, view, event_time=lakes.event_time[view]) == _position(
            spark, reference, view, event_time=lakes.event_time[view]
        ), f"seed {seed}: {view}'s checkpoint"
        assert _stale_state(chaos, view) == [], f"seed {seed}: {view}"
        with run_lock(lock_dir(chaos), view):  # nobody holds it
            pass
    assert _scratch(chaos) == [], f"seed {seed}"
    assert _unreferenced(chaos) == {}, f"seed {seed}"
    tables = _delta_tables(chaos)
    assert _unreadable(chaos) == {}, f"seed {seed}"
    assert {"orders", "_chronolake/views/latest_rates", "_chronolake/late/orders_enriched",
            "_chronolake/state/orders_enriched/history"} <= set(tables)
    assert any("/run-" in table for table in tables)  # and state
    figures.seconds = time.monotonic() - began
    print(f"{figures.line()}; {len(tables)} Delta tables read")
