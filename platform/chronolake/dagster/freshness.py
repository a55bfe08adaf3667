"""Event-time freshness: `watermark_freshness`, an asset check on how far a table's watermark
trails the wall clock, and whether its partitions are complete by their deadlines.

Dagster's `FreshnessPolicy` judges when an asset was last materialized; a chronolake table is
fresh when its *event time* is: its current watermark (`chronolake.catalog.watermarks`, read
from Delta logs, no Spark) is at most `'freshness.max-lag'` behind now, and each time
partition is complete (the watermark passed it) `'freshness.partition-deadline'` after its
end. A view's watermark follows its inputs', so a stale view names the input holding it
back: the input with the lowest watermark, followed down to a source, or the view itself
when its inputs are ahead (a run would bring it up).

The check's severity is WARN: a stale table's rows are correct, only late (ERROR is for
chronolake's correctness promises, such as `primary_key_unique`), and a source that stops
makes every view downstream stale at once.
"""

# No `from __future__ import annotations` here: Dagster reads the `context` annotation at
# definition time and refuses a string.

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from dagster import (
    AssetCheckExecutionContext,
    AssetCheckKey,
    AssetCheckResult,
    AssetChecksDefinition,
    AssetCheckSeverity,
    AssetCheckSpec,
    AssetKey,
    MetadataValue,
    multi_asset_check,
)

from chronolake.catalog.entry import CatalogEntry
from chronolake.catalog.watermarks import CurrentWatermark, current_watermarks
from chronolake.clock import WallClock, lag_text
from chronolake.dagster.declaring import served_specs
from chronolake.dagster.resources import LakeResource
from chronolake.location import LocationLike, as_location
from chronolake.schema import TableSpec, ViewSpec
from chronolake.schema.time_options import Freshness, TimePartitions
from chronolake.schema.windows import Windows
from chronolake.sql.partition_windows import partition_windows
from chronolake.sql.query import referenced_tables
from chronolake.watermarks.partitions import (
    PartitionWindow,
    completed_at,
    partitions_definition,
    windows_between,
)

FRESHNESS_CHECK = "watermark_freshness"

Spec = TableSpec | ViewSpec


def freshness_check_keys(specs: Iterable[Spec]) -> list[AssetCheckKey]:
    """The `watermark_freshness` check of every table and view that declares `freshness.*`."""
    return [AssetCheckKey(AssetKey(spec.name), FRESHNESS_CHECK)
            for spec in specs if spec.time.freshness is not None]


def freshness_checks(
    lake_root: LocationLike, specs: Iterable[Spec] | None = None
) -> AssetChecksDefinition | None:
    """`watermark_freshness` for every table and view of `specs` (or the lake's catalog) that
    declares `freshness.*`, evaluated together (one read of the lake's watermarks); None when
    none declares it."""
    served = served_specs(as_location(lake_root), specs)
    declared = [spec for spec in served if spec.time.freshness is not None]
    if not declared:
        return None
    by_name = {spec.name.lower(): spec for spec in served}
    entries = {name: CatalogEntry.of(spec) for name, spec in by_name.items()}

    @multi_asset_check(
        name=FRESHNESS_CHECK, can_subset=True,
        specs=[AssetCheckSpec(FRESHNESS_CHECK, asset=spec.name,
                              description=_description(spec.time.freshness))
               for spec in declared if spec.time.freshness is not None],
        description="The watermark is at most max-lag behind now, and every partition is "
        "complete by its deadline.",
    )
    def _check(context: AssetCheckExecutionContext, lake: LakeResource
               ) -> Iterator[AssetCheckResult]:
        watermarks = current_watermarks(lake.location, entries)
        now_ms = WallClock().now_ms()
        for key in sorted(context.selected_asset_check_keys, key=str):
            name = key.asset_key.to_user_string().lower()
            yield judge(by_name[name], by_name, watermarks, now_ms)

    return _check


def _description(freshness: Freshness | None) -> str:
    assert freshness is not None
    rules = []
    if freshness.max_lag is not None:
        rules.append(f"the watermark trails now by at most {freshness.max_lag}")
    if freshness.partition_deadline is not None:
        rules.append(f"each partition is complete {freshness.partition_deadline} after its end")
    return "Event-time freshness: " + "; ".join(rules) + "."


@dataclass(frozen=True, slots=True)
class Holder:
    """The table or view holding a watermark back, and the views between (outermost first)."""

    name: str
    through: tuple[str, ...]
    behind_its_inputs: bool


