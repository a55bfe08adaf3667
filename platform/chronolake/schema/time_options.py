"""When a table's time is complete, and how stale it may be: its time partitions and freshness.

Declared with the table's `WITH` options (a view's in `CREATE VIEW v WITH (...) AS SELECT`):

- `'partition.time.schedule'`: `hourly`, `daily`, `weekly`, `monthly`, or a cron expression
  (`'0 */6 * * *'`): the partitions' boundaries, as Dagster's time window partitions draw them;
- `'partition.time.start'`: the first partition's start, `'2026-11-01'` or
  `'2026-11-01 06:00'`, read in the partitions' zone;
- `'partition.time.zone'`: an IANA zone (`'Europe/Berlin'`), `UTC` by default;
- `'partition.time.column'`: the time column rows are partitioned by: the rowtime unless
  set; a window aggregate, which has none, is partitioned by `window_start`;
- `'freshness.max-lag'`: how far the watermark may trail the wall clock (`'15 min'`);
- `'freshness.partition-deadline'`: how long after its end a partition must be complete.

**Time zones.** A `TIMESTAMP` rowtime has no zone: chronolake reads its values as UTC
instants, as its sessions, its watermarks and Flink's partition commit
(`sink.partition-commit.watermark-time-zone`, `UTC` by default) do; a `TIMESTAMP_LTZ` value
is an instant already. A partition covers the instants from its start to its end in its
zone: in `Europe/Berlin`, the day 2026-03-29 covers the 23 hours from 2026-03-28 23:00 UTC
to 2026-03-29 22:00 UTC, the day 2026-10-25 the 25 hours from 2026-10-24 22:00 to
2026-10-25 23:00 UTC, and its repeated hour 02:00 is two hourly partitions,
`2026-10-25-02:00` and `2026-10-25-02:00+0100`. Rows whose time falls before the start
belong to no partition.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Self
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from chronolake.errors import DefinitionError
from chronolake.schema.options import DurationText, duration_ms

SCHEDULES = ("hourly", "daily", "weekly", "monthly")
"""The named schedules; any other schedule is a cron expression."""
_CRON_FIELD = re.compile(r"[\d*/,\-A-Za-z]+")
_START_FORMATS = ("%Y-%m-%d", "%Y-%m-%d %H:%M", "%Y-%m-%d-%H:%M")


class TimePartitions(BaseModel):
    """A table's time partitions: the schedule of their boundaries, from a start, in a zone."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    schedule: str = Field(
        ..., alias="partition.time.schedule",
        description="hourly, daily, weekly, monthly, or a cron expression.",
    )
    start: str = Field(
        ..., alias="partition.time.start",
        description="The first partition's start, 'YYYY-MM-DD' or 'YYYY-MM-DD HH:MM'.",
    )
    zone: str = Field("UTC", alias="partition.time.zone", description="An IANA time zone.")
    column: str | None = Field(
        None, alias="partition.time.column",
        description="The time column (default: the rowtime; window_start for a window view).",
    )

    @field_validator("schedule")
    @classmethod
    def _a_schedule(cls, value: str) -> str:
        fields = value.split()
        if value.lower() in SCHEDULES:
            return value.lower()
        if len(fields) != 5 or not all(_CRON_FIELD.fullmatch(field) for field in fields):
            msg = (f"{value!r} is neither {', '.join(SCHEDULES)} nor a cron expression of five "
                   "fields, e.g. '0 */6 * * *'")
            raise ValueError(msg)
        return value

    @field_validator("start")
    @classmethod
    def _a_start(cls, value: str) -> str:
        start_of(value)
        return value

    @field_validator("zone")
    @classmethod
    def _a_zone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"{value!r} is not an IANA time zone, e.g. 'UTC' or "
                             "'Europe/Berlin'") from None
        return value

    @property
    def start_time(self) -> datetime:
        """The first partition's start, without a zone (read in `zone`)."""
        return start_of(self.start)


