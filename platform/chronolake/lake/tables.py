"""Whole-table facts for assets, from the Delta log alone (no Spark): version and size.

These take a table location, not a spec: Dagster assets observe and
materialize tables without a changelog in sight.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable

from chronolake.lake.backend import not_a_delta_table
from chronolake.lake.deletion_vectors import deleted_rows


def table_version(path: str | Path) -> int:
    """The latest Delta version at `path`, from the log alone (no Spark)."""
    return _table(path).version()


def table_row_count(path: str | Path) -> int:
    """Rows in the latest version, summed from the log's per-file statistics less the rows
    deletion vectors delete (no Spark).

    Files logged without statistics count as zero rows; every writer chronolake
    uses (delta-rs, Spark through `append_dataframe`) logs them.
    """
    table = _table(path)
    # One record count per active file: metadata-sized.
    counts = pa.table(table.get_add_actions(flatten=True))["num_records"]
    return sum(count or 0 for count in counts.to_pylist()) - deleted_rows(table).num_rows


def _table(path: str | Path) -> DeltaTable:
    if not DeltaTable.is_deltatable(str(path)):
        raise not_a_delta_table(path)
    return DeltaTable(str(path))
