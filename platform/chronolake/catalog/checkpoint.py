"""Checkpoints: what a derived table has consumed, its watermarks, and where its state is.

A run `n` first records its *intent* (the input versions it will read up to),
then writes output, side output and state, and last the checkpoint `n`: the commit
point. A run killed before that point is redone from checkpoint `n - 1` with the
same intent, so it reads exactly the same commits; the output and side-output
appends carry Delta application transactions (`app_id`, `n`) and are skipped when
already committed. Nothing is lost and nothing is written twice.

Intent and checkpoint are written put-if-absent (`Storage.create_text`), never
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

A restatement is a run too: its intent names the restated range, and it rewrites only the
region of the output that depends on it (`chronolake.runtime.restate_run`).
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import PurePosixPath

from pydantic import BaseModel, ConfigDict, Field

from chronolake.lake.layout import state_path
from chronolake.lake.storage import Storage
from chronolake.location import Location, LocationLike
from chronolake.schema.persisted import Persisted
from chronolake.watermarks.assigner import WatermarkState

CHECKPOINT_PREFIX = "checkpoint-"
INTENT_PREFIX = "intent-"
RUN_PREFIX = "run-"


class ReadPhase(StrEnum):
    """How a run reads an input."""

    CHANGELOG = "changelog"
    """Its changes since the version consumed."""
    SNAPSHOT = "snapshot"
    """A hybrid source before its switch: the table as of a version, as inserts."""
    BOOTSTRAP = "bootstrap"
    """A full refresh: the table at `version + 1` as inserts, then its changes."""


class InputPosition(BaseModel):
    """How far a run has read one input, and the input's watermarks there."""

    model_config = ConfigDict(frozen=True)

    version: int = Field(-1, description="Last Delta version consumed (-1: none yet).")
    watermarks: WatermarkState = Field(default_factory=WatermarkState)
    phase: ReadPhase = Field(ReadPhase.CHANGELOG, description="How the next run reads it.")
    columns: dict[str, str] = Field(
        default_factory=dict,
        description="Declared physical columns and their Delta types at `version`, to tell a "
        "dropped or retyped source column from one that was always so.",
    )


class RestatedRange(BaseModel):
    """A restatement's range of one source: the run recomputes what depends on its rows with
    event time in [`start_ms`, `end_ms`) (docs/design.md, "Restatement")."""

    model_config = ConfigDict(frozen=True)

    source: str = Field(..., description="The rewritten source table.")
    start_ms: int = Field(..., description="The range's start (epoch ms, inclusive).")
    end_ms: int = Field(..., description="The range's end (epoch ms, exclusive).")


class RunIntent(Persisted):
    """The input versions run `run` reads up to: fixed before any data is read."""

    model_config = ConfigDict(frozen=True)

    run: int
    end_versions: dict[str, int]
    full_refresh: bool = Field(False, description="Rebuild from scratch, replacing output.")
    start: dict[str, InputPosition] = Field(
        default_factory=dict, description="A full refresh's start position per input."
    )
    restate: RestatedRange | None = Field(
        None, description="A restatement: recompute the range's region and write the diff."
    )


class Checkpoint(Persisted):
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
    counters: dict[str, int] = Field(
        default_factory=dict, description="The run's figures (`chronolake.runtime.figures`)."
    )
    finished_at: float | None = None


class CheckpointStore:
    """Checkpoints and intents of one derived table, under `_chronolake/state/<table>/`."""

    def __init__(self, storage: Storage) -> None:
        self.storage = storage

    @classmethod
    def of(cls, root: LocationLike, name: str) -> CheckpointStore:
        """The store of derived table `name` in the lake at `root`."""
        return cls(Storage(state_path(root, name)))

    def latest(self) -> Checkpoint:
        runs = self._runs(CHECKPOINT_PREFIX)
        if not runs:
            return Checkpoint()
        name = _name(CHECKPOINT_PREFIX, runs[-1])
        text = self.storage.read_text(name)
        return Checkpoint.read_json(text, where=str(self.storage.path_of(name))) if text else (
            Checkpoint())

    def intent(self, run: int) -> RunIntent | None:
        name = _name(INTENT_PREFIX, run)
        text = self.storage.read_text(name)
        return RunIntent.read_json(text, where=str(self.storage.path_of(name))) if text else None

    def write_intent(self, intent: RunIntent) -> RunIntent:
        """Record `intent` unless an intent of its run is there already; the recorded one."""
        if self.storage.create_text(_name(INTENT_PREFIX, intent.run), intent.model_dump_json()):
            return intent
        recorded = self.intent(intent.run)
        return intent if recorded is None else recorded

    def commit(self, checkpoint: Checkpoint) -> bool:
        """The commit point of a run: after this, the run counts as done. False, changing
        nothing, when another attempt at the same run passed it first.

        Then go the other attempts' state of this run, and the checkpoints, intents and
        state of runs before the previous one: all of them, since a run killed after its
        commit point leaves its predecessor's.
        """
        name = _name(CHECKPOINT_PREFIX, checkpoint.run)
        if not self.storage.create_text(name, checkpoint.model_dump_json(indent=2)):
            return False
        for prefix in (CHECKPOINT_PREFIX, INTENT_PREFIX):
            for run in self._runs(prefix):
                if run < checkpoint.run - 1:
                    self.storage.delete(_name(prefix, run))
        for folder in self.storage.folders():
            number = folder.removeprefix(RUN_PREFIX)
            if folder.startswith(RUN_PREFIX) and number.isdigit() and (
                int(number) < checkpoint.run - 1
            ):
                self.storage.delete_tree(folder)
        kept = {PurePosixPath(name).parent.name for name in checkpoint.state.values()}
        for attempt in self.storage.folders(self.run_dir(checkpoint.run)):
            if attempt not in kept:
                self.discard(checkpoint.run, attempt)
        return True

    def run_dir(self, run: int) -> str:
        """The folder of run `run`'s state: one folder per attempt at it."""
        return f"{RUN_PREFIX}{run:08d}"

    def state_name(self, run: int, attempt: str, role: str) -> str:
        """Where attempt `attempt` at run `run` keeps state table `role`, relative to this
        store (what a checkpoint records, so that a lake can be copied or moved)."""
        return f"{self.run_dir(run)}/{attempt}/{role}"

    def location(self, name: str) -> Location:
        """Where the state table `name` (a checkpoint's `state` entry) is, for Spark."""
        return self.storage.path_of(name)

    def discard(self, run: int, attempt: str) -> None:
        """Remove an attempt's state: one that lost, or is superseded."""
        self.storage.delete_tree(f"{self.run_dir(run)}/{attempt}")

    def _runs(self, prefix: str) -> list[int]:
        return sorted(
            int(name.removeprefix(prefix).removesuffix(".json"))
            for name in self.storage.names()
            if name.startswith(prefix) and name.endswith(".json")
        )


def _name(prefix: str, run: int) -> str:
    return f"{prefix}{run:08d}.json"
