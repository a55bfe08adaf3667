"""The reference platform's Dagster instance (`.dagster-home/`) and its `dagster.yaml`.

Telemetry off and no community pop-up in the UI, so that `dagster dev` in the tour starts
clean (and Dagster does not say that it found no dagster.yaml), and a run queue that
launches a run within a second. `./dev` writes it with
`python -m chronolake.dagster_home .dagster-home`; `chronolake demo` does when it makes
the home.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import yaml

from chronolake.lake.storage import Storage

DAGSTER_HOME = ".dagster-home"

INSTANCE_SETTINGS: dict[str, dict[str, Any]] = {
    "telemetry": {"enabled": False},
    "nux": {"enabled": False},
}
"""Dagster instance settings (`dagster._core.instance.config`): no usage statistics sent,
and no "new user experience" pop-up (the community invitation) in the UI."""

QUICK_QUEUE: dict[str, Any] = {
    "module": "dagster.core.run_coordinator",
    "class": "QueuedRunCoordinator",
    "config": {"dequeue_interval_seconds": 1},
}
"""The run queue of `dagster dev`, looked at every second instead of Dagster's default five:
a run launched from the UI otherwise waits 0-5 s in the queue, as long as a small run takes
(`benchmarks/ui_runs.py`). Set only where the instance configures no queue of its own."""
_QUEUE_SETTINGS = ("run_coordinator", "run_queue", "concurrency")


def write_instance_settings(home: Path) -> Path:
    """`home/dagster.yaml` holding `INSTANCE_SETTINGS`; a setting the file has stays as it is.
    Returns the file's path; leaves a file that has them all untouched."""
    home_storage, path = Storage(home), home / "dagster.yaml"
    settings = yaml.safe_load(home_storage.read_text(path.name) or "null") or {}
    merged = {**settings}
    for key, defaults in INSTANCE_SETTINGS.items():
        merged[key] = {**defaults, **(settings.get(key) or {})}
    if not any(key in settings for key in _QUEUE_SETTINGS):
        merged["run_coordinator"] = QUICK_QUEUE
    if merged != settings or not home_storage.exists(path.name):
        home_storage.write_text(path.name, yaml.safe_dump(merged, sort_keys=False))
    return path


if __name__ == "__main__":
    write_instance_settings(Path(sys.argv[1] if len(sys.argv) > 1 else DAGSTER_HOME))
