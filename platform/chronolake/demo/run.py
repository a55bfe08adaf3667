"""`chronolake demo`: build the demo lake, then materialize the reference platform once."""

from __future__ import annotations

import os
from pathlib import Path

from dagster import (
    DagsterInstance,
    Definitions,
)
from dagster._core.code_pointer import ModuleCodePointer  # how Dagster loads a module
from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from chronolake.dagster.home import DAGSTER_HOME, write_instance_settings
from chronolake.dagster.resources import DECLARE_JOB
from chronolake.demo.lake import build_demo_lake
from chronolake.errors import DefinitionError

DEMO_JOBS = (
    DECLARE_JOB, "observe_sources", "refresh_hourly_views", "refresh_views", "refresh_daily_views"
)
"""The set-up (the platform's DDL declared in the lake), then a first run of everything, upstream
first: `refresh_views` runs `revenue_per_currency`, which reads the hourly `orders_enriched`."""


_QUIET_CONSOLE = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}
"""Dagster's step events stay in the run's page; a failure reaches the terminal as the error
the demo raises, in a few lines."""


def load_platform(project: Path, lake: Path) -> Definitions:
    """The reference platform's Definitions, loaded from `project` as `dagster dev -w
    workspace.yaml` loads them (Dagster's loader, with `project` as the working directory)."""
    os.environ["CHRONOLAKE_LAKE"] = str(lake)
    if not (project / "assets" / "definitions.py").exists():
        raise DefinitionError(
            f"no reference platform at {project}: expected assets/definitions.py there; "
            "run `chronolake demo` from the repository root or pass --project"
        )
    pointer = ModuleCodePointer("assets.definitions", "defs", str(project))
    defs = pointer.load_target()
    if not isinstance(defs, Definitions):
        raise DefinitionError(f"{project}/assets/definitions.py: `defs` is a "
                              f"{type(defs).__name__}, not Dagster's Definitions")
    return defs


def run_demo(project: Path, lake: Path) -> None:
    """Build the demo lake under `lake`; materialize every asset, recorded in `.dagster-home/`."""
    console = Console(stderr=True)
    home = Path(os.environ.setdefault("DAGSTER_HOME", str(project / DAGSTER_HOME)))
    if home == project / DAGSTER_HOME or not home.exists():  # ours, not a user's instance
        write_instance_settings(home)
    home.mkdir(parents=True, exist_ok=True)
    columns = (SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn())
    with Progress(*columns, console=console) as progress:
        step = progress.add_task("building the demo lake", total=3)
        versions = build_demo_lake(lake)
        progress.update(step, advance=1, description="loading the reference platform")
        defs = load_platform(project, lake)
        instance = DagsterInstance.get()
        progress.update(step, advance=1, description="observing sources, running views")
        materialized = 0
        for job in DEMO_JOBS:
            result = defs.resolve_job_def(job).execute_in_process(
                instance=instance, run_config=_QUIET_CONSOLE
            )
            materialized += len(result.get_asset_materialization_events())
        progress.update(step, advance=1, description="done")
    console.print(f"demo lake at [bold]{lake}[/] (Delta versions: {versions})")
    console.print(
        f"materialized {materialized} assets; "
        f"see them with: DAGSTER_HOME={home} .venv/bin/chronolake dev",
        soft_wrap=True,  # a command to copy: one line whatever the terminal's width
    )

