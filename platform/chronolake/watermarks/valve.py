"""Combining the watermarks of several channels into one: the watermark valve.

An input made of several channels (the splits of a source, the parallel
readers feeding an operator) has one watermark: the minimum over its channels,
never decreasing. `WatermarkValve` computes it exactly as Flink's
`StatusWatermarkValve` does for event-time watermarks and idleness, and with
the processing-time watermarks proposal's rules on top. `CombinedWatermarkStatus`
does the same for the inputs of a multi-input operator (Flink's
`IndexedCombinedWatermarkStatus`).

A source's splits are combined by a third rule, Flink's for the outputs of one source
(`org.apache.flink.api.common.eventtime.CombinedWatermarkStatus`): `source_watermark`.

The valve and `CombinedWatermarkStatus` rely on `Watermark`'s order, in which every
event-time watermark sorts below every processing-time one, so "the minimum over
channels" is the proposal's table:

| channel 1 \\ channel 2 | (t2, processing) | (t2, event)           |
|-----------------------|------------------|-----------------------|
| (t1, processing)      | (MIN, processing)| (t2, event)           |
| (t1, event)           | (t1, event)      | (min(t1, t2), event)  |
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping
from dataclasses import dataclass

from chronolake.clock import Clock
from chronolake.errors import RunError
from chronolake.watermarks.watermark import Watermark, WatermarkStatus

logger = logging.getLogger(__name__)

ValveOutput = Watermark | WatermarkStatus


@dataclass(slots=True)
class _Channel:
    """One channel's last watermark, status, and whether it counts for the minimum.

    A channel is *aligned* when it is active and its watermark has reached the
    valve's last output; a channel that turns active again below the last
    output is unaligned until it catches up.
    """

    watermark: Watermark = Watermark.MIN_WATERMARK
    status: WatermarkStatus = WatermarkStatus.ACTIVE
    aligned: bool = True


class WatermarkValve:
    """Turns the watermarks and statuses of `num_channels` channels into one output.

    Semantics (Flink's `StatusWatermarkValve`, plus processing time):

    - Every channel starts ACTIVE at `Watermark.MIN_WATERMARK`; the output
      starts ACTIVE at `MIN_WATERMARK` too.
    - The output watermark is the minimum over the *aligned* channels, emitted
      only when it is larger than the last output: it never decreases. A
      channel's watermark that is not larger than its previous one is ignored.
    - An idle channel's watermarks are ignored and it does not hold the output
      back. When every channel is idle the valve emits the largest watermark
      of all channels (if larger than the last output), then IDLE, whatever
      the order in which they went idle. It emits ACTIVE again as soon as one
      channel is active.
    - A re-activated channel counts again once its watermark reaches the last
      output; if it already has, at once, and the minimum is re-derived.
    - Processing time: a channel that sent a processing-time watermark is
      always active (an IDLE status for it is ignored, and a processing-time
      watermark re-activates an idle channel). The output is
      `Watermark.PROCESSING_TIME` when every aligned channel follows the
      clock, and otherwise the smallest event-time watermark of the aligned
      channels. Once the output follows the clock, an event-time channel is
      never aligned again.
    - Errors (`RunError`): a channel that sent a processing-time watermark then
      sends an event-time one; with a `clock`, a processing-time watermark
      stamped ahead of it.

    `input_watermark` and `input_status` return what the valve emits, in order
    (usually nothing or one item).

    Example:
        >>> valve = WatermarkValve(2)
        >>> valve.input_watermark(Watermark(10), 0)
        []
        >>> valve.input_watermark(Watermark(7), 1)
        [Watermark(timestamp=7, use_processing_time=False)]
        >>> valve.input_status(WatermarkStatus.IDLE, 1)
        [Watermark(timestamp=10, use_processing_time=False)]
    """

    def __init__(self, num_channels: int, *, clock: Clock | None = None) -> None:
        if num_channels < 1:
            msg = f"WatermarkValve needs at least one channel, got num_channels={num_channels}"
            raise RunError(msg)
        self._channels = [_Channel() for _ in range(num_channels)]
        self._clock = clock
        self._last_watermark = Watermark.MIN_WATERMARK
        self._last_status = WatermarkStatus.ACTIVE

    @property
    def num_channels(self) -> int:
        """How many channels the valve combines."""
        return len(self._channels)

    @property
    def last_watermark(self) -> Watermark:
        """The last watermark the valve emitted (`MIN_WATERMARK` before any)."""
        return self._last_watermark

    @property
    def status(self) -> WatermarkStatus:
        """The valve's current output status."""
        return self._last_status

    def channel_watermark(self, channel: int) -> Watermark:
        """The last accepted watermark of `channel`."""
        return self._channel(channel).watermark

    def channel_status(self, channel: int) -> WatermarkStatus:
        """The current status of `channel`."""
        return self._channel(channel).status

    def is_aligned(self, channel: int) -> bool:
        """Whether `channel` currently counts for the minimum."""
        return self._channel(channel).aligned

    def input_watermark(self, watermark: Watermark, channel: int) -> list[ValveOutput]:
        """Feed `watermark` from `channel`; return what the valve emits because of it."""
        state = self._channel(channel)
        _check_no_return_to_event_time(state.watermark, watermark, f"channel {channel}")
        if self._clock is not None:
            watermark.check_clock(self._clock)
        out: list[ValveOutput] = []
        if watermark.use_processing_time:
            watermark = Watermark.PROCESSING_TIME
            if state.status.is_idle:
                logger.debug("processing-time watermark re-activates channel %d", channel)
                out += self._activate(state)
        if self._last_status.is_idle or state.status.is_idle:
            return out
        if watermark > state.watermark:
            state.watermark = watermark
            if not state.aligned and watermark >= self._last_watermark:
                state.aligned = True
            out += self._emit_new_minimum()
        return out

    def input_status(self, status: WatermarkStatus, channel: int) -> list[ValveOutput]:
        """Feed `status` from `channel`; return what the valve emits because of it."""
        state = self._channel(channel)
        if status.is_idle and state.status.is_active:
            if state.watermark.use_processing_time:
                logger.debug("channel %d follows the clock: IDLE ignored", channel)
                return []
            return self._deactivate(state)
        if status.is_active and state.status.is_idle:
            return self._activate(state)
        return []

    def _channel(self, channel: int) -> _Channel:
        if not 0 <= channel < len(self._channels):
            msg = (
                f"channel {channel} is out of range for a valve with "
                f"{len(self._channels)} channels (0..{len(self._channels) - 1})"
            )
            raise RunError(msg)
        return self._channels[channel]

    def _deactivate(self, state: _Channel) -> list[ValveOutput]:
        state.status = WatermarkStatus.IDLE
        state.aligned = False
        out: list[ValveOutput] = []
        if not any(c.status.is_active for c in self._channels):
            # No channel will advance any more: flush the largest watermark, so the
            # result does not depend on the order in which channels went idle.
            out += self._emit_if_larger(max(c.watermark for c in self._channels))
            self._last_status = WatermarkStatus.IDLE
            out.append(WatermarkStatus.IDLE)
        elif state.watermark == self._last_watermark:
            out += self._emit_new_minimum()
        return out

    def _activate(self, state: _Channel) -> list[ValveOutput]:
        state.status = WatermarkStatus.ACTIVE
        out: list[ValveOutput] = []
        if self._last_status.is_idle:
            self._last_status = WatermarkStatus.ACTIVE
            out.append(WatermarkStatus.ACTIVE)
        if state.watermark >= self._last_watermark:
            # Already caught up: it counts again, and may be the only channel that does.
            state.aligned = True
            out += self._emit_new_minimum()
        return out

    def _emit_new_minimum(self) -> list[ValveOutput]:
        aligned = [c.watermark for c in self._channels if c.aligned]
        if not aligned:
            return []
        return self._emit_if_larger(min(aligned))

    def _emit_if_larger(self, candidate: Watermark) -> list[ValveOutput]:
        if candidate > self._last_watermark:
            self._last_watermark = candidate
            return [candidate]
        return []


class CombinedWatermarkStatus:
    """The watermark of an operator with several inputs (Flink's `IndexedCombinedWatermarkStatus`).

    Each input (e.g. the probe and build side of a temporal join) feeds the
    output of its own valve here. The combined watermark is the minimum over
    the active inputs, or the maximum over all inputs once every input is
    idle, and never decreases; setting an input's watermark makes it active
    again. Processing-time inputs follow the same table as the valve: the
    combined watermark is `Watermark.PROCESSING_TIME` only once every active
    input follows the clock. An input that follows the clock never goes idle
    and must not go back to event time.

    Example:
        >>> inputs = CombinedWatermarkStatus(2)
        >>> inputs.update_watermark(0, Watermark(5)), inputs.update_watermark(1, Watermark(3))
        (False, True)
        >>> inputs.watermark
        Watermark(timestamp=3, use_processing_time=False)
    """

    def __init__(self, num_inputs: int, *, clock: Clock | None = None) -> None:
        if num_inputs < 1:
            msg = f"CombinedWatermarkStatus needs at least one input, got num_inputs={num_inputs}"
            raise RunError(msg)
        self._watermarks = [Watermark.MIN_WATERMARK] * num_inputs
        self._idle = [False] * num_inputs
        self._clock = clock
        self._combined = Watermark.MIN_WATERMARK

    @property
    def watermark(self) -> Watermark:
        """The combined watermark."""
        return self._combined

    @property
    def is_idle(self) -> bool:
        """True when every input is idle."""
        return all(self._idle)

    def update_watermark(self, index: int, watermark: Watermark) -> bool:
        """Set input `index`'s watermark (and mark it active); True if the combined one rose."""
        self._check_index(index)
        _check_no_return_to_event_time(self._watermarks[index], watermark, f"input {index}")
        if self._clock is not None:
            watermark.check_clock(self._clock)
        if watermark.use_processing_time:
            watermark = Watermark.PROCESSING_TIME
        self._idle[index] = False
        self._watermarks[index] = max(self._watermarks[index], watermark)
        return self._update_combined()

    def update_status(self, index: int, status: WatermarkStatus) -> bool:
        """Set input `index`'s status; True if the combined watermark rose."""
        self._check_index(index)
        follows_clock = self._watermarks[index].use_processing_time
        self._idle[index] = status.is_idle and not follows_clock
        return self._update_combined()

    def _check_index(self, index: int) -> None:
        if not 0 <= index < len(self._watermarks):
            msg = (
                f"input {index} is out of range for an operator with "
                f"{len(self._watermarks)} inputs (0..{len(self._watermarks) - 1})"
            )
            raise RunError(msg)

    def _update_combined(self) -> bool:
        if all(self._idle):
            candidate = max(self._watermarks)
        else:
            candidate = min(
                w for w, idle in zip(self._watermarks, self._idle, strict=True) if not idle
            )
        if candidate > self._combined:
            self._combined = candidate
            return True
        return False


def _check_no_return_to_event_time(previous: Watermark, new: Watermark, where: str) -> None:
    if previous.use_processing_time and not new.use_processing_time:
        msg = (
            f"{where} sent event-time watermark {new.timestamp} after a processing-time "
            "watermark: once an input follows the clock it must not go back to event time; "
            "fix the source so that it switches to processing time only at the end of its "
            "bounded phase"
        )
        raise RunError(msg)


def source_watermark(current: int, splits: Mapping[str, int], idle: Collection[str]) -> int:
    """A source's watermark (epoch ms) over its splits' (Flink's `CombinedWatermarkStatus` of
    one source's outputs): the minimum over the splits that are not idle, never below
    `current`; unchanged when every split is idle (no split's watermark is flushed, unlike
    the valve's channels)."""
    active = [watermark for split, watermark in splits.items() if split not in idle]
    return max(current, min(active)) if active else current
