"""`chronolake run orders_enriched` on a trivial lake with two versions of the code, interleaved.

A change's effect on a run's fixed cost is smaller than this machine's drift over an hour, so
the two versions take turns, the first of each round alternating: each round builds a fresh
lake (one order, one rate, the reference platform's catalog) for each, and runs it in a fresh
process with that version's `platform/` first on `PYTHONPATH`. Reports each version's median
and their ratio.

    git worktree add /tmp/before <rev>
    .venv/bin/python benchmarks/cli_before_after.py --before /tmp/before --repeat 4
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from run_overhead import ROOT, _tiny_lake

RUN = "import sys; from chronolake.cli.app import main; sys.argv[0] = 'chronolake'; main()"


def _run_seconds(code: Path, lake: Path) -> float:
    env = {**os.environ, "PYTHONPATH": str(code / "platform")}
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", RUN, "run", "--lake", str(lake), "orders_enriched"],
                   env=env, check=True, capture_output=True, cwd=ROOT)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, required=True, help="A checkout of the old code.")
    parser.add_argument("--repeat", type=int, default=4, help="Rounds (each runs both).")
    args = parser.parse_args()
    versions = {"before": args.before.resolve(), "after": ROOT}
    seconds: dict[str, list[float]] = {label: [] for label in versions}
    with tempfile.TemporaryDirectory() as folder:
        for round_number in range(args.repeat):
            turns = list(versions.items())
            for label, code in turns if round_number % 2 == 0 else reversed(turns):
                lake = Path(folder) / f"{label}-{round_number}"
                _tiny_lake(lake)
                seconds[label].append(_run_seconds(code, lake))
    medians = {label: statistics.median(values) for label, values in seconds.items()}
    for label, values in seconds.items():
        print(f"{label}: median {medians[label]:.2f} s ({', '.join(f'{v:.2f}' for v in values)})")
    print(f"after / before: {medians['after'] / medians['before']:.3f}")


if __name__ == "__main__":
    main()
