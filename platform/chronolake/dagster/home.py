"""The reference platform's Dagster instance (`.dagster-home/`) and its `dagster.yaml`.

Telemetry off and no community pop-up in the UI, so that `dagster dev` in the tour starts
clean (and Dagster does not say that it found no dagster.yaml), and runs launched at once
into processes started ahead of them.
`./dev` writes it with `python -m chronolake.dagster.home .dagster-home`; `chronolake demo`
does when it makes the home.
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

IMMEDIATE_LAUNCH: dict[str, Any] = {
    "module": "dagster.core.run_coordinator",
    "class": "DefaultRunCoordinator",
}
"""How `dagster dev` starts a run: at once, from the UI's request, instead of through Dagster's
queue, which its daemon looks at every few seconds (five by default, one at the least). With
a one-second queue the gain was within the noise of `benchmarks/ui_runs.py`; this is the
simpler path. A second run of the same table started meanwhile is refused by the table's run
lock, not queued. Set only where the instance configures no queue of its own."""
PREWARMED_LAUNCH: dict[str, Any] = {
    "module": "chronolake.dagster.run_launcher",
    "class": "PrewarmedRunLauncher",
}
"""How a run's process starts: one that imported what runs need before the launch
(`chronolake.dagster.run_launcher`), instead of a fresh one per run from the code server. Set only
where the instance names no run launcher of its own."""
_QUEUE_SETTINGS = ("run_coordinator", "run_queue", "concurrency")
_EARLIER_DEFAULT = {
    "module": "dagster.core.run_coordinator",
    "class": "QueuedRunCoordinator",
    "config": {"dequeue_interval_seconds": 1},
}
"""The queue earlier versions wrote as their default: replaced, as not the user's choice."""
_EARLIER_LAUNCH = {**PREWARMED_LAUNCH, "module": "chronolake.run_launcher"}
"""Where the launcher lived before the package's tiers: replaced by where it is now."""


def write_instance_settings(home: Path) -> Path:
    """`home/dagster.yaml` holding `INSTANCE_SETTINGS`; a setting the file has stays as it is.
    Returns the file's path; leaves a file that has them all untouched."""
    home_storage, path = Storage(home), home / "dagster.yaml"
    settings = yaml.safe_load(home_storage.read_text(path.name) or "null") or {}
    merged = {**settings}
    for key, defaults in INSTANCE_SETTINGS.items():
        merged[key] = {**defaults, **(settings.get(key) or {})}
    ours = settings.get("run_coordinator") == _EARLIER_DEFAULT
    if ours or not any(key in settings for key in _QUEUE_SETTINGS):
        merged["run_coordinator"] = IMMEDIATE_LAUNCH
    if settings.get("run_launcher") in (None, _EARLIER_LAUNCH):
        merged["run_launcher"] = PREWARMED_LAUNCH
    if merged != settings or not home_storage.exists(path.name):
        home_storage.write_text(path.name, yaml.safe_dump(merged, sort_keys=False))
    return path


if __name__ == "__main__":
    write_instance_settings(Path(sys.argv[1] if len(sys.argv) > 1 else DAGSTER_HOME))
