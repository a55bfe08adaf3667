"""A table's alignment options, parsed: group, max drift, update interval, unaligned splits.

The DDL carries them as strings under Flink's names
(`'scan.watermark.alignment.group'`, `'...max-drift'`, `'...update-interval'`,
`'pipeline.watermark-alignment.allow-unaligned-source-splits'`); durations use
Flink's syntax (`TimeUtils.parseDuration`): a number and an optional unit, `ms`
when none (`'200 ms'`, `'1s'`, `'5 min'`, `'2 h'`).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from chronolake.errors import DefinitionError
from chronolake.schema import ChangelogMode, TableSpec
from chronolake.schema.options import duration_ms

GROUP_OPTION = "scan.watermark.alignment.group"
MAX_DRIFT_OPTION = "scan.watermark.alignment.max-drift"
UPDATE_INTERVAL_OPTION = "scan.watermark.alignment.update-interval"

TICK_PERIOD_MS = 200
"""What one tick of a run stands for: Flink's default `pipeline.auto-watermark-interval`.

A run emits on-periodic watermarks once per tick, as Flink does once per
auto-watermark interval, so an update interval of 1 s (Flink's default) means
alignment is recomputed every 5 ticks.
"""

DEFAULT_UPDATE_INTERVAL_MS = 1_000


def _duration_ms(text: str, *, option: str, table: str) -> int:
    try:
        return duration_ms(text)
    except ValueError as error:
        raise DefinitionError(f"table {table!r}: option {option!r}: {error}") from None


class AlignmentSettings(BaseModel):
    """How one source takes part in watermark alignment.

    Example:
        >>> AlignmentSettings.for_table(orders_spec)                  # doctest: +SKIP
        AlignmentSettings(group='g', max_drift_ms=60000, update_every_ticks=5, ...)
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    group: str = Field(..., min_length=1, description="The alignment group.")
    max_drift_ms: int = Field(..., ge=0, description="How far ahead of the group's minimum.")
    update_every_ticks: int = Field(
        1, ge=1, description="Ticks between alignment updates (update interval / tick period)."
    )
    allow_unaligned_splits: bool = Field(
        False, description="Run the splits unaligned when the reader cannot pause them."
    )
    can_pause_splits: bool = Field(True, description="Whether its reader can pause one split.")

    @classmethod
    def for_table(cls, spec: TableSpec) -> AlignmentSettings | None:
        """The table's alignment, or None when it declares no group.

        Raises `DefinitionError` for a group without max drift (or the reverse), and for a
        duration that does not parse.
        """
        options = spec.options
        if options.alignment_group is None:
            if options.alignment_max_drift is not None:
                msg = (
                    f"table {spec.name!r}: {MAX_DRIFT_OPTION!r} is set but {GROUP_OPTION!r} is "
                    f"not; name the alignment group, e.g. '{GROUP_OPTION}' = 'g'"
                )
                raise DefinitionError(msg)
            return None
        if options.alignment_max_drift is None:
            msg = (
                f"table {spec.name!r}: alignment group {options.alignment_group!r} needs "
                f"{MAX_DRIFT_OPTION!r}, how far a split may run ahead, e.g. '1 min'"
            )
            raise DefinitionError(msg)
        interval = DEFAULT_UPDATE_INTERVAL_MS
        if options.alignment_update_interval is not None:
            interval = _duration_ms(
                options.alignment_update_interval, option=UPDATE_INTERVAL_OPTION, table=spec.name
            )
        return cls(
            group=options.alignment_group,
            max_drift_ms=_duration_ms(
                options.alignment_max_drift, option=MAX_DRIFT_OPTION, table=spec.name
            ),
            update_every_ticks=max(1, -(-interval // TICK_PERIOD_MS)),
            allow_unaligned_splits=options.allow_unaligned_source_splits,
            can_pause_splits=can_pause_splits(spec),
        )


def can_pause_splits(spec: TableSpec) -> bool:
    """Whether a reader of `spec` may hold one split back while reading the others.

    An update can move a key from one split to another when the split column is not
    part of the primary key (its `-U` in the old split, its `+U` in the new one);
    pausing one of the two splits would then reorder the key's changes. So a
    changelog (cdf or op-column) split by a column outside the key cannot pause
    splits; an append-only source, or one split by key columns, can.
    """
    split = spec.options.split_by
    if split is None or spec.options.changelog is ChangelogMode.APPEND:
        return True
    return split in spec.primary_key
