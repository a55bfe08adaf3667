"""The lakes the restatement tests start from: sources written in one commit each, and their
views run once over them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from deltatables import write_commits
from pyspark.sql import SparkSession

from chronolake import Catalog
from chronolake.runtime.derived import DerivedTable


def run_once(
    root: Path, spark: SparkSession, ddl: str, views: Sequence[str],
    rows: Mapping[str, list[dict[str, Any]]], *, feeds: Sequence[str] = (),
) -> Catalog:
    """A lake declared by `ddl` whose tables hold `rows` (table name: its rows, one commit;
    with the change data feed for the tables in `feeds`), each of `views` run once, in order."""
    catalog = Catalog(root, spark)
    catalog.declare(ddl)
    for table, table_rows in rows.items():
        write_commits(root / table, [table_rows], cdf=table in feeds)
    for view in views:
        DerivedTable(catalog, view).run()
    return catalog
