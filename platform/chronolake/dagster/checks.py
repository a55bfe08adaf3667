"""Asset checks: the promises chronolake makes, checked after every run.

- `watermark_never_decreases`: a run's watermark is at least the previous run's.
- `late_row_rate`: rows dropped as late by the watermark rules (those written to the late side
  table) are at most a configured share of the rows read.
- `pending_rows_age`: no probe row has been waiting longer than a configured bound.
- `primary_key_unique`: the key of a keyed table or view is unique in its latest version.
"""

# No `from __future__ import annotations` here: Dagster reads the `context` annotation at
# definition time and refuses a string.

import time
from collections.abc import Mapping
from datetime import UTC, datetime

from dagster import (
    AssetCheckEvaluation,
    AssetCheckExecutionContext,
    AssetCheckKey,
    AssetCheckResult,
    AssetChecksDefinition,
    AssetCheckSeverity,
    AssetCheckSpec,
    AssetKey,
    DagsterInstance,
    DagsterLogManager,
    asset_check,
)
from dagster_pyspark import PySparkResource
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from chronolake.catalog import Catalog
from chronolake.catalog.checkpoint import CheckpointStore
from chronolake.dagster.resources import LakeResource
from chronolake.lake.changelog import COMMIT_TIMESTAMP
from chronolake.lake.tables import column_minimum
from chronolake.location import Location
from chronolake.runtime.result import RunResult
from chronolake.runtime.stored import STATE_PREFIX
from chronolake.runtime.window_operator import OPEN_ROLE
from chronolake.schema import TableSpec, ViewSpec
from chronolake.sql.operator_plan import registration_digest

WATERMARK_CHECK = "watermark_never_decreases"
LATE_RATE_CHECK = "late_row_rate"
PENDING_AGE_CHECK = "pending_rows_age"
PRIMARY_KEY_CHECK = "primary_key_unique"
_WAITING_ROLES = ("pending", OPEN_ROLE)  # state roles holding rows that wait for a watermark
LATE_RATE_DESCRIPTION = (
    "Rows dropped as late by the watermark rules — the rows this run wrote to the late side "
    "table (_chronolake/late/<view>): changes to a window already emitted, rows without a "
    "rowtime — are at most late_row_rate_threshold of the rows it read. Rows behind the "
    "watermark that a temporal join still answers from its history are not late."
)
RUN_CHECKS = (WATERMARK_CHECK, LATE_RATE_CHECK, PENDING_AGE_CHECK)
"""The checks every run of an incremental view evaluates, in `run_check_results`' order."""


def run_check_specs(name: str) -> list[AssetCheckSpec]:
    """The checks evaluated with every run of an incremental view."""
    return [
        AssetCheckSpec(WATERMARK_CHECK, asset=name,
                       description="The watermark after this run is not below the previous one."),
        AssetCheckSpec(LATE_RATE_CHECK, asset=name, description=LATE_RATE_DESCRIPTION),
        AssetCheckSpec(PENDING_AGE_CHECK, asset=name,
                       description="No pending row waits longer than max_pending_age_seconds."),
    ]


def run_check_results(
    instance: DagsterInstance, catalog: Catalog, lake: LakeResource, result: RunResult
) -> list[AssetCheckResult]:
    """Evaluate `run_check_specs` for a run that just finished."""
    key = AssetKey(result.table)
    previous = _previous_watermark(instance, key)
    current = None if result.watermark_ms is None else result.watermark_ms / 1000
    decreased = previous is not None and current is not None and current < previous
    rows_in = int(result.figures.get("rows_in", 0))
    late = int(result.figures.get("late_rows", 0))
    rate = late / rows_in if rows_in else 0.0
    oldest = _oldest_pending_age(catalog, result.table)
    return [
        AssetCheckResult(
            check_name=WATERMARK_CHECK, passed=not decreased, asset_key=key,
            metadata={"previous": previous or 0.0, "current": current or 0.0},
        ),
        AssetCheckResult(
            check_name=LATE_RATE_CHECK, passed=rate <= lake.late_row_rate_threshold,
            asset_key=key, severity=AssetCheckSeverity.WARN,
            metadata={"late_rows": late, "rows_in": rows_in, "rate": round(rate, 6),
                      "threshold": lake.late_row_rate_threshold},
        ),
        AssetCheckResult(
            check_name=PENDING_AGE_CHECK, passed=oldest <= lake.max_pending_age_seconds,
            asset_key=key, severity=AssetCheckSeverity.WARN,
            metadata={"oldest_pending_age_seconds": round(oldest, 3),
                      "bound_seconds": lake.max_pending_age_seconds},
        ),
    ]


def primary_key_check(
    spec: TableSpec | ViewSpec, path: Location | None
) -> AssetChecksDefinition:
    """`primary_key_unique` for a keyed table (its state) or view (its materialized table),
    as a check of its own (`primary_key_result`)."""

    @asset_check(asset=spec.name, name=PRIMARY_KEY_CHECK, description=primary_key_description(spec))
    def _check(
        context: AssetCheckExecutionContext, pyspark: PySparkResource, lake: LakeResource
    ) -> AssetCheckResult:
        catalog = lake.catalog(pyspark.spark_session, serving=spec.name)
        return primary_key_result(context.instance, context.log, catalog, spec, path)

    return _check