class Freshness(BaseModel):
    """How far a table's watermark may trail the wall clock, and each partition its deadline."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    max_lag: DurationText | None = Field(
        None, alias="freshness.max-lag",
        description="How far the watermark may trail now, a duration ('15 min').",
    )
    partition_deadline: DurationText | None = Field(
        None, alias="freshness.partition-deadline",
        description="How long after its end a partition must be complete ('30 min').",
    )

    @property
    def max_lag_ms(self) -> int | None:
        return None if self.max_lag is None else duration_ms(self.max_lag)

    @property
    def partition_deadline_ms(self) -> int | None:
        return None if self.partition_deadline is None else duration_ms(self.partition_deadline)


class TimeOptions(BaseModel):
    """A table's or view's time options: its partitions and freshness, both optional."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    partitions: TimePartitions | None = Field(None, description="Its time partitions.")
    freshness: Freshness | None = Field(None, description="How stale it may be.")

    @classmethod
    def split(cls, options: dict[str, str], *, owner: str) -> tuple[Self, dict[str, str]]:
        """The time options among a `WITH` map, and the other options (the connector's);
        `DefinitionError` naming `owner` (`"table 'orders'"`) and the option for a bad one."""
        mine = {key: value for key, value in options.items() if key.startswith(_PREFIXES)}
        rest = {key: value for key, value in options.items() if key not in mine}
        unknown = sorted(set(mine) - set(known_time_keys()))
        if unknown:
            msg = (f"{owner}: unknown option(s) {', '.join(map(repr, unknown))}; the time "
                   f"options are: {', '.join(known_time_keys())}")
            raise DefinitionError(msg)
        partition_keys = {key: mine[key] for key in mine if key.startswith("partition.")}
        freshness_keys = {key: mine[key] for key in mine if key.startswith("freshness.")}
        if partition_keys and not {"partition.time.schedule", "partition.time.start"} <= set(
            partition_keys
        ):
            msg = (f"{owner}: time partitions need 'partition.time.schedule' and "
                   "'partition.time.start', e.g. 'partition.time.schedule' = 'hourly', "
                   "'partition.time.start' = '2026-11-01'")
            raise DefinitionError(msg)
        try:
            parsed = cls(
                partitions=TimePartitions.model_validate(partition_keys) if partition_keys
                else None,
                freshness=Freshness.model_validate(freshness_keys) if freshness_keys else None,
            )
        except ValidationError as error:
            problems = "; ".join(
                f"option {_alias(e['loc'])!r}: {e['msg'].removeprefix('Value error, ')}"
                for e in error.errors()
            )
            raise DefinitionError(f"{owner}: {problems}") from None
        if parsed.freshness and parsed.freshness.partition_deadline and not parsed.partitions:
            msg = (f"{owner}: 'freshness.partition-deadline' needs time partitions; declare "
                   "'partition.time.schedule' and 'partition.time.start', or drop it")
            raise DefinitionError(msg)
        return parsed, rest

    def to_map(self) -> dict[str, str]:
        """The options as DDL writes them (only the ones that are set)."""
        values: dict[str, str] = {}
        for part in (self.partitions, self.freshness):
            if part is not None:
                values |= part.model_dump(by_alias=True, exclude_none=True)
        return dict(sorted(values.items()))


_PREFIXES = ("partition.time.", "freshness.")


def known_time_keys() -> list[str]:
    """The time options' keys, as DDL writes them."""
    return sorted(
        str(field.alias)
        for model in (TimePartitions, Freshness) for field in model.model_fields.values()
    )


def start_of(text: str) -> datetime:
    """A partition start as written (`'2026-11-01'`, `'2026-11-01 06:00'`)."""
    for pattern in _START_FORMATS:
        try:
            return datetime.strptime(text.strip(), pattern)
        except ValueError:
            continue
    raise ValueError(f"{text!r} is not a start; write 'YYYY-MM-DD' or 'YYYY-MM-DD HH:MM'")


def _alias(location: tuple[int | str, ...]) -> str:
    """The DDL key of a validation error's field."""
    name = str(location[0]) if location else "?"
    for model in (TimePartitions, Freshness):
        field = model.model_fields.get(name)
        if field is not None and field.alias:
            return field.alias
    return name
