"""Connector options of a Delta-backed table, under their Flink names.

Options arrive as the `WITH ('key' = 'value', ...)` map of the DDL; every key
is validated here, so a typo fails at definition time instead of being ignored.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Annotated

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
)

from chronolake.errors import DefinitionError

SPLIT_BY_PARTITIONS = "$partitions"
"""`'scan.split-by' = '$partitions'`: one split per Delta partition (combination of values)."""

_DURATION_UNITS_MS = {
    **dict.fromkeys(("ms", "milli", "millis", "millisecond", "milliseconds"), 1),
    **dict.fromkeys(("s", "sec", "secs", "second", "seconds"), 1_000),
    **dict.fromkeys(("m", "min", "mins", "minute", "minutes"), 60_000),
    **dict.fromkeys(("h", "hour", "hours"), 3_600_000),
    **dict.fromkeys(("d", "day", "days"), 86_400_000),
}
_DURATION = re.compile(r"\s*(\d+)\s*([a-z]*)\s*")


def duration_ms(text: str) -> int:
    """A Flink duration (`TimeUtils.parseDuration`: `'30 s'`, `'1 min'`, `'200ms'`; a bare
    number is milliseconds) in milliseconds; `ValueError` naming the syntax otherwise."""
    match = _DURATION.fullmatch(text.lower())
    if match is None or match.group(2) not in {"", *_DURATION_UNITS_MS}:
        msg = (
            f"{text!r} is not a duration; write a whole number and a unit (ms, s, min, h, d), "
            "e.g. '30 s'"
        )
        raise ValueError(msg)
    return int(match.group(1)) * _DURATION_UNITS_MS.get(match.group(2), 1)


def _checked_duration(text: str) -> str:
    duration_ms(text)
    return text


DurationText = Annotated[str, AfterValidator(_checked_duration)]
"""A Flink duration as written (`'30 s'`), checked when its spec is validated."""


class ChangelogMode(StrEnum):
    """How the rows of a Delta table become a changelog."""

    APPEND = "append"
    CDF = "cdf"
    OP_COLUMN = "op-column"


class StartupMode(StrEnum):
    """Where a source starts reading: the changelog, or a snapshot then the changelog."""

    CHANGELOG = "changelog"
    SNAPSHOT_THEN_CHANGELOG = "snapshot-then-changelog"


class EmitStrategy(StrEnum):
    """When generated watermarks are emitted (Flink's `scan.watermark.emit.strategy`)."""

    ON_PERIODIC = "on-periodic"
    ON_EVENT = "on-event"


class DeltaOptions(BaseModel):
    """The `WITH (...)` options of a `'connector' = 'delta'` table.

    Example:
        >>> DeltaOptions.from_map({"connector": "delta", "path": "rates", "changelog": "cdf"})
    """

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    connector: str = Field("delta", description="Only 'delta' is supported.")
    path: str = Field(..., description="Table location, relative to the lake root or absolute.")
    changelog: ChangelogMode = Field(
        ChangelogMode.APPEND, description="How rows become a changelog: append | cdf | op-column."
    )
    op_column: str | None = Field(
        None,
        alias="changelog.op-column",
        description="With changelog = op-column: the column holding +I/-U/+U/-D or c/r/u/d.",
    )
    startup_mode: StartupMode = Field(
        StartupMode.CHANGELOG,
        alias="scan.startup.mode",
        description="changelog, or snapshot-then-changelog (the hybrid source).",
    )
    split_by: str | None = Field(
        None,
        alias="scan.split-by",
        description="Column whose values split the source, or '$partitions' for one split per "
        "Delta partition; unset: one split.",
    )
    emit_strategy: EmitStrategy = Field(
        EmitStrategy.ON_PERIODIC,
        alias="scan.watermark.emit.strategy",
        description="on-periodic (once per tick) or on-event (after every row that raises it).",
    )
    idle_timeout: DurationText | None = Field(
        None,
        alias="scan.idle-timeout",
        description="A split without rows for longer than this (a Flink duration, e.g. '30 s') "
        "is idle and stops holding back the source watermark; unset or 0: never idle.",
    )
    alignment_group: str | None = Field(
        None, alias="scan.watermark.alignment.group", description="Watermark alignment group."
    )
    alignment_max_drift: str | None = Field(
        None,
        alias="scan.watermark.alignment.max-drift",
        description="How far a split may run ahead of its group's minimum watermark.",
    )
    alignment_update_interval: str | None = Field(
        None,
        alias="scan.watermark.alignment.update-interval",
        description="How often alignment is recomputed.",
    )
    allow_unaligned_source_splits: bool = Field(
        False,
        alias="pipeline.watermark-alignment.allow-unaligned-source-splits",
        description="Go on unaligned when a reader cannot pause splits.",
    )
    max_rows_per_tick: int | None = Field(
        None, alias="scan.max-rows-per-tick", description="Row bound of one tick per split."
    )

    @field_validator("connector")
    @classmethod
    def _only_delta(cls, value: str) -> str:
        if value != "delta":
            raise ValueError(f"connector {value!r} is not supported; use 'connector' = 'delta'")
        return value

    @property
    def idle_timeout_ms(self) -> int | None:
        """`scan.idle-timeout` in milliseconds; None when unset or 0 (idleness disabled)."""
        if self.idle_timeout is None:
            return None
        return duration_ms(self.idle_timeout) or None

    @classmethod
    def known_keys(cls) -> list[str]:
        """The option keys a table may set, as written in DDL."""
        return sorted(field.alias or name for name, field in cls.model_fields.items())

    @classmethod
    def from_map(cls, options: dict[str, str], *, table: str = "?") -> DeltaOptions:
        """Validate a DDL option map, with errors that name the option and the fix."""
        connector = options.get("connector", "delta")
        if connector != "delta":
            msg = (
                f"table {table!r}: connector {connector!r} is not supported; chronolake reads "
                "Delta tables: write 'connector' = 'delta' and 'path' = '<location>'"
            )
            raise DefinitionError(msg)
        unknown = sorted(set(options) - set(cls.known_keys()))
        if unknown:
            msg = (
                f"table {table!r}: unknown option(s) {', '.join(map(repr, unknown))}; "
                f"known options are: {', '.join(cls.known_keys())}"
            )
            raise DefinitionError(msg)
        if "path" not in options:
            msg = f"table {table!r}: option 'path' is required, e.g. WITH ('path' = '{table}')"
            raise DefinitionError(msg)
        try:
            parsed = cls.model_validate(options)
        except ValidationError as error:
            problems = "; ".join(
                f"option {'.'.join(map(str, e['loc']))!r}: {e['msg']}" for e in error.errors()
            )
            raise DefinitionError(f"table {table!r}: {problems}") from None
        if parsed.changelog is ChangelogMode.OP_COLUMN and not parsed.op_column:
            msg = (
                f"table {table!r}: 'changelog' = 'op-column' needs the column that holds the "
                "operation, e.g. 'changelog.op-column' = 'op'"
            )
            raise DefinitionError(msg)
        return parsed

    def to_map(self) -> dict[str, str]:
        """The options as DDL would write them (only the ones that are set)."""
        values = self.model_dump(by_alias=True, exclude_defaults=True, mode="json")
        values.setdefault("path", self.path)
        values["connector"] = self.connector
        return {key: str(value).lower() if isinstance(value, bool) else str(value)
                for key, value in sorted(values.items())}
