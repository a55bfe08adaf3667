"""What Dagster recorded of a partitioned view's run."""

from __future__ import annotations

from dagster import AssetKey, DagsterInstance


def latest_observation_metadata(instance: DagsterInstance, key: str) -> dict[str, object]:
    """The latest run's figures of a time partitioned view: an observation, since a run records
    as materialized only the partitions its watermark completed."""
    records = instance.fetch_observations(AssetKey(key), limit=1).records
    assert records, f"{key} has no observation"
    observation = records[0].event_log_entry.asset_observation
    assert observation is not None
    return {name: value.value for name, value in observation.metadata.items()}
