"""Automation for assets downstream of chronolake tables: run each partition once it is complete.

A chronolake run records a partition of a partitioned table as materialized only once the
table's watermark has passed its end (and again when a later run changes its rows), so an
upstream partition that is materialized is complete. Dagster's `AutomationCondition.eager()`
looks only at the latest time window, and its `since_last_handled()` treats the first
evaluation as handled: partitions completed before then, or any older than the latest
window (a catch-up, a late correction), are never requested. `on_complete_partitions()`
considers every partition.
"""

from __future__ import annotations

from dagster import AutomationCondition

_AC = AutomationCondition


def on_complete_partitions() -> AutomationCondition:
    """Request every partition whose upstream partitions are all materialized (complete), once,
    and again when one of them is materialized again (a change to a complete partition).

    - Never while an upstream partition is missing or in progress, nor while the partition
      itself is in progress.
    - On its first evaluation it requests the partitions that are missing although their
      upstream is complete (the history), not only the latest time window as `eager()` does.
    - A partition is requested once per trigger: a failed run is not retried until an
      upstream partition changes again (or the partition is launched by hand).

    Dagster's automation daemon evaluates it (`dagster dev` runs it): the sensor
    `default_automation_condition_sensor`, or an `AutomationConditionSensorDefinition`
    targeting the asset, must be running.

    Example:
        >>> @asset(partitions_def=asset_partitions(spec), deps=[spec.name],
        ...        automation_condition=on_complete_partitions())
        ... def daily_report(context): ...
    """
    upstream_complete = (~_AC.any_deps_missing() & ~_AC.any_deps_in_progress()).with_label(
        "upstream complete"
    )
    became_ready = (_AC.missing() & upstream_complete).newly_true().with_label(
        "missing, upstream newly complete"
    )
    # not `since_last_handled()`: it counts the first evaluation as handled, which drops the
    # partitions complete by then
    handled = (_AC.newly_requested() | _AC.newly_updated()).with_label("handled")
    return (
        (became_ready | _AC.any_deps_updated()).since(handled)
        & upstream_complete
        & ~_AC.in_progress()
    ).with_label("on_complete_partitions")
