"""What a run reports: the figures a person (and Dagster's plots) look at."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from chronolake.catalog.checkpoint import ReadPhase
from chronolake.runtime.figures import RunFigures


class RunStatus(StrEnum):
    """How a run ended."""

    COMMITTED = "committed"
    UP_TO_DATE = "up-to-date"
    LEFT = "left"
    """A restatement left the view as it is: its rows depend on processing time."""


class TickReport(BaseModel):
    """How a run went through its backlog in ticks, and what watermark alignment did."""

    model_config = ConfigDict(frozen=True)

    ticks: int = Field(..., description="Ticks of the run (1: the backlog at once).")
    buffered_rows: list[int] = Field(
        default_factory=list, description="Rows the operator held after each tick (state_rows)."
    )
    split_watermarks: dict[str, dict[str, int]] = Field(
        default_factory=dict, description="Per input and split: the watermark after the run."
    )
    paused_splits: dict[str, list[str]] = Field(
        default_factory=dict, description="Per input: the splits alignment paused in the run."
    )
    pauses: dict[str, int] = Field(default_factory=dict, description="Split pauses per input.")
    resumes: dict[str, int] = Field(default_factory=dict, description="Split resumes per input.")
    unaligned: list[str] = Field(
        default_factory=list,
        description="Inputs whose splits ran unaligned (their reader cannot pause splits).",
    )
    decisions: list[str] = Field(
        default_factory=list, description="Every pause and resume, in order, as log lines."
    )

    def figures(self) -> dict[str, int]:
        """The run figures the report says (`chronolake.runtime.figures`): what Dagster plots."""
        return {
            "ticks": self.ticks,
            "peak_buffered_rows": max(self.buffered_rows, default=0),
            "split_pauses": sum(self.pauses.values()),
            "split_resumes": sum(self.resumes.values()),
            "paused_splits": sum(len(splits) for splits in self.paused_splits.values()),
            "unaligned_sources": len(self.unaligned),
        }


class RunResult(BaseModel):
    """One run of a derived table."""

    model_config = ConfigDict(frozen=True)

    table: str
    run: int = Field(..., description="Run number (the checkpoint it committed).")
    status: RunStatus
    message: str = Field("", description="What happened, in a sentence.")
    input_versions: dict[str, tuple[int, int]] = Field(
        default_factory=dict, description="Per input: (first, last) Delta version read."
    )
    figures: RunFigures = Field(
        default_factory=lambda: RunFigures(),
        description="What the run counted, by name (`chronolake.runtime.figures`).",
    )
    watermark_ms: int | None = Field(None, description="The output watermark after the run.")
    processing_time: bool = Field(False, description="Whether the watermark follows the clock.")
    source_phases: dict[str, ReadPhase] = Field(
        default_factory=dict, description="Per input: snapshot | changelog after the run."
    )
    switch_versions: dict[str, int] = Field(
        default_factory=dict,
        description="Per hybrid input that switched in this run: the snapshot version.",
    )
    output_version: int | None = None
    waiting_reason: str | None = Field(None, description="Why probe rows are held, if they are.")
    ticks: TickReport | None = Field(
        None, description="Ticks and watermark alignment, for a run that bounds its ticks."
    )
