"""A partitioned table's Dagster partitions, and the partitions its commits completed.

A run does not target partitions: it brings its table up to date. Each commit stamps the
partitions it completed or changed (`chronolake.lake.stamps`), and these become one
materialization per partition, recorded by the run that committed or, for commits made
outside Dagster, by the reconciling sensor: the lake is the truth.
"""

from __future__ import annotations

from dagster import TimeWindowPartitionsDefinition

from chronolake.schema import TableSpec, ViewSpec
from chronolake.watermarks.partitions import partitions_definition


def asset_partitions(spec: TableSpec | ViewSpec) -> TimeWindowPartitionsDefinition | None:
    """The time window partitions `spec` declares (None: not partitioned)."""
    partitions = spec.time.partitions
    return None if partitions is None else partitions_definition(partitions)
