"""What a run pays to bind its derived table's operator plan, against reading the kept one.

On a copy of a lake whose derived tables have run (the demo lake after `./dev demo`), for each
derived table, `--repeat` times each, medians, in one process with a warm local Spark session:

- bound: its query bound to the specs of what it reads (`bind_plan` over
  `Catalog.operator_inputs`), what every run did before plans were kept;
- kept: `Catalog.operator_plan` once a run kept the plan in its catalog entry, what a run
  does now (it reads the entries and compares the digests of the registrations read).

Both must give the same plan, else exit 1.
Usage: `.venv/bin/python benchmarks/plan_binding.py --lake demo-lake --repeat 5`.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from chronolake import Catalog
from chronolake.schema import ViewSpec
from chronolake.spark.session import local_spark_session
from chronolake.sql.operations import OperatorPlan
from chronolake.sql.operator_plan import bind_plan
from chronolake.sql.view_kinds import is_derived


def _timed(work: Callable[[], OperatorPlan], repeat: int) -> tuple[float, OperatorPlan]:
    """The median seconds of `work`, and what it gave last."""
    seconds = []
    for _ in range(repeat):
        began = time.perf_counter()
        plan = work()
        seconds.append(time.perf_counter() - began)
    return statistics.median(seconds), plan


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lake", type=Path, default=Path("demo-lake"))
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    spark = local_spark_session()
    spark.range(1).count()  # the JVM started and warm before any timing
    differ = []
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch) / "lake"
        shutil.copytree(args.lake, root)
        catalog = Catalog(root, spark)
        views = [s for s in catalog.specs().values() if isinstance(s, ViewSpec) and is_derived(s)]
        for view in sorted(views, key=lambda v: v.name):
            catalog.keep_plan(view, catalog.operator_plan(view))
            bound, plan = _timed(
                lambda view=view: bind_plan(view, catalog.operator_inputs(view.query)),
                args.repeat,
            )
            kept, stored = _timed(lambda view=view: catalog.operator_plan(view).plan, args.repeat)
            if plan != stored:
                differ.append(view.name)
            print(f"{view.name:<26} bound {bound * 1000:7.1f} ms   kept {kept * 1000:7.1f} ms   "
                  f"bound / kept {bound / kept:5.1f}x")
    if differ:
        print(f"the kept plan differs from the one bound: {differ}", file=sys.stderr)
    return 1 if differ else 0


if __name__ == "__main__":
    raise SystemExit(main())
