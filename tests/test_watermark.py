"""Watermark values, statuses and the clocks that give processing time."""

from __future__ import annotations

import doctest
import time
from types import ModuleType

import pytest
from hypothesis import given
from hypothesis import strategies as st

import chronolake.clock as clock_module
import chronolake.watermarks.valve as valve_module
import chronolake.watermarks.watermark as watermark_module
from chronolake.clock import Clock, ManualClock, WallClock
from chronolake.errors import RunError
from chronolake.watermarks import LONG_MAX, LONG_MIN, Watermark, WatermarkStatus

W = Watermark
P = Watermark.PROCESSING_TIME


def test_constants_are_javas_long_bounds() -> None:
    assert W(-(2**63)) == W.MIN_WATERMARK
    assert W(2**63 - 1) == W.MAX_WATERMARK
    assert (LONG_MIN, LONG_MAX) == (-(2**63), 2**63 - 1)
    assert P.use_processing_time and P.timestamp == LONG_MIN


def test_default_is_event_time() -> None:
    assert W(5).use_processing_time is False
    assert W(5) == W(5, False)


def test_is_frozen() -> None:
    with pytest.raises(AttributeError):
        W(5).timestamp = 6  # type: ignore[misc]


def test_event_time_ordering_follows_timestamps() -> None:
    assert W.MIN_WATERMARK < W(-1) < W(0) < W(7) < W.MAX_WATERMARK
    assert max(W(3), W(9), W(4)) == W(9)
    assert W(3) != W(4)


def test_processing_time_watermarks_are_all_equal_whatever_their_timestamp() -> None:
    assert W(1_000, True) == W(LONG_MIN, True) == P
    assert hash(W(1_000, True)) == hash(P)
    assert len({W(1, True), W(2, True), W(3)}) == 2
    assert not W(1, True) < W(2, True)


def test_processing_time_sorts_above_every_event_time_watermark() -> None:
    assert W.MAX_WATERMARK < P
    assert W(5) < W(LONG_MIN, True)
    assert min(W(1, True), W(9)) == W(9)
    assert min(W(1, True), W(2, True)) == P


def test_comparing_with_another_type_is_not_supported() -> None:
    assert W(5) != 5
    with pytest.raises(TypeError):
        _ = W(5) < 5  # type: ignore[operator]


def test_integral_timestamps_are_normalised_to_int() -> None:
    class Millis:
        def __index__(self) -> int:
            return 42

    assert W(Millis()).timestamp == 42  # type: ignore[arg-type]
    assert type(W(Millis()).timestamp) is int  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [1.5, "5", None, True])
def test_non_integer_timestamp_is_rejected(bad: object) -> None:
    with pytest.raises(RunError, match=r"Watermark timestamp must be an int of ms since the epoch"):
        W(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [LONG_MAX + 1, LONG_MIN - 1])
def test_timestamp_outside_64_bits_is_rejected(bad: int) -> None:
    with pytest.raises(RunError, match=r"outside the 64-bit range .*MAX_WATERMARK for \+infinity"):
        W(bad)


def test_use_processing_time_must_be_a_bool() -> None:
    with pytest.raises(RunError, match=r"use_processing_time must be a bool, got 1"):
        W(5, 1)  # type: ignore[arg-type]


def test_effective_timestamp_follows_the_clock_only_for_processing_time() -> None:
    clock = ManualClock(1_000)
    assert W(7).effective_timestamp(clock) == 7
    assert P.effective_timestamp(clock) == 1_000
    clock.advance(250)
    assert W(500, True).effective_timestamp(clock) == 1_250


def test_processing_time_watermark_at_or_before_now_passes_the_clock_check() -> None:
    clock = ManualClock(1_000)
    W(1_000, True).check_clock(clock)
    P.check_clock(clock)
    W(5_000).check_clock(clock)  # event time may be anywhere


def test_processing_time_watermark_ahead_of_the_clock_is_an_error() -> None:
    with pytest.raises(
        RunError, match=r"processing-time watermark 1001 is ahead of the clock \(1000 ms\)"
    ):
        W(1_001, True).check_clock(ManualClock(1_000))


def test_status_flags() -> None:
    assert WatermarkStatus.IDLE.is_idle and not WatermarkStatus.IDLE.is_active
    assert WatermarkStatus.ACTIVE.is_active and not WatermarkStatus.ACTIVE.is_idle
    assert WatermarkStatus("idle") is WatermarkStatus.IDLE


def test_manual_clock_moves_only_when_told() -> None:
    clock = ManualClock(100)
    assert clock.now_ms() == 100
    clock.advance(0)
    clock.advance(50)
    assert clock.now_ms() == 150
    clock.set(20)
    assert clock.now_ms() == 20
    assert repr(clock) == "ManualClock(20)"
    assert ManualClock().now_ms() == 0


def test_manual_clock_refuses_to_advance_backwards() -> None:
    with pytest.raises(
        RunError, match=r"advance\(ms\) expects ms >= 0, got -1; use ManualClock.set"
    ):
        ManualClock(5).advance(-1)


def test_wall_clock_reads_the_system_time_in_ms() -> None:
    before = time.time_ns() // 1_000_000
    now = WallClock().now_ms()
    after = time.time_ns() // 1_000_000
    assert before <= now <= after


def test_clocks_satisfy_the_protocol() -> None:
    assert isinstance(WallClock(), Clock)
    assert isinstance(ManualClock(), Clock)


@given(st.integers(LONG_MIN, LONG_MAX), st.integers(LONG_MIN, LONG_MAX))
def test_event_time_order_is_the_timestamp_order(a: int, b: int) -> None:
    assert (W(a) < W(b)) == (a < b)
    assert (W(a) == W(b)) == (a == b)
    assert W(a) < W(b, True)


@pytest.mark.parametrize("module", [clock_module, valve_module, watermark_module])
def test_docstring_examples_run(module: ModuleType) -> None:
    result = doctest.testmod(module)
    assert result.attempted > 0 and result.failed == 0
