"""The watermark valve: Flink's StatusWatermarkValveTest ported case by case, then processing time.

Each Flink test feeds a series of inputs and, after each, checks the exact
outputs seen since the last check (`popLastSeenOutput`); `_Recorder.pop`
plays that role here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chronolake.clock import ManualClock
from chronolake.errors import RunError
from chronolake.watermarks import (
    LONG_MIN,
    CombinedWatermarkStatus,
    ValveOutput,
    Watermark,
    WatermarkStatus,
    WatermarkValve,
)

W = Watermark
P = Watermark.PROCESSING_TIME
IDLE = WatermarkStatus.IDLE
ACTIVE = WatermarkStatus.ACTIVE


@dataclass
class _Recorder:
    """A valve plus everything it emitted since the last `pop()`."""

    valve: WatermarkValve
    seen: list[ValveOutput] = field(default_factory=list)

    def wm(self, timestamp: int, channel: int, *, processing: bool = False) -> None:
        self.seen += self.valve.input_watermark(W(timestamp, processing), channel)

    def status(self, status: WatermarkStatus, channel: int) -> None:
        self.seen += self.valve.input_status(status, channel)

    def pop(self) -> list[ValveOutput]:
        out, self.seen = self.seen, []
        return out


def _valve(num_channels: int, clock: ManualClock | None = None) -> _Recorder:
    return _Recorder(WatermarkValve(num_channels, clock=clock))


# --- Flink's StatusWatermarkValveTest -----------------------------------------------------


def test_single_input_increasing_watermarks() -> None:
    v = _valve(1)
    v.wm(0, 0)
    assert v.pop() == [W(0)]
    v.wm(25, 0)
    assert v.pop() == [W(25)]


def test_single_input_decreasing_watermarks_yields_no_output() -> None:
    v = _valve(1)
    v.wm(25, 0)
    assert v.pop() == [W(25)]
    v.wm(18, 0)
    assert v.pop() == []
    v.wm(42, 0)
    assert v.pop() == [W(42)]


def test_single_input_watermark_status_toggling() -> None:
    v = _valve(1)
    v.status(ACTIVE, 0)  # channels start ACTIVE
    assert v.pop() == []
    v.status(IDLE, 0)
    assert v.pop() == [IDLE]
    v.status(IDLE, 0)
    assert v.pop() == []
    v.status(ACTIVE, 0)
    assert v.pop() == [ACTIVE]


def test_single_input_watermarks_intact_during_idleness() -> None:
    v = _valve(1)
    v.wm(25, 0)
    assert v.pop() == [W(25)]
    v.status(IDLE, 0)
    assert v.pop() == [IDLE]
    v.wm(50, 0)
    assert v.pop() == []
    assert v.valve.channel_watermark(0) == W(25)
    v.status(ACTIVE, 0)
    assert v.pop() == [ACTIVE]
    v.wm(50, 0)
    assert v.pop() == [W(50)]


def test_multiple_input_yields_watermark_only_when_all_channels_receive_watermarks() -> None:
    v = _valve(3)
    v.wm(0, 0)
    v.wm(0, 1)
    assert v.pop() == []
    v.wm(0, 2)
    assert v.pop() == [W(0)]


def test_multiple_input_increasing_watermarks() -> None:
    v = _valve(3)
    v.wm(0, 0)
    v.wm(0, 1)
    v.wm(0, 2)
    assert v.pop() == [W(0)]
    v.wm(12, 0)
    v.wm(8, 2)
    v.wm(10, 2)
    assert v.pop() == []
    v.wm(15, 1)
    assert v.pop() == [W(10)]  # channel 2 is lowest
    v.wm(17, 2)
    assert v.pop() == [W(12)]  # channel 0 is lowest
    v.wm(20, 0)
    assert v.pop() == [W(15)]  # channel 1 is lowest


def test_multiple_input_decreasing_watermarks_yields_no_output() -> None:
    v = _valve(3)
    v.wm(25, 0)
    v.wm(10, 1)
    v.wm(17, 2)
    assert v.pop() == [W(10)]
    v.wm(12, 0)
    v.wm(8, 1)
    v.wm(15, 2)
    assert v.pop() == []


def test_multiple_input_watermark_status_toggling() -> None:
    v = _valve(2)
    v.status(ACTIVE, 0)
    v.status(ACTIVE, 1)
    assert v.pop() == []
    v.status(IDLE, 1)
    assert v.pop() == []
    v.status(IDLE, 0)  # now all channels are idle
    assert v.pop() == [IDLE]
    v.status(IDLE, 0)
    v.status(IDLE, 1)
    assert v.pop() == []
    v.status(ACTIVE, 1)  # one active channel is enough
    assert v.pop() == [ACTIVE]
    v.status(ACTIVE, 0)
    assert v.pop() == []


def test_multiple_input_watermark_advancing_with_partially_idle_channels() -> None:
    v = _valve(3)
    v.wm(15, 0)
    v.wm(10, 1)
    assert v.pop() == []
    v.status(IDLE, 2)
    assert v.pop() == [W(10)]  # from the remaining active channels
    v.wm(18, 1)
    assert v.pop() == [W(15)]
    v.wm(20, 0)
    assert v.pop() == [W(18)]


def test_multiple_input_watermark_advancing_as_channels_individually_become_idle() -> None:
    v = _valve(3)
    v.wm(25, 0)
    v.wm(10, 1)
    v.wm(17, 2)
    assert v.pop() == [W(10)]
    v.status(IDLE, 1)
    assert v.pop() == [W(17)]
    v.status(IDLE, 2)
    assert v.pop() == [W(25)]


def test_multiple_input_flush_max_watermark_and_status_once_all_inputs_become_idle() -> None:
    v = _valve(3)
    v.wm(10, 0)
    v.wm(5, 1)
    v.wm(3, 2)
    assert v.pop() == [W(3)]
    v.status(IDLE, 0)
    v.status(IDLE, 1)
    assert v.pop() == []
    v.status(IDLE, 2)
    assert v.pop() == [W(10), IDLE]


def test_multiple_input_flush_max_watermark_once_all_idle_with_unaligned_last_channel() -> None:
    v = _valve(3)
    v.wm(100, 0)
    v.wm(50, 1)
    v.wm(70, 2)
    assert v.pop() == [W(50)]
    v.status(IDLE, 1)
    assert v.pop() == [W(70)]
    v.status(ACTIVE, 1)  # stays unaligned: 50 < 70
    assert not v.valve.is_aligned(1)
    assert v.pop() == []
    v.wm(60, 1)  # partially catches up
    assert v.valve.channel_watermark(1) == W(60)
    assert not v.valve.is_aligned(1)
    assert v.pop() == []
    v.status(IDLE, 0)
    v.status(IDLE, 2)
    assert v.pop() == []
    v.status(IDLE, 1)  # the unaligned channel goes idle last: still flush the max
    assert v.pop() == [W(100), IDLE]


def test_multiple_input_watermark_realignment_after_resume_active() -> None:
    v = _valve(3)
    v.wm(10, 0)
    v.wm(7, 1)
    v.wm(3, 2)
    assert v.pop() == [W(3)]
    v.status(IDLE, 2)
    assert v.pop() == [W(7)]
    v.status(ACTIVE, 2)  # the minimum moved on to 7: channel 2 is unaligned
    assert not v.valve.is_aligned(2)
    v.wm(5, 2)  # accepted, but no output
    assert v.valve.channel_watermark(2) == W(5)
    assert v.pop() == []
    v.wm(9, 2)  # caught up: aligned again
    assert v.valve.is_aligned(2)
    assert v.pop() == []
    v.wm(12, 1)
    assert v.pop() == [W(9)]


def test_no_output_when_all_active_channels_are_unaligned() -> None:
    v = _valve(3)
    v.wm(10, 0)
    v.wm(7, 1)
    v.status(IDLE, 2)
    assert v.pop() == [W(7)]
    v.status(ACTIVE, 2)  # unaligned
    assert v.pop() == []
    v.status(IDLE, 0)
    v.status(IDLE, 1)  # only channel 2 is active, and it is unaligned
    assert v.pop() == []
    assert v.valve.last_watermark == W(7)  # an old valve bug emitted Long.MAX here


def test_unaligned_active_channel_becomes_idle() -> None:
    v = _valve(2)
    v.wm(7, 0)
    v.wm(10, 1)
    assert v.pop() == [W(7)]
    v.status(IDLE, 0)
    assert v.pop() == [W(10)]
    v.status(ACTIVE, 0)
    v.wm(9, 0)  # still below the last output: unaligned
    assert v.pop() == []
    v.status(IDLE, 0)
    assert v.pop() == []


def test_watermark_advances_when_reactivated_channel_becomes_only_aligned_channel() -> None:
    v = _valve(3)
    v.wm(10, 0)
    v.wm(7, 1)
    v.status(IDLE, 2)
    assert v.pop() == [W(7)]
    v.status(ACTIVE, 2)  # unaligned, its watermark never advanced
    assert v.pop() == []
    v.status(IDLE, 0)
    v.status(IDLE, 1)
    assert v.pop() == []
    v.status(ACTIVE, 0)  # 10 >= 7: realigns, and the minimum moves to 10
    assert v.valve.is_aligned(0)
    assert v.pop() == [W(10)]
    v.status(IDLE, 2)
    assert v.pop() == []


def test_realignment_after_resume_active_emits_new_min_watermark() -> None:
    v = _valve(3)
    v.wm(10, 0)
    v.wm(20, 1)
    v.wm(30, 2)
    assert v.pop() == [W(10)]
    v.status(IDLE, 2)
    assert v.pop() == []
    v.status(IDLE, 0)
    assert v.pop() == [W(20)]
    v.status(ACTIVE, 0)  # 10 < 20: unaligned
    assert not v.valve.is_aligned(0)
    assert v.pop() == []
    v.status(IDLE, 1)  # no aligned channel left
    assert v.pop() == []
    v.status(ACTIVE, 2)  # 30 >= 20: realigns, minimum moves to 30
    assert v.valve.is_aligned(2)
    assert v.pop() == [W(30)]
    v.status(IDLE, 0)
    v.status(IDLE, 2)  # the flush finds nothing above 30
    assert v.pop() == [IDLE]


# --- processing-time watermarks (the seed's table, generalised to N channels) ------------------


def _feed(valve: WatermarkValve, channel: int, watermark: Watermark) -> list[ValveOutput]:
    return valve.input_watermark(watermark, channel)


@pytest.mark.parametrize(
    ("first", "second", "expected"),
    [
        pytest.param(W(10, True), W(20, True), P, id="processing x processing"),
        pytest.param(W(10, True), W(20), W(20), id="processing x event"),
        pytest.param(W(10), W(20, True), W(10), id="event x processing"),
        pytest.param(W(10), W(20), W(10), id="event x event"),
        pytest.param(W(30), W(20), W(20), id="event x event, second lower"),
    ],
)
@pytest.mark.parametrize("order", [(0, 1), (1, 0)], ids=["ch1 first", "ch2 first"])
def test_two_channel_table(
    first: Watermark, second: Watermark, expected: Watermark, order: tuple[int, int]
) -> None:
    valve = WatermarkValve(2)
    inputs = {0: first, 1: second}
    emitted = [out for ch in order for out in _feed(valve, ch, inputs[ch])]
    assert emitted == [expected]
    assert valve.last_watermark == expected
    assert valve.last_watermark.use_processing_time == expected.use_processing_time


def test_all_processing_output_is_the_canonical_processing_time_watermark() -> None:
    valve = WatermarkValve(1, clock=ManualClock(1_000))
    (out,) = valve.input_watermark(W(900, True), 0)
    assert out.use_processing_time and out.timestamp == LONG_MIN


def test_switch_to_processing_time_never_decreases_the_output() -> None:
    v = _valve(2)
    v.wm(5, 0)
    v.wm(7, 1)
    assert v.pop() == [W(5)]
    v.wm(0, 0, processing=True)  # channel 0 follows the clock; channel 1 holds at 7
    assert v.pop() == [W(7)]
    v.wm(9, 1)
    assert v.pop() == [W(9)]
    v.wm(0, 1, processing=True)
    assert v.pop() == [P]
    v.wm(0, 0, processing=True)  # already following the clock: nothing new
    assert v.pop() == []


def test_n_channels_processing_only_once_every_aligned_channel_follows_the_clock() -> None:
    v = _valve(3)
    v.wm(0, 0, processing=True)
    v.wm(0, 1, processing=True)
    v.wm(10, 2)
    assert v.pop() == [W(10)]
    v.wm(12, 2)
    assert v.pop() == [W(12)]
    v.status(IDLE, 2)  # the event-time channel stops holding back
    assert v.pop() == [P]


def test_event_channel_reactivated_after_the_switch_stays_unaligned() -> None:
    v = _valve(2)
    v.wm(10, 0)
    v.status(IDLE, 0)
    v.wm(0, 1, processing=True)
    assert v.pop() == [P]
    v.status(ACTIVE, 0)
    assert not v.valve.is_aligned(0)
    v.wm(50, 0)  # event time never counts again once the output follows the clock
    assert not v.valve.is_aligned(0)
    assert v.pop() == []
    assert v.valve.last_watermark == P


def test_processing_time_channel_is_always_active() -> None:
    v = _valve(2)
    v.wm(0, 0, processing=True)
    v.wm(0, 1, processing=True)
    assert v.pop() == [P]
    v.status(IDLE, 0)
    v.status(IDLE, 1)
    assert v.pop() == []
    assert v.valve.channel_status(0) is ACTIVE
    assert v.valve.status is ACTIVE


def test_processing_time_watermark_reactivates_an_idle_channel() -> None:
    v = _valve(1)
    v.wm(10, 0)
    v.status(IDLE, 0)
    assert v.pop() == [W(10), IDLE]
    v.wm(0, 0, processing=True)
    assert v.pop() == [ACTIVE, P]
    assert v.valve.channel_status(0) is ACTIVE


def test_idle_event_channel_does_not_hold_back_the_switch() -> None:
    v = _valve(2)
    v.wm(40, 1)
    v.status(IDLE, 1)
    assert v.pop() == []  # channel 0 still at MIN
    v.wm(0, 0, processing=True)
    assert v.pop() == [P]


def test_event_time_after_processing_time_on_a_channel_is_an_error() -> None:
    valve = WatermarkValve(2)
    valve.input_watermark(W(0, True), 1)
    with pytest.raises(RunError, match=r"channel 1 sent event-time watermark 5 after a processing"):
        valve.input_watermark(W(5), 1)


def test_event_time_after_processing_time_is_an_error_even_while_idle() -> None:
    valve = WatermarkValve(2)
    valve.input_watermark(W(0, True), 0)
    valve.input_status(IDLE, 0)
    with pytest.raises(RunError, match=r"must not go back to event time"):
        valve.input_watermark(W(5), 0)


def test_processing_time_watermark_ahead_of_the_valve_clock_is_an_error() -> None:
    clock = ManualClock(1_000)
    valve = WatermarkValve(1, clock=clock)
    with pytest.raises(RunError, match=r"processing-time watermark 1500 is ahead of the clock"):
        valve.input_watermark(W(1_500, True), 0)
    clock.advance(500)
    assert valve.input_watermark(W(1_500, True), 0) == [P]


def test_without_a_clock_the_timestamp_of_a_processing_time_watermark_is_not_checked() -> None:
    assert WatermarkValve(1).input_watermark(W(10**15, True), 0) == [P]


def test_channel_out_of_range_is_an_error() -> None:
    valve = WatermarkValve(2)
    with pytest.raises(RunError, match=r"channel 2 is out of range for a valve with 2 channels"):
        valve.input_watermark(W(1), 2)
    with pytest.raises(RunError, match=r"channel -1 is out of range"):
        valve.input_status(IDLE, -1)


def test_a_valve_needs_a_channel() -> None:
    with pytest.raises(RunError, match=r"at least one channel, got num_channels=0"):
        WatermarkValve(0)


# --- properties against simple references -------------------------------------------------------

_channels = st.integers(0, 3)
_event_op = st.tuples(st.just("wm"), _channels, st.integers(-5, 40))
_status_op = st.tuples(st.just("status"), _channels, st.sampled_from([IDLE, ACTIVE]))
_processing_op = st.tuples(st.just("proc"), _channels, st.just(0))


def _run(valve: WatermarkValve, ops: list[tuple[str, int, object]]) -> list[ValveOutput]:
    out: list[ValveOutput] = []
    switched: set[int] = set()
    for kind, channel, value in ops:
        channel %= valve.num_channels
        if kind == "status":
            assert isinstance(value, WatermarkStatus)
            out += valve.input_status(value, channel)
        elif kind == "proc":
            switched.add(channel)
            out += valve.input_watermark(P, channel)
        elif channel not in switched:
            assert isinstance(value, int)
            out += valve.input_watermark(W(value), channel)
    return out


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 4), st.lists(st.one_of(_event_op, _status_op, _processing_op), max_size=40))
def test_output_never_decreases_and_statuses_alternate(
    num_channels: int, ops: list[tuple[str, int, object]]
) -> None:
    valve = WatermarkValve(num_channels)
    out = _run(valve, ops)
    watermarks = [o for o in out if isinstance(o, Watermark)]
    assert all(a < b for a, b in zip(watermarks, watermarks[1:], strict=False))
    statuses = [o for o in out if isinstance(o, WatermarkStatus)]
    assert statuses == [IDLE, ACTIVE] * (len(statuses) // 2) + [IDLE] * (len(statuses) % 2)
    all_idle = all(valve.channel_status(c).is_idle for c in range(num_channels))
    assert valve.status.is_idle == all_idle


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 4), st.lists(st.one_of(_event_op, _status_op), max_size=40))
def test_all_idle_flushes_the_largest_watermark(
    num_channels: int, ops: list[tuple[str, int, object]]
) -> None:
    valve = WatermarkValve(num_channels)
    _run(valve, ops)
    for channel in range(num_channels):
        valve.input_status(IDLE, channel)
    largest = max(valve.channel_watermark(c) for c in range(num_channels))
    assert valve.last_watermark == max(largest, W.MIN_WATERMARK)


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 4), st.lists(st.tuples(_channels, st.integers(-5, 40)), max_size=40))
def test_without_idleness_output_is_the_rising_minimum_of_channel_maxima(
    num_channels: int, ops: list[tuple[int, int]]
) -> None:
    valve = WatermarkValve(num_channels)
    highest = [LONG_MIN] * num_channels
    expected: list[ValveOutput] = []
    last = LONG_MIN
    out: list[ValveOutput] = []
    for channel, value in ops:
        channel %= num_channels
        out += valve.input_watermark(W(value), channel)
        highest[channel] = max(highest[channel], value)
        if min(highest) > last:
            last = min(highest)
            expected.append(W(last))
    assert out == expected


# --- CombinedWatermarkStatus: the inputs of a multi-input operator ------------------------------


def test_combined_is_the_minimum_over_active_inputs() -> None:
    inputs = CombinedWatermarkStatus(2)
    assert inputs.update_watermark(0, W(5)) is False  # input 1 still at MIN
    assert inputs.update_watermark(1, W(3)) is True
    assert inputs.watermark == W(3)
    assert inputs.update_watermark(1, W(8)) is True
    assert inputs.watermark == W(5)
    assert inputs.update_watermark(1, W(2)) is False  # never goes back
    assert inputs.watermark == W(5)


def test_combined_ignores_idle_inputs_and_flushes_the_max_when_all_are_idle() -> None:
    inputs = CombinedWatermarkStatus(3)
    inputs.update_watermark(0, W(10))
    inputs.update_watermark(1, W(4))
    assert inputs.watermark == W.MIN_WATERMARK
    assert inputs.update_status(2, IDLE) is True
    assert inputs.watermark == W(4)
    assert inputs.update_status(1, IDLE) is True
    assert inputs.watermark == W(10)
    assert not inputs.is_idle
    inputs.update_status(0, IDLE)
    assert inputs.is_idle
    assert inputs.watermark == W(10)


def test_combined_flush_is_independent_of_idling_order() -> None:
    inputs = CombinedWatermarkStatus(2)
    inputs.update_watermark(0, W(5))
    inputs.update_watermark(1, W(4))
    inputs.update_status(1, IDLE)
    inputs.update_status(0, IDLE)
    assert inputs.watermark == W(5)


def test_combined_watermark_update_reactivates_an_input() -> None:
    inputs = CombinedWatermarkStatus(2)
    inputs.update_watermark(0, W(10))
    inputs.update_status(1, IDLE)
    assert inputs.watermark == W(10)
    inputs.update_watermark(1, W(3))
    assert inputs.watermark == W(10)  # the combined value never decreases
    inputs.update_watermark(0, W(20))
    assert inputs.watermark == W(10)  # input 1, active again at 3, holds it back
    assert inputs.update_watermark(1, W(15)) is True
    assert inputs.watermark == W(15)


@pytest.mark.parametrize(
    ("first", "second", "expected"),
    [
        (W(1, True), W(2, True), P),
        (W(1, True), W(20), W(20)),
        (W(10), W(2, True), W(10)),
        (W(10), W(20), W(10)),
    ],
)
def test_combined_follows_the_processing_time_table(
    first: Watermark, second: Watermark, expected: Watermark
) -> None:
    inputs = CombinedWatermarkStatus(2)
    inputs.update_watermark(0, first)
    inputs.update_watermark(1, second)
    assert inputs.watermark == expected


def test_combined_processing_time_input_never_goes_idle() -> None:
    inputs = CombinedWatermarkStatus(2)
    inputs.update_watermark(0, P)
    inputs.update_watermark(1, W(7))
    assert inputs.watermark == W(7)
    inputs.update_status(0, IDLE)  # ignored: it follows the clock
    assert inputs.watermark == W(7)
    inputs.update_status(1, IDLE)  # only the clock-following input is left
    assert not inputs.is_idle
    assert inputs.watermark == P


def test_combined_errors() -> None:
    inputs = CombinedWatermarkStatus(2, clock=ManualClock(100))
    with pytest.raises(RunError, match=r"processing-time watermark 101 is ahead of the clock"):
        inputs.update_watermark(0, W(101, True))
    inputs.update_watermark(0, W(100, True))
    with pytest.raises(RunError, match=r"input 0 sent event-time watermark 5 after a processing"):
        inputs.update_watermark(0, W(5))
    with pytest.raises(RunError, match=r"input 2 is out of range for an operator with 2 inputs"):
        inputs.update_status(2, IDLE)
    with pytest.raises(RunError, match=r"at least one input, got num_inputs=0"):
        CombinedWatermarkStatus(0)
