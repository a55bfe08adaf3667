"""Split alignment inside one source (FLIP-217): which splits to pause, which to resume.

A source reading several splits pauses the splits whose watermark runs ahead
of the group's max desired watermark, so a catch-up run over a skewed backlog
buffers no more than the drift allows. Flink's `SourceOperator`
(`checkSplitWatermarkAlignment`, `shouldWaitForAlignment`) is the reference.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping

from chronolake.errors import RunError
from chronolake.watermarks import LONG_MAX

logger = logging.getLogger(__name__)

ALLOW_UNALIGNED_SOURCE_SPLITS = "pipeline.watermark-alignment.allow-unaligned-source-splits"


class SplitAligner:
    """Decides, between ticks, which splits of one source may be read.

    `update(max_desired_ms, split_watermarks)` takes the coordinator's max
    desired watermark (`None`: no bound yet, nothing is paused) and the
    current watermark of every split that is still open (a split that has
    not produced a watermark yet passes `LONG_MIN`; a split missing from the
    mapping has finished and is forgotten). It returns `(pause, resume)`:
    the split ids to stop reading from now on and the paused ones to read
    again; `paused` is the set not to read in the next tick.

    Semantics:

    - Several splits: every split whose watermark is strictly above max
      desired is paused; every paused split at or below it is resumed.
    - A single split: the source itself pauses. This is expressed the same
      way: the one split is paused (and resumed) by id, and `source_paused`
      is True; it needs no per-split pausing, so it always works.
    - A reader that cannot pause individual splits (`can_pause_splits=False`)
      with several splits raises `RunError` as soon as one would have to be
      paused, unless `allow_unaligned_splits` (Flink's
      `pipeline.watermark-alignment.allow-unaligned-source-splits`) is true:
      then its splits run unaligned (`unaligned` is True) and only the source
      as a whole pauses, i.e. all its splits at once, while its watermark
      (the minimum over its splits) is above max desired.
    - A paused split is quiet because it is paused, not because it has no
      data: `idle_candidates` keeps it from being declared idle.

    Every decision is logged, and counted in `pauses` and `resumes`.

    Example:
        >>> aligner = SplitAligner(source="orders")
        >>> aligner.update(1_000, {"a": 900, "b": 1_500})
        ({'b'}, set())
        >>> aligner.update(1_600, {"a": 1_200, "b": 1_500})
        (set(), {'b'})
    """

    def __init__(
        self,
        *,
        allow_unaligned_splits: bool = False,
        can_pause_splits: bool = True,
        source: str = "source",
    ) -> None:
        self.allow_unaligned_splits = allow_unaligned_splits
        self.can_pause_splits = can_pause_splits
        self.source = source
        self.pauses = 0
        self.resumes = 0
        self._paused: set[str] = set()
        self._unaligned = False
        self._source_paused = False

    @property
    def paused(self) -> set[str]:
        """The splits not to read in the next tick."""
        return set(self._paused)

    @property
    def source_paused(self) -> bool:
        """True when the source as a whole waits: every one of its splits is paused."""
        return self._source_paused

    @property
    def unaligned(self) -> bool:
        """True when the last update had several splits that could not be paused one by one."""
        return self._unaligned

    def update(
        self, max_desired_ms: int | None, split_watermarks: Mapping[str, int]
    ) -> tuple[set[str], set[str]]:
        """Pause the splits above `max_desired_ms`, resume the paused ones at or below it."""
        for split in sorted(self._paused - split_watermarks.keys()):
            logger.info("source %r: split %r finished while paused, forgotten", self.source, split)
            self._paused.discard(split)
        bound = LONG_MAX if max_desired_ms is None else max_desired_ms
        target = self._splits_to_hold(bound, split_watermarks)
        pause = target - self._paused
        resume = self._paused - target
        for split in sorted(pause):
            logger.info(
                "source %r: pausing split %r, watermark %d is above max desired %d",
                self.source,
                split,
                split_watermarks[split],
                bound,
            )
        for split in sorted(resume):
            logger.info(
                "source %r: resuming split %r, watermark %d is at or below max desired %d",
                self.source,
                split,
                split_watermarks[split],
                bound,
            )
        self.pauses += len(pause)
        self.resumes += len(resume)
        self._paused = target
        self._source_paused = bool(split_watermarks) and target == set(split_watermarks)
        return pause, resume

    def idle_candidates(self, quiet_splits: Iterable[str]) -> set[str]:
        """Of the splits that look idle, those that may be marked idle: not the paused ones."""
        quiet = set(quiet_splits)
        held = quiet & self._paused
        if held:
            logger.debug("source %r: paused splits %s are not idle", self.source, sorted(held))
        return quiet - held

    def _splits_to_hold(self, bound: int, split_watermarks: Mapping[str, int]) -> set[str]:
        ahead = {split for split, watermark in split_watermarks.items() if watermark > bound}
        self._unaligned = False
        if len(split_watermarks) <= 1 or self.can_pause_splits:
            return ahead
        if ahead and not self.allow_unaligned_splits:
            msg = (
                f"source {self.source!r} must pause splits {sorted(ahead)} for watermark "
                f"alignment (above max desired watermark {bound}), but its reader cannot "
                f"pause individual splits; set '{ALLOW_UNALIGNED_SOURCE_SPLITS}' = 'true' to "
                "let its splits run unaligned, or read the source with a single split"
            )
            raise RunError(msg)
        self._unaligned = True
        if ahead:
            logger.warning(
                "source %r: splits %s run unaligned (%s is true)",
                self.source,
                sorted(ahead),
                ALLOW_UNALIGNED_SOURCE_SPLITS,
            )
        if min(split_watermarks.values()) > bound:
            return set(split_watermarks)
        return set()
