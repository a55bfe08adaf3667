"""One attempt at the next run of derived table `enriched` in a lake on an object store.

Spark cannot write `s3a://` here (hadoop-aws comes from Maven), so pyarrow writes the run's
data files (as Spark does: a part file and `_SUCCESS` in the staging folder it is given) and
delta-rs its state table; everything else is what a Spark run goes through: the lease
(`run_lock`), the intent and commit point (`runtime.attempt`), the staging folder and the move
of its files into the output (`lake.staging`), their commit with the run's application
transaction (`lake.appends`), the checkpoint store, and the fault points. Run `n` reads
input version `n`: ids `10n..10n+2`.

Usage: python tests/_object_store_run.py <lake URI>; prints the run number it committed,
or the error (exit 1) when refused.
"""

from __future__ import annotations

import sys
from functools import partial
from uuid import uuid4

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import Schema, write_deltalake
from pyarrow.fs import FileSystem

from chronolake.catalog.checkpoint import Checkpoint, CheckpointStore, InputPosition, RunIntent
from chronolake.errors import RunError
from chronolake.faults import FaultPoint, fault_point
from chronolake.lake.appends import commit_appended, is_committed, open_or_create
from chronolake.lake.layout import lock_dir, output_path
from chronolake.lake.lock import run_lock
from chronolake.lake.staging import write_staged
from chronolake.lake.storage import Storage
from chronolake.runtime.attempt import RunPlan, begin_writing, pass_commit_point

VIEW = "enriched"
APP_ID = f"chronolake/{VIEW}"


def input_rows(version: int) -> pa.Table:
    """What input version `version` adds."""
    ids = [10 * version + i for i in range(3)]
    return pa.table({"order_id": ids, "usd": [float(i) * 1.5 for i in ids]})


def write_part_file(rows: pa.Table, folder: str) -> None:
    """What Spark's write of `rows` leaves in `folder`: a part file and `_SUCCESS`."""
    filesystem, path = FileSystem.from_uri(folder)
    pq.write_table(rows, f"{path}/part-00000-{uuid4().hex}.parquet", filesystem=filesystem)
    with filesystem.open_output_stream(f"{path}/_SUCCESS"):
        pass


def run(lake: str) -> int:
    store = CheckpointStore.of(lake, VIEW)
    with run_lock(lock_dir(lake), VIEW):
        committed = store.latest()
        number = committed.run + 1
        recorded = store.intent(number)
        intent = recorded or RunIntent(run=number, end_versions={"orders": number})
        plan = RunPlan(committed, intent, resumed=recorded is not None)
        begin_writing(store, VIEW, plan)
        fault_point(FaultPoint.AFTER_INTENT)
        rows = input_rows(plan.intent.end_versions["orders"])
        output = str(output_path(lake, VIEW))
        table = open_or_create(output, Schema.from_arrow(rows.schema), enable_cdf=True)
        if not is_committed(table, APP_ID, number):
            added = write_staged(Storage(output), partial(write_part_file, rows))
            commit_appended(table, output, added, app_id=APP_ID, app_version=number)
        fault_point(FaultPoint.AFTER_OUTPUT)
        state = store.state_name(number, plan.attempt, "pending")
        write_deltalake(str(store.location(state)), rows.slice(0, 1))
        fault_point(FaultPoint.BEFORE_CHECKPOINT)
        pass_commit_point(store, VIEW, plan, Checkpoint(
            run=number,
            inputs={"orders": InputPosition(version=plan.intent.end_versions["orders"])},
            state={"pending": state},
            counters={"rows_out": committed.counters.get("rows_out", 0) + rows.num_rows},
        ))
        fault_point(FaultPoint.AFTER_CHECKPOINT)
    return number


if __name__ == "__main__":
    try:
        print(run(sys.argv[1]), flush=True)
    except RunError as error:
        print(error, file=sys.stderr)
        sys.exit(1)
