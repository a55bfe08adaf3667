"""The alignment coordinator: one max desired watermark per alignment group (FLIP-182/217).

Sources that share an alignment group must not run further ahead of the
group's slowest reader than their max drift allows. Readers (the splits or
parallel readers of a source) report their watermarks; the coordinator
answers, per source, the largest watermark it may reach: the minimum over the
group's latest reports plus that source's drift. Flink's `SourceCoordinator`
(`announceCombinedWatermark`) and its `WatermarkAggregator` are the reference.
"""

from __future__ import annotations

import logging

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from chronolake.errors import DefinitionError, RunError
from chronolake.watermarks import LONG_MAX, LONG_MIN

logger = logging.getLogger(__name__)


class AlignmentParams(BaseModel):
    """Where a source aligns: its group and how far it may drift ahead of the group's minimum."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    group: str = Field(..., min_length=1, description="Name of the alignment group.")
    max_drift_ms: int = Field(
        ..., ge=0, description="How far (ms) the source may run ahead of the group's minimum."
    )


class AlignmentCoordinator:
    """Computes each source's max desired watermark from its group's reported watermarks.

    Semantics:

    - `register(source, group, max_drift_ms)` puts a source in a group
      (registering again with the same values is a no-op; different values
      are an error).
    - `report(source, reader, watermark_ms)` records a reader's latest
      watermark; `None` means the reader is idle or finished, which counts as
      +infinity (`LONG_MAX`) and so never holds the group back. A later report
      replaces an earlier one, lower or not.
    - `max_desired(source)` = min over the latest reports of every reader of
      every source in the group, plus the source's drift, capped at `LONG_MAX`
      (when the whole group is idle it is `LONG_MAX`: nothing pauses). Sources
      that have not reported yet are left out of the minimum; `None` until
      someone in the group has reported. It may go down as well as up.
    - `forget(source, reader)` drops a finished reader's report.

    Example:
        >>> coordinator = AlignmentCoordinator()
        >>> coordinator.register("orders", "g", 1_000)
        >>> coordinator.register("rates", "g", 1_000)
        >>> coordinator.report("orders", "split-0", 42)
        >>> coordinator.report("rates", "split-0", 5_000)
        >>> coordinator.max_desired("rates")
        1042
    """

    def __init__(self) -> None:
        self._params: dict[str, AlignmentParams] = {}
        self._reports: dict[str, dict[str, int]] = {}

    def register(self, source: str, group: str, max_drift_ms: int) -> None:
        """Put `source` in alignment `group` with a max drift of `max_drift_ms`."""
        try:
            params = AlignmentParams(group=group, max_drift_ms=max_drift_ms)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()
            )
            msg = (
                f"alignment of source {source!r} is invalid ({problems}); expected a non-empty "
                "group name and a max drift >= 0 ms"
            )
            raise DefinitionError(msg) from None
        known = self._params.get(source)
        if known is not None and known != params:
            msg = (
                f"source {source!r} is already registered in alignment group {known.group!r} "
                f"with max drift {known.max_drift_ms} ms, not {group!r} / {max_drift_ms} ms; "
                "a source has one alignment: declare it once"
            )
            raise DefinitionError(msg)
        self._params[source] = params
        self._reports.setdefault(source, {})
        logger.debug(
            "source %r aligns in group %r with max drift %d ms", source, group, max_drift_ms
        )

    def report(self, source: str, reader: str, watermark_ms: int | None) -> None:
        """Record `reader`'s latest watermark (`None`: idle or finished, i.e. +infinity)."""
        reports = self._registered_reports(source)
        value = LONG_MAX if watermark_ms is None else watermark_ms
        if (
            isinstance(value, bool)
            or not isinstance(value, int)
            or not LONG_MIN <= value <= LONG_MAX
        ):
            msg = (
                f"reader {reader!r} of source {source!r} reported watermark {watermark_ms!r}; "
                "expected an int of ms since the epoch in the 64-bit range, or None when the "
                "reader is idle or finished"
            )
            raise RunError(msg)
        reports[reader] = value
        logger.debug("source %r reader %r reports watermark %d", source, reader, value)

    def forget(self, source: str, reader: str) -> None:
        """Drop `reader`'s report (a finished reader); unknown readers are ignored."""
        if self._registered_reports(source).pop(reader, None) is not None:
            logger.debug("source %r forgets reader %r", source, reader)

    def group_watermark(self, group: str) -> int | None:
        """The minimum over the group's latest reports; None before anyone reported."""
        reported = [
            watermark
            for source, params in self._params.items()
            if params.group == group
            for watermark in self._reports[source].values()
        ]
        return min(reported) if reported else None

    def max_desired(self, source: str) -> int | None:
        """The largest watermark `source` may reach now; None before its group reported."""
        self._registered_reports(source)
        params = self._params[source]
        combined = self.group_watermark(params.group)
        if combined is None:
            return None
        desired = min(combined + params.max_drift_ms, LONG_MAX)
        logger.debug(
            "group %r minimum %d: max desired watermark of %r is %d",
            params.group,
            combined,
            source,
            desired,
        )
        return desired

    def _registered_reports(self, source: str) -> dict[str, int]:
        reports = self._reports.get(source)
        if reports is None:
            msg = (
                f"source {source!r} is not registered for watermark alignment; call "
                "register(source, group, max_drift_ms) first"
            )
            raise RunError(msg)
        return reports