def primary_key_description(spec: TableSpec | ViewSpec) -> str:
    return f"({', '.join(spec.primary_key)}) is unique in the latest version."


def primary_key_result(
    instance: DagsterInstance, log: DagsterLogManager, catalog: Catalog,
    spec: TableSpec | ViewSpec, path: Location | None,
) -> AssetCheckResult:
    """Evaluate `primary_key_unique` on the latest version of `spec`'s table.

    A version checked before gives the same answer: the check then repeats the earlier
    evaluation's (its log line says so) instead of a Spark job, as after a run that found
    nothing new.
    """
    key = AssetCheckKey(AssetKey(spec.name), PRIMARY_KEY_CHECK)
    rows: DataFrame | None = None
    if isinstance(spec, TableSpec):  # a table without its Delta data fails here, saying so
        location, rows = catalog.table_path(spec), catalog.table(spec.name)
    elif path is not None and catalog.backend.is_delta_table(path):
        location = path
    else:
        return AssetCheckResult(check_name=PRIMARY_KEY_CHECK, asset_key=key.asset_key,
                                passed=True, metadata={"note": "not materialized yet"})
    # what the answer depends on: the registration (key, changelog mode), which table
    # (one created anew counts its versions from 0 again) and its version
    version = catalog.backend.latest_version(location)
    checked: dict[str, str | int] = {
        "registration": registration_digest(spec),
        "table_id": catalog.backend.table_id(location), "version": version,
    }
    earlier = _evaluated_on(instance, key, checked)
    if earlier is not None:
        stored = earlier.metadata["duplicate_keys"].value
        assert isinstance(stored, int), "recorded as an int, below"
        log.info(f"{spec.name}: {stored} duplicated key values in version {version}, "
                 "as checked before")
        return AssetCheckResult(check_name=PRIMARY_KEY_CHECK, asset_key=key.asset_key,
                                passed=earlier.passed,
                                metadata={"duplicate_keys": stored, **checked})
    if rows is None:
        rows = catalog.backend.snapshot(location, version)
    duplicates = _duplicate_keys(rows, spec.primary_key)
    log.info(f"{spec.name}: {duplicates} duplicated key values")
    return AssetCheckResult(check_name=PRIMARY_KEY_CHECK, asset_key=key.asset_key,
                            passed=duplicates == 0,
                            metadata={"duplicate_keys": duplicates, **checked})


def _evaluated_on(
    instance: DagsterInstance, key: AssetCheckKey, checked: Mapping[str, object]
) -> AssetCheckEvaluation | None:
    """The latest finished evaluation of `key` when it checked the same registration, table
    and version (not the one this step is: planned, not yet evaluated)."""
    records = instance.event_log_storage.get_asset_check_execution_history(key, limit=2)
    evaluation = next((record.evaluation for record in records
                       if isinstance(record.evaluation, AssetCheckEvaluation)), None)
    if evaluation is None or "duplicate_keys" not in evaluation.metadata:
        return None
    same = all(
        name in evaluation.metadata and evaluation.metadata[name].value == value
        for name, value in checked.items()
    )
    return evaluation if same else None


def _duplicate_keys(rows: DataFrame, key: tuple[str, ...]) -> int:
    """How many key values occur more than once (one aggregate job)."""
    grouped = rows.groupBy(*[F.col(f"`{k}`") for k in key]).count()
    return grouped.where(F.col("count") > 1).count()


def _previous_watermark(instance: DagsterInstance, key: AssetKey) -> float | None:
    event = instance.get_latest_materialization_event(key)
    if event is None or event.asset_materialization is None:
        return None
    value = event.asset_materialization.metadata.get("chronolake/watermark")
    # None before a watermark; `run_metadata` records a timestamp, a number reads the same
    seconds = getattr(value, "value", None)
    return float(seconds) if isinstance(seconds, int | float) else None


def _oldest_pending_age(catalog: Catalog, name: str) -> float:
    """Seconds since the oldest waiting row's commit (0 with none): rows pending in a temporal
    join's state, or held in a window aggregate's open windows.

    Read without Spark from the state tables' commit-time column (`column_minimum`): a
    Spark job here would add a second to every run.
    """
    store = CheckpointStore.of(catalog.root, name)
    tables = [store.location(path) for role, path in store.latest().state.items()
              if role in _WAITING_ROLES]
    minima = [column_minimum(table, STATE_PREFIX + COMMIT_TIMESTAMP) for table in tables]
    times = [moment for moment in minima if isinstance(moment, datetime)]  # or None: no rows
    if not times:
        return 0.0
    oldest = min(times)
    if oldest.tzinfo is None:  # stored without a zone: the session's, UTC
        oldest = oldest.replace(tzinfo=UTC)
    return max(time.time() - oldest.timestamp(), 0.0)
