"""Reads pinned to a watermark (issue 41, item 4): `Catalog.sql(query, complete_as_of=T)` and
`chronolake sql --complete-as-of T` read a derived table at the first version whose stamped
watermark reached T and its source at the version that commit consumed; a table without a
watermark, one not there yet, a source nothing pins and a vacuumed version are refused by
name.

One lake for the module: `orders` (watermark `ts - 2 s`) and `per_window`, a 10 s tumbling
window over it, run after each of three commits; the refusals that change the lake take a
copy of it.
"""

from __future__ import annotations

import json
import os
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, NamedTuple

import pyarrow as pa
import pytest
from click.testing import CliRunner
from deltalake import DeltaTable
from deltatables import write_commits
from pyspark.sql import SparkSession

from chronolake import Catalog
from chronolake.catalog.complete_as_of import as_of_millis
from chronolake.cli.app import main
from chronolake.errors import DefinitionError, SourceError, VersionGoneError
from chronolake.lake import DeltaRsBackend
from chronolake.lake.layout import output_path
from chronolake.lake.stamps import logged_stamps
from chronolake.runtime.derived import DerivedTable

pytestmark = pytest.mark.lake_contract  # delta-spark reads versions too (`./dev test`)

T0 = datetime(2024, 1, 1)
SCHEMA = pa.schema([("k", pa.int64()), ("ts", pa.timestamp("us")), ("price", pa.int64())])
DDL = [
    """CREATE TABLE orders (
      k BIGINT, ts TIMESTAMP(3), price BIGINT, WATERMARK FOR ts AS ts - INTERVAL '2' SECOND
    ) WITH ('path' = 'orders')""",
    """CREATE VIEW per_window AS
    SELECT window_start, window_end, window_time, COUNT(*) AS n, SUM(price) AS total
    FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '10' SECONDS))
    GROUP BY window_start, window_end, window_time""",
    # the same windows without their rowtime: a derived table without a watermark
    """CREATE VIEW per_window_untimed AS
    SELECT window_start, window_end, COUNT(*) AS n
    FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '10' SECONDS))
    GROUP BY window_start, window_end""",
]
# Watermarks after each commit: 10 s, 20 s, 33 s.
BATCHES = [[(1, 1), (2, 4), (3, 12)], [(4, 15), (5, 22)], [(6, 35)]]
AS_OF = "2024-01-01 00:00:15"  # reached by the second run only
BOTH = """SELECT 'orders' AS t, COUNT(*) AS n FROM orders
UNION ALL SELECT 'windows', COUNT(*) FROM per_window"""


class Lake(NamedTuple):
    root: Path
    output_versions: list[int]
    """`per_window`'s version after each run."""
    orders_versions: list[int]
    """`orders`' version after each commit."""


