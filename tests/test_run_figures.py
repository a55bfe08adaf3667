"""A run's figures are typed: each name is declared once with its meaning, and a result
with an undeclared or negative figure is refused."""

import pytest
from pydantic import ValidationError

from chronolake import RunResult
from chronolake.runtime.figures import LEVEL_FIGURES, RunFigures
from chronolake.runtime.result import RunStatus


def _result(figures: dict[str, int]) -> RunResult:
    return RunResult(table="t", run=1, status=RunStatus.COMMITTED, figures=figures)


def test_a_result_keeps_the_declared_figures_it_was_given() -> None:
    assert _result({"rows_in": 3, "late_rows": 1}).figures == {"rows_in": 3, "late_rows": 1}


@pytest.mark.parametrize("figures", [{"invalid_rows": 1}, {"rows_in": -1}])
def test_an_undeclared_or_negative_figure_is_refused(figures: dict[str, int]) -> None:
    with pytest.raises(ValidationError):
        _result(figures)


def test_level_figures_are_declared_and_every_held_count_is_one() -> None:
    """A figure of what the operator holds after a step is a level: a ticked run reports the
    last tick's, not the sum over its ticks."""
    assert set(RunFigures.__annotations__) >= LEVEL_FIGURES
    held = {name for name in RunFigures.__annotations__
            if name.endswith("state_rows") or name in {"pending_rows", "open_windows"}}
    assert held == LEVEL_FIGURES