def judge(spec: Spec, specs: Mapping[str, Spec], watermarks: Mapping[str, CurrentWatermark],
          now_ms: int) -> AssetCheckResult:
    """`watermark_freshness` of `spec` at `now_ms`, from the lake's current `watermarks`."""
    freshness = spec.time.freshness
    assert freshness is not None, "only tables that declare freshness are checked"
    name = spec.name.lower()
    watermark = watermarks[name].watermark_ms
    problems: list[str] = []
    metadata: dict[str, MetadataValue] = {}
    if freshness.max_lag_ms is not None:
        metadata["max_lag_seconds"] = MetadataValue.float(freshness.max_lag_ms / 1000)
    if watermark is None:
        problems.append(f"{_what(spec)} has no watermark yet: "
                        + ("it has not run" if isinstance(spec, ViewSpec)
                           else "no row with a rowtime, and no run read it"))
    else:
        lag_ms = now_ms - watermark
        metadata["watermark"] = MetadataValue.timestamp(watermark / 1000)
        metadata["lag_seconds"] = MetadataValue.float(lag_ms / 1000)
        if freshness.max_lag_ms is not None and lag_ms > freshness.max_lag_ms:
            problems.append(f"{_what(spec)}'s watermark {_instant(watermark)} trails now by "
                            f"{lag_text(lag_ms / 1000)}, more than max-lag {freshness.max_lag}")
    partitions = spec.time.partitions
    if freshness.partition_deadline_ms is not None and partitions is not None:
        overdue = overdue_partitions(partitions, partition_windows(spec, specs), watermark,
                                     now_ms - freshness.partition_deadline_ms)
        metadata["overdue_partitions"] = MetadataValue.int(len(overdue))
        if overdue:
            first, last = overdue[0].key, overdue[-1].key
            metadata["first_overdue_partition"] = MetadataValue.text(first)
            metadata["last_overdue_partition"] = MetadataValue.text(last)
            keys = first if len(overdue) == 1 else f"{first} … {last}"
            problems.append(f"{len(overdue)} partition(s) not complete "
                            f"{freshness.partition_deadline} after their end: {keys}")
    if problems and isinstance(spec, ViewSpec):
        holder = holding_back(name, specs, watermarks)
        metadata["held_back_by"] = MetadataValue.text(holder.name)
        problems.append(_held_back(holder, specs, watermarks, now_ms))
    if not problems:
        description = (f"watermark {_instant(watermark)} trails now by "
                       f"{lag_text((now_ms - watermark) / 1000)}" if watermark is not None
                       else "fresh")
    else:
        description = "; ".join(problems)
    return AssetCheckResult(
        asset_key=AssetKey(spec.name), check_name=FRESHNESS_CHECK, passed=not problems,
        severity=AssetCheckSeverity.WARN, description=description, metadata=metadata,
    )


def overdue_partitions(
    partitions: TimePartitions, windows: Windows | None, watermark_ms: int | None,
    due_by_ms: int,
) -> list[PartitionWindow]:
    """The partitions that end by `due_by_ms` (now less the deadline) and that `watermark_ms`
    has not completed, oldest first."""
    start = round(partitions_definition(partitions).start.timestamp() * 1000)
    reach = 0 if windows is None else windows.size_ms  # how far completion trails an end
    lower = start if watermark_ms is None else max(watermark_ms - reach, start)
    if lower >= due_by_ms:
        return []
    return [
        window for window in windows_between(partitions, lower, due_by_ms)
        if window.end_ms <= due_by_ms
        and (watermark_ms is None or completed_at(window, windows) > watermark_ms)
    ]


def holding_back(name: str, specs: Mapping[str, Spec],
                 watermarks: Mapping[str, CurrentWatermark]) -> Holder:
    """What holds the watermark of `name` back: its input with the lowest watermark (none
    yet counts lowest), followed down to a source; or a view itself when its inputs are
    ahead of it, so that only a run of it is missing."""
    through: list[str] = []
    while True:
        spec = specs[name]
        inputs = ([table.lower() for table in referenced_tables(spec.query)
                   if table.lower() in specs] if isinstance(spec, ViewSpec) else [])
        if not inputs:
            return Holder(name, tuple(through), behind_its_inputs=False)
        lowest = min(inputs, key=lambda input_name: _order(watermarks[input_name]))
        own, theirs = watermarks[name].watermark_ms, watermarks[lowest].watermark_ms
        if theirs is not None and (own is None or theirs > own):
            return Holder(name, tuple(through), behind_its_inputs=True)
        through.append(name)
        name = lowest


def _held_back(holder: Holder, specs: Mapping[str, Spec],
               watermarks: Mapping[str, CurrentWatermark], now_ms: int) -> str:
    spec = specs[holder.name]
    watermark = watermarks[holder.name].watermark_ms
    run = f"run it (`refresh_views`, or `chronolake run {spec.name} --with-upstream`)"
    if holder.behind_its_inputs and not holder.through:
        return f"its inputs are ahead of it: {run}"
    via = f" (through {_names(holder.through[1:])})" if len(holder.through) > 1 else ""
    if holder.behind_its_inputs:
        return f"held back by {_what(spec)}{via}, which is behind its inputs: {run}"
    if watermark is None:
        return f"held back by {_what(spec)}{via}, which has no watermark yet"
    return (f"held back by {_what(spec)}{via}, whose watermark {_instant(watermark)} trails "
            f"now by {lag_text((now_ms - watermark) / 1000)}")


def _order(watermark: CurrentWatermark) -> tuple[bool, int]:
    """Lowest first: none yet, then the lowest watermark."""
    return (watermark.watermark_ms is not None, watermark.watermark_ms or 0)


def _what(spec: Spec) -> str:
    return f"{'source' if isinstance(spec, TableSpec) else 'view'} `{spec.name}`"


def _names(names: Iterable[str]) -> str:
    return ", ".join(f"view `{name}`" for name in names)


def _instant(epoch_ms: int) -> str:
    return datetime.fromtimestamp(epoch_ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S")
