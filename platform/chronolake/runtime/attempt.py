"""An attempt at run `n` of a derived table: what it reads, and the two points it may be refused.

Two attempts at the same run can overlap: a run on another host, or a run that froze
while another took its lease over. Neither rests on a lock to stay exactly once; each
passes two put-if-absent writes (`chronolake.catalog.checkpoint`):

- `begin_writing`, before its first write: the first intent recorded for run `n` binds
  every attempt at it, so an attempt that planned other input versions stops here;
- `pass_commit_point`, after its last write: exactly one attempt creates checkpoint `n`;
  the other is refused and removes its own state.

Both refuse too when a later run was committed since the attempt's plan was made.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from uuid import uuid4

from chronolake.catalog.checkpoint import Checkpoint, CheckpointStore, RunIntent
from chronolake.errors import RunError


@dataclass(frozen=True)
class RunPlan:
    """What run `intent.run` reads, fixed before any data is read."""

    committed: Checkpoint
    intent: RunIntent
    resumed: bool
    """Whether it redoes a killed run's intent (already recorded)."""
    attempt: str = field(default_factory=lambda: f"attempt-{uuid4().hex[:12]}")
    """This attempt at the run: its state goes to a folder of its own."""

    @property
    def number(self) -> int:
        return self.intent.run

    @property
    def base(self) -> Checkpoint:
        """The checkpoint the run builds on: none for a full refresh."""
        return Checkpoint(run=self.committed.run) if self.intent.full_refresh else self.committed


def begin_writing(store: CheckpointStore, table: str, plan: RunPlan) -> None:
    """Record the plan's intent before the attempt writes anything; `RunError`, having written
    nothing, when another attempt got further or recorded other input versions first."""
    refuse_if_overtaken(store, table, plan)
    if plan.resumed:  # its intent is the recorded one
        return
    recorded = store.write_intent(plan.intent)
    if recorded != plan.intent:
        raise RunError(
            f"{table!r}: another run began run {plan.number} with other input versions "
            f"({recorded.end_versions}, this one: {plan.intent.end_versions}) while this one "
            "was computing; nothing was written: run it again"
        )


def pass_commit_point(
    store: CheckpointStore, table: str, plan: RunPlan, checkpoint: Checkpoint
) -> None:
    """Commit `checkpoint`, after which the run counts as done; `RunError` when another attempt
    passed first (this attempt's state is removed; its other writes were the same rows,
    written once, by their application transactions)."""
    try:
        refuse_if_overtaken(store, table, plan)
        if not store.commit(checkpoint):
            raise RunError(
                f"{table!r}: run {plan.number} was committed by another run while this one "
                "was writing (a run on another host, or one that took over this run's lock "
                "while it stalled); the table holds that run's rows, which equal this one's, "
                "and nothing was written twice: nothing to do"
            )
    except RunError:
        store.discard(plan.number, plan.attempt)
        raise


def refuse_if_overtaken(store: CheckpointStore, table: str, plan: RunPlan) -> None:
    """`RunError` when a later run than the one `plan` builds on was committed meanwhile."""
    latest = store.latest().run
    if latest != plan.committed.run:
        raise RunError(
            f"{table!r}: run {latest} was committed by another run while this one "
            f"(run {plan.number}) was computing; this one stopped before its commit point "
            "and nothing is doubled: run it again"
        )