@pytest.fixture(scope="module")
def lake(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Lake:
    root = tmp_path_factory.mktemp("complete-as-of")
    output_versions, orders_versions = [], []
    for number, batch in enumerate(BATCHES):
        rows = [{"k": k, "ts": T0 + timedelta(seconds=s), "price": k} for k, s in batch]
        orders_versions.append(write_commits(root / "orders", [rows], schema=SCHEMA))
        catalog = Catalog(root, spark)
        if number == 0:
            for statement in DDL:
                catalog.execute(statement)
            DerivedTable(catalog, "per_window_untimed").run()
        result = DerivedTable(catalog, "per_window").run()
        assert result.output_version is not None
        output_versions.append(result.output_version)
    return Lake(root, output_versions, orders_versions)


def rows(frame: Any) -> list[tuple[Any, ...]]:
    return sorted(tuple(row) for row in frame.collect())


def test_the_time_is_read_as_utc_and_refused_when_it_is_none() -> None:
    expected = int(datetime(2026, 11, 2, 10, tzinfo=UTC).timestamp() * 1000)
    assert as_of_millis("2026-11-02 10:00") == expected
    assert as_of_millis("2026-11-02T11:00:00.000+01:00") == expected
    assert as_of_millis(datetime(2026, 11, 2, 10)) == expected
    with pytest.raises(DefinitionError, match=r"'yesterday': not a time; expected 'YYYY-MM-DD"):
        as_of_millis("yesterday")


def test_a_derived_table_is_read_at_the_first_version_past_the_time_and_its_source_as_consumed(
    spark: SparkSession, lake: Lake
) -> None:
    catalog = Catalog(lake.root, spark)
    path = output_path(lake.root, "per_window")
    stamps = {s.version: s for s in logged_stamps(path)}
    pinned = lake.output_versions[1]
    assert stamps[pinned].watermark_ms == as_of_millis("2024-01-01 00:00:20")
    assert stamps[pinned].input_versions == {"orders": lake.orders_versions[1]}

    windows = catalog.sql("SELECT * FROM per_window", complete_as_of=AS_OF)
    at_pin = DeltaRsBackend(spark).snapshot(path, pinned)
    assert rows(windows) == rows(at_pin.select(*windows.columns))
    assert len(rows(windows)) == 2 < len(rows(catalog.sql("SELECT * FROM per_window")))
    # the source read alongside is at the version the pinned commit consumed, not the latest
    both = dict(rows(catalog.sql(BOTH, complete_as_of=T0 + timedelta(seconds=15))))
    assert both == {"orders": 5, "windows": 2}
    assert dict(rows(catalog.sql(BOTH))) == {"orders": 6, "windows": 3}
    # reached exactly: the first run's version
    first = catalog.sql("SELECT * FROM per_window", complete_as_of="2024-01-01 00:00:10")
    assert len(rows(first)) == 1


@pytest.mark.parametrize(("query", "as_of", "error", "message"), [
    ("SELECT * FROM per_window_untimed", AS_OF, DefinitionError,
     r"derived table 'per_window_untimed' has no watermark .*keep the rowtime in its SELECT"),
    ("SELECT * FROM per_window", "2024-01-01 00:01", SourceError,
     r"derived table 'per_window' has not reached 2024-01-01 00:01:00.000 UTC: its watermark "
     r"is 2024-01-01 00:00:33.000 UTC \(version \d+\); run it again"),
    ("SELECT * FROM orders", AS_OF, DefinitionError,
     r"source table 'orders' has no watermark stamped on its commits .*no derived table this "
     r"query reads consumed it"),
])
def test_what_no_version_is_known_complete_for_is_refused_by_name(
    spark: SparkSession, lake: Lake, query: str, as_of: str, error: type[Exception],
    message: str,
) -> None:
    with pytest.raises(error, match=message):
        Catalog(lake.root, spark).sql(query, complete_as_of=as_of)


@pytest.mark.parametrize("removed", ["data files", "log entries"])
def test_a_version_the_lake_no_longer_keeps_is_refused_naming_both_retentions(
    spark: SparkSession, lake: Lake, tmp_path: Path, removed: str
) -> None:
    root = tmp_path / "lake"
    shutil.copytree(lake.root, root)
    if removed == "data files":  # compacted, then vacuumed: the source's old files are gone
        orders = DeltaTable(root / "orders")
        orders.optimize.compact()
        orders.vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
        where = r"orders: \d+ data file\(s\) of version 1 are missing \(removed by VACUUM\)"
    else:  # a checkpoint, then log cleanup of commits past retention: the stamps are gone
        path = output_path(root, "per_window").path
        output = DeltaTable(path)
        output.create_checkpoint()
        month_ago = (datetime.now() - timedelta(days=60)).timestamp()
        for commit in (path / "_delta_log").glob("*.json"):
            os.utime(commit, (month_ago, month_ago))
        output.cleanup_metadata()
        where = r"per_window: versions 0\.\.\d+ are no longer in the Delta log"
    with pytest.raises(VersionGoneError, match=where) as refused:
        Catalog(root, spark).sql(BOTH, complete_as_of=AS_OF)
    message = str(refused.value)
    assert "delta.logRetentionDuration" in message
    assert "delta.deletedFileRetentionDuration" in message


def test_the_command_line_reads_complete_as_of_a_time(lake: Lake) -> None:
    def sql(*extra: str) -> list[dict[str, Any]]:
        result = CliRunner().invoke(
            main, ["sql", "--lake", str(lake.root), "-e", BOTH, "--format", "jsonl", *extra]
        )
        assert result.exit_code == 0, result.output
        return [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]

    assert {r["t"]: r["n"] for r in sql("--complete-as-of", AS_OF)} == {
        "orders": 5, "windows": 2,
    }
    refused = CliRunner().invoke(
        main, ["sql", "--lake", str(lake.root), "-e", BOTH, "--complete-as-of", "noon"]
    )
    assert refused.exit_code == 2
    assert "Invalid value for '--complete-as-of'" in refused.output
