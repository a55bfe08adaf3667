"""The README's tour, command by command, on a fresh demo lake (issue 20 item 7).

The commands are read from the README itself, so the tour a newcomer follows is the one
tested: each step runs in order, prints its result and nothing else, and what the README
shows as a step's output is what it prints (after the feed, whose times are today's, the
lines that name no time of today).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from _demo import demo_copy

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
TOUR_HEADING = "## The tour"

pytestmark = [pytest.mark.slow, pytest.mark.own_processes]


@dataclass(frozen=True)
class Step:
    """One shell block of the tour and the output block the README shows after it, if any."""

    commands: str
    shown: str | None


def tour_steps(readme: str) -> list[Step]:
    """The tour's shell blocks, in order, each with the text block that follows it."""
    start = readme.index(TOUR_HEADING)
    end = readme.find("\n## ", start + len(TOUR_HEADING))
    section = readme[start:end if end > 0 else None]
    blocks = re.findall(r"```(\w+)\n(.*?)```", section, flags=re.S)
    steps: list[Step] = []
    for (language, body), following in zip(blocks, [*blocks[1:], ("", "")], strict=True):
        if language == "sh":
            steps.append(Step(body, following[1] if following[0] == "text" else None))
    return steps


def _stable(output: str) -> list[str]:
    """The lines of an output that read the same whenever the tour runs: those with no
    figure at all, or naming no day but the demo's, 2 Nov 2026 (no time of today, no lag)."""
    return [line for line in output.splitlines()
            if not re.search(r"\d", line)
            or set(re.findall(r"\d{4}-\d{2}-\d{2}", line)) == {"2026-11-02"}]


def python_run(readme: str) -> str:
    """The README's Python block that runs a view."""
    return next(body for body in re.findall(r"```python\n(.*?)```", readme, flags=re.S)
                if "materialize_view(" in body)


@dataclass(frozen=True)
class Done:
    returncode: int
    stdout: str
    stderr: str


def _run(step: Step, *, lake: Path, scratch: Path, environment: dict[str, str]) -> Done:
    places = {".venv/bin/": f"{BIN}/", "demo-lake": str(lake), "/tmp/": f"{scratch}/"}
    script = re.sub("|".join(map(re.escape, places)), lambda m: places[m[0]], step.commands)
    done = subprocess.run(["bash", "-o", "pipefail", "-c", script], cwd=ROOT, env=environment,
                          capture_output=True, text=True, timeout=600)
    return Done(done.returncode, done.stdout, done.stderr)


def test_the_readme_tour_runs_in_order_and_prints_what_it_shows(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    readme = (ROOT / "README.md").read_text()
    steps = tour_steps(readme)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    # the tour's first step, `chronolake demo`: the run's one demo, copied
    demo = demo_copy(tmp_path_factory, tmp_path / "demo-lake", tmp_path / "dagster-home")
    lake = demo.lake
    environment = {**os.environ, "DAGSTER_HOME": str(demo.dagster_home), "COLUMNS": "80"}
    # the UI (step 5) is the browser test's: it runs until stopped
    status, waiting, unmatched, corrected, fed, completed, typo, own = [
        s for s in steps if "chronolake dev" not in s.commands
    ]

    def run(step: Step) -> Done:
        return _run(step, lake=lake, scratch=scratch, environment=environment)

    first = run(status)
    assert (first.returncode, first.stderr) == (0, "")
    enriched = next(line for line in first.stdout.splitlines()
                    if line.startswith("orders_enriched "))
    assert "2026-11-02" in enriched and " 661 " in enriched  # pending behind the rates

    hours = run(waiting)  # nothing complete: the 09:00 hour waits for the rates' watermark
    assert (hours.returncode, hours.stderr) == (0, "")
    assert hours.stdout == waiting.shown

    rates = run(unmatched)
    assert (rates.returncode, rates.stderr) == (0, "")
    assert rates.stdout == unmatched.shown

    amounts = run(corrected)
    assert (amounts.returncode, amounts.stderr) == (0, "")
    assert [row.split("│")[1].strip() for row in amounts.stdout.splitlines()
            if row.startswith("│ ") and row.split("│")[1].strip().isdigit()] == ["3", "4"]

    feed = run(fed)
    assert (feed.returncode, feed.stderr) == (0, "")
    assert feed.stdout.startswith("orders: rows appended 100, updated 1, deleted 1")
    assert "orders_enriched: run 2 committed" in feed.stdout
    assert "revenue_per_currency: run 2 committed" in feed.stdout

    complete = run(completed)  # every hour since 09:00 on 2 Nov, the current one open
    assert (complete.returncode, complete.stderr) == (0, "")
    assert completed.shown is not None
    assert _stable(complete.stdout) == _stable(completed.shown)
    [(count, last)] = re.findall(r"complete: (\d+) \(2026-11-02-09:00 … (\S+)\)",
                                 complete.stdout)
    last_start = datetime.strptime(last, "%Y-%m-%d-%H:%M")
    assert int(count) == (last_start - datetime(2026, 11, 2, 9)) // timedelta(hours=1) + 1
    # complete up to the watermark, which the feed moved to its latest order (today's)
    [stamp] = re.findall(r"watermark: (\S+ \S+)", complete.stdout)
    watermark = datetime.fromisoformat(stamp)
    assert last_start + timedelta(hours=1) <= watermark < last_start + timedelta(hours=2)
    assert datetime.now(UTC).replace(tzinfo=None) - watermark < timedelta(minutes=30)

    refused = run(typo)
    assert refused.returncode == 1 and refused.stdout == ""
    assert refused.stderr == typo.shown
    assert "big_orders_per_hour" not in run(status).stdout  # nothing was registered

    mine = run(own)
    assert mine.returncode == 0, mine.stderr
    assert "big_orders_per_hour: run 1 committed" in mine.stdout
    assert "2026-11-02 09:00:00" in mine.stdout  # the first hour, emitted
    assert mine.stderr.splitlines()[-1].startswith("-- dropped view big_orders_per_hour")

    # The run from Python that the README shows, through the package's faces.
    from_python = subprocess.run(
        [sys.executable, "-c", python_run(readme).replace('"demo-lake"', repr(str(lake)))],
        cwd=ROOT, env=environment, capture_output=True, text=True, timeout=600)
    assert from_python.returncode == 0, from_python.stderr
    assert "|currency|" in from_python.stdout  # the rates, as Spark shows them
    ran, refreshed = from_python.stdout.splitlines()[-2:]
    assert ran in ("committed", "up-to-date") and refreshed == "committed"
