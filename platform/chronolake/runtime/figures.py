"""The figures a run reports, each name with one meaning: the one owner of what they say.

Every operator counts a subset (a window aggregate has no probe side): those of every run
(`COMMON_FIGURES`) and those its operation registers. A name an operator counts is declared
here, with what it means, and registered, or the run is refused before its commit. Dagster plots
them, `chronolake run` prints them and the checkpoint keeps them; the declarations below
say what each means.

*Late rows* are always those written to the table's side table (`_chronolake/late/<table>`),
whatever the reason. A temporal join's `late_probe_rows` and `late_build_rows` are rows
behind the watermark that it still answers from its history (the names Flink users know).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated

from pydantic import ConfigDict, Field, TypeAdapter, with_config
from typing_extensions import TypedDict

if TYPE_CHECKING:
    from chronolake.sql.operations import Operation


def _count(meaning: str) -> object:
    return Field(ge=0, description=meaning)


@with_config(ConfigDict(extra="forbid"))
class RunFigures(TypedDict, total=False):
    """One run's figures, by name: counts of rows passing through the run, except the
    `LEVEL_FIGURES`, which say what the operator holds after it."""

    rows_in: Annotated[int, _count("Input rows read (a join's both sides; a self-join's once).")]
    rows_out: Annotated[int, _count("Changes written to the output, of every kind.")]
    inserts_out: Annotated[int, _count("+I changes written.")]
    update_befores_out: Annotated[int, _count("-U changes written.")]
    update_afters_out: Annotated[int, _count("+U changes written.")]
    deletes_out: Annotated[int, _count("-D changes written.")]
    late_rows: Annotated[int, _count(
        "Rows written to the side table: behind a closed window, or without a usable rowtime."
    )]
    null_rowtime_rows: Annotated[int, _count(
        "Rows whose rowtime is NULL or cannot be parsed (each is a late row)."
    )]
    pending_rows: Annotated[int, _count(
        "Rows held for a later run: probe rows waiting for the watermark, the rows of open "
        "windows, an interval join's rows whose interval is still open."
    )]
    state_rows: Annotated[int, _count(
        "Rows the operator keeps in state after the run (pending rows and kept versions)."
    )]
    # a temporal join
    probe_rows_in: Annotated[int, _count("Probe rows read.")]
    build_rows_in: Annotated[int, _count("Build-side (versioned table) changes read.")]
    late_probe_rows: Annotated[int, _count(
        "Probe rows behind the watermark when read, still joined (from state or the history)."
    )]
    late_build_rows: Annotated[int, _count(
        "Build changes behind the watermark when read, kept in the history for late probes."
    )]
    emitted_probe_rows: Annotated[int, _count(
        "Probe rows joined and emitted (the watermark reached them)."
    )]
    unmatched_rows: Annotated[int, _count(
        "Emitted probe rows that met no version (NULL-padded by a LEFT JOIN, else dropped)."
    )]
    # an interval join
    left_rows_in: Annotated[int, _count("Rows read from the FROM side.")]
    right_rows_in: Annotated[int, _count("Rows read from the joined side.")]
    matched_pairs: Annotated[int, _count("Pairs of rows whose times met within the bounds.")]
    padded_rows: Annotated[int, _count(
        "Outer rows emitted NULL-padded: they left state, or arrived closed, unmatched."
    )]
    closed_on_arrival_rows: Annotated[int, _count(
        "Rows whose interval had already closed when they were read."
    )]
    left_state_rows: Annotated[int, _count("FROM-side rows kept in state.")]
    right_state_rows: Annotated[int, _count("Joined-side rows kept in state.")]
    # a window aggregate
    retractions_in: Annotated[int, _count("-U/-D rows read from an updating input.")]
    windows_fired: Annotated[int, _count("Windows the watermark closed in the run, emitted.")]
    open_windows: Annotated[int, _count("Windows still open after the run.")]
    # a deduplication
    outdated_rows: Annotated[int, _count(
        "Rows that lost to a row of their key already kept (an older one for keep-last)."
    )]
    # a history
    versions_in: Annotated[int, _count(
        "Version events read: changes other than -U with a key and a version time."
    )]
    touched_keys: Annotated[int, _count("Keys whose history the run recomputed.")]
    # a run in ticks (watermark alignment)
    ticks: Annotated[int, _count("Ticks of the run.")]
    peak_buffered_rows: Annotated[int, _count("The most rows the operator held after a tick.")]
    split_pauses: Annotated[int, _count("Times alignment paused a split.")]
    split_resumes: Annotated[int, _count("Times alignment resumed a split.")]
    paused_splits: Annotated[int, _count("Splits paused at the end of the run.")]
    unaligned_sources: Annotated[int, _count(
        "Inputs whose splits ran unaligned (their reader cannot pause splits)."
    )]


LEVEL_FIGURES = frozenset(
    {"pending_rows", "state_rows", "left_state_rows", "right_state_rows", "open_windows"}
)
"""Figures that say what the operator holds after a step: a ticked run reports the last
tick's; every other figure counts rows passing through, and is summed over the ticks."""

COMMON_FIGURES = frozenset({
    "rows_in", "rows_out", "inserts_out", "update_befores_out", "update_afters_out",
    "deletes_out", "late_rows", "null_rowtime_rows", "pending_rows", "state_rows",
    "ticks", "peak_buffered_rows", "split_pauses", "split_resumes", "paused_splits",
    "unaligned_sources",
})
"""Figures a run of any operation may count; the others are registered with the operations
that count them (`chronolake.sql.operations`)."""

_FIGURES = TypeAdapter(RunFigures)


def run_figures(figures: Mapping[str, int], operation: Operation) -> RunFigures:
    """`figures`, counted by a run of `operation`, checked against the declared names and
    meanings and against what the operation registers (a name outside them is a bug in the
    operator that counted it)."""
    unregistered = set(figures) - COMMON_FIGURES - set(operation.figures)
    if unregistered:
        msg = (f"a {operation.name} counted figures its registration does not name: "
               f"{', '.join(sorted(unregistered))}; name them in chronolake.sql.operations")
        raise ValueError(msg)
    return _FIGURES.validate_python(dict(figures))

