"""Whole-table facts and writes for assets: where views live, a table's version and size.

These take a table location, not a spec: Dagster assets observe and
materialize tables without a changelog in sight.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable
from pyspark.sql import DataFrame, SparkSession

from chronolake.lake.backend import not_a_delta_table
from chronolake.lake.selector import backend_for

VIEWS_FOLDER = Path("_chronolake") / "views"


def view_path(root: str | Path, name: str) -> Path:
    """Where a materialized view lives: `<lake root>/_chronolake/views/<name>`."""
    return Path(root) / VIEWS_FOLDER / name


def table_version(path: str | Path) -> int:
    """The latest Delta version at `path`, from the log alone (no Spark)."""
    return _table(path).version()


def table_row_count(path: str | Path) -> int:
    """Rows in the latest version, summed from the log's per-file statistics (no Spark).

    Files logged without statistics count as zero rows; every writer chronolake
    uses (delta-rs, Spark through `append_dataframe`) logs them.
    """
    # One record count per active file: metadata-sized.
    counts = pa.table(_table(path).get_add_actions(flatten=True))["num_records"]
    return sum(count or 0 for count in counts.to_pylist())


def read_delta(spark: SparkSession, path: str | Path) -> DataFrame:
    """The latest snapshot of the table at `path`, through the session's backend."""
    return backend_for(spark).snapshot(path)


def write_snapshot(df: DataFrame, path: str | Path) -> int:
    """Replace the table at `path` with `df` (creating it); return the new version."""
    return backend_for(df.sparkSession).overwrite_dataframe(df, path)


def _table(path: str | Path) -> DeltaTable:
    if not DeltaTable.is_deltatable(str(path)):
        raise not_a_delta_table(path)
    return DeltaTable(str(path))
