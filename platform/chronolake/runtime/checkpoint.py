"""Checkpoints: what a derived table has consumed, its watermarks, and where its state is.

A run `n` first records its *intent* (the input versions it will read up to),
then writes output, side output and state, and last the checkpoint `n`: the commit
point. A run killed before that point is redone from checkpoint `n - 1` with the
same intent, so it reads exactly the same commits; the output and side-output
appends carry Delta application transactions (`app_id`, `n`) and are skipped when
already committed. Nothing is lost and nothing is written twice.

Intent and checkpoint are written put-if-absent (`write_text_if_absent`), never
renamed into place, so this holds with no lock and on object stores: two attempts
at run `n` (two hosts, or a frozen run whose lease was taken over) share the first
intent written, or the later one stops, and only one of them passes the commit
point. Each attempt keeps its state in a folder of its own
(`run-<n>/<attempt>/<role>`), so a losing attempt cannot spoil the winner's.

A full refresh is a run like any other whose intent says so: it starts every
input from scratch (from its last OVERWRITE, or from a snapshot when the older
history is gone), with no state, and *replaces* output, side output and history
(one Delta overwrite commit each, so readers see the old rows or the new, never
a mix). Redoing it after a crash replaces them again with the same rows.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from chronolake.lake.documents import write_text_if_absent
from chronolake.watermarks.assigner import WatermarkState

CHECKPOINT_PREFIX = "checkpoint-"
INTENT_PREFIX = "intent-"
RUN_PREFIX = "run-"


class InputPosition(BaseModel):
    """How far a run has read one input, and the input's watermarks there."""

    model_config = ConfigDict(frozen=True)

    version: int = Field(-1, description="Last Delta version consumed (-1: none yet).")
    watermarks: WatermarkState = Field(default_factory=WatermarkState)
    phase: str = Field(
        "changelog",
        description="changelog; snapshot (a hybrid source before its switch); bootstrap (a "
        "full refresh that reads the table at `version + 1` as inserts, then its changes).",
    )
    columns: dict[str, str] = Field(
        default_factory=dict,
        description="Declared physical columns and their Delta types at `version`, to tell a "
        "dropped or retyped source column from one that was always so.",
    )


class RunIntent(BaseModel):
    """The input versions run `run` reads up to: fixed before any data is read."""

    model_config = ConfigDict(frozen=True)

    run: int
    end_versions: dict[str, int]
    full_refresh: bool = Field(False, description="Rebuild from scratch, replacing output.")
    start: dict[str, InputPosition] = Field(
        default_factory=dict, description="A full refresh's start position per input."
    )


class Checkpoint(BaseModel):
    """The committed position of a derived table after run `run`."""

    model_config = ConfigDict(frozen=True)

    run: int = Field(0, description="Run number; 0 before the first run.")
    inputs: dict[str, InputPosition] = Field(default_factory=dict)
    watermark: int | None = Field(None, description="Output watermark (epoch ms).")
    horizon: int | None = Field(
        None, description="Versions at or below this time were cleaned from state (epoch ms)."
    )
    state: dict[str, str] = Field(
        default_factory=dict, description="State tables by role, relative to the store."
    )
    counters: dict[str, int] = Field(default_factory=dict, description="Cumulative figures.")
    finished_at: float | None = None


class CheckpointStore:
    """Checkpoints and intents of one derived table, under `_chronolake/state/<table>/`."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def latest(self) -> Checkpoint:
        runs = self._runs(CHECKPOINT_PREFIX)
        if not runs:
            return Checkpoint()
        return Checkpoint.model_validate_json(self._path(CHECKPOINT_PREFIX, runs[-1]).read_text())

    def intent(self, run: int) -> RunIntent | None:
        path = self._path(INTENT_PREFIX, run)
        return RunIntent.model_validate_json(path.read_text()) if path.exists() else None

    def write_intent(self, intent: RunIntent) -> RunIntent:
        """Record `intent` unless an intent of its run is there already; the recorded one."""
        path = self._path(INTENT_PREFIX, intent.run)
        if write_text_if_absent(path, intent.model_dump_json()):
            return intent
        return RunIntent.model_validate_json(path.read_text())

    def commit(self, checkpoint: Checkpoint) -> bool:
        """The commit point of a run: after this, the run counts as done. False, changing
        nothing, when another attempt at the same run passed it first.

        Then go the other attempts' state of this run, and the checkpoints, intents and
        state of runs before the previous one: all of them, since a run killed after its
        commit point leaves its predecessor's.
        """
        path = self._path(CHECKPOINT_PREFIX, checkpoint.run)
        if not write_text_if_absent(path, checkpoint.model_dump_json(indent=2)):
            return False
        for prefix in (CHECKPOINT_PREFIX, INTENT_PREFIX):
            for run in self._runs(prefix):
                if run < checkpoint.run - 1:
                    self._path(prefix, run).unlink(missing_ok=True)
        for folder in self.directory.glob(f"{RUN_PREFIX}*"):
            number = folder.name.removeprefix(RUN_PREFIX)
            if number.isdigit() and int(number) < checkpoint.run - 1:
                shutil.rmtree(folder, ignore_errors=True)
        kept = {Path(name).parent.name for name in checkpoint.state.values()}
        for attempt in self._attempt_dirs(checkpoint.run):
            if attempt.name not in kept:
                self.discard(attempt)
        return True

    def run_dir(self, run: int) -> Path:
        """The folder of run `run`'s state: one folder per attempt at it."""
        return self.directory / f"{RUN_PREFIX}{run:08d}"

    def state_dir(self, run: int, attempt: str) -> Path:
        """Where attempt `attempt` at run `run` writes its state tables."""
        return self.run_dir(run) / attempt

    def state_name(self, run: int, attempt: str, role: str) -> str:
        """Where attempt `attempt` at run `run` keeps state table `role`, relative to this
        store's directory (what a checkpoint records, so that a lake can be copied or moved)."""
        return self.state_dir(run, attempt).relative_to(self.directory).joinpath(role).as_posix()

    @staticmethod
    def discard(attempt_dir: Path) -> None:
        """Remove an attempt's state: one that lost, or is superseded."""
        shutil.rmtree(attempt_dir, ignore_errors=True)

    def _attempt_dirs(self, run: int) -> list[Path]:
        folder = self.run_dir(run)
        return [path for path in folder.iterdir() if path.is_dir()] if folder.is_dir() else []

    def _path(self, prefix: str, run: int) -> Path:
        return self.directory / f"{prefix}{run:08d}.json"

    def _runs(self, prefix: str) -> list[int]:
        if not self.directory.exists():
            return []
        return sorted(
            int(path.stem.removeprefix(prefix)) for path in self.directory.glob(f"{prefix}*.json")
        )

