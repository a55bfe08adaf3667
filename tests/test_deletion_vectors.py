"""Updates of a large derived table write in proportion to the change: deletion vectors.

A run that updates or deletes a few rows of a large data file marks them deleted in a
deletion vector and writes only the new rows, instead of rewriting the file. Every reader
sees the same table: chronolake (Spark), delta-rs's own engine, the change data feed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest
from _orders_and_rates import ORDERS_AND_RATES
from deltalake import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from chronolake.errors import SourceError
from chronolake.lake import DeltaRsBackend, LakeBackend, table_row_count
from chronolake.lake.changelog import COMMIT_VERSION, POSITION, ROW_KIND
from chronolake.lake.upserts import REWRITE_BELOW_ROWS
from chronolake.location import LocationLike

pytestmark = pytest.mark.spark

ROWS = 2 * REWRITE_BELOW_ROWS  # one data file large enough for deletion vectors


@pytest.fixture(scope="module")
def backend(spark: SparkSession) -> LakeBackend:
    return DeltaRsBackend(spark)


def _changes(spark: SparkSession, version: int, rows: list[tuple[int, int, str]]) -> DataFrame:
    """(id, value, kind) rows as one batch of changes, in list order."""
    return spark.createDataFrame(
        [(id_, value, kind, version, position) for position, (id_, value, kind)
         in enumerate(rows)],
        f"id BIGINT, value BIGINT, {ROW_KIND} STRING, {COMMIT_VERSION} BIGINT, {POSITION} BIGINT",
    )


def _commit(path: LocationLike, version: int) -> list[dict]:
    log = Path(str(path)) / "_delta_log" / f"{version:020d}.json"
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


def _state_everywhere(backend: LakeBackend, path: Path) -> dict[int, int]:
    """The table as chronolake reads it, after checking delta-rs's engine reads the same."""
    ours = {r["id"]: r["value"] for r in backend.snapshot(path).collect()}
    theirs = pa.table(pa.RecordBatchReader.from_stream(DeltaTable(str(path)).scan()))
    assert dict(zip(theirs["id"].to_pylist(), theirs["value"].to_pylist(), strict=True)) == ours
    assert table_row_count(path) == len(ours)
    return ours


def _feed(path: Path, version: int) -> list[tuple]:
    feed = DeltaTable(str(path)).load_cdf(starting_version=version, ending_version=version)
    return sorted((r["_change_type"], r["id"], r["value"])
                  for r in pa.table(feed.read_all()).to_pylist())


def test_a_few_updates_of_a_large_file_get_a_deletion_vector(
    spark: SparkSession, backend: LakeBackend, tmp_path: Path
) -> None:
    path = tmp_path / "out"
    initial = spark.range(ROWS).select(F.col("id"), F.col("id").alias("value")).coalesce(1)
    backend.append_dataframe(initial, path, app_id="t", app_version=1, enable_cdf=True)
    [big] = DeltaTable(str(path)).file_uris()

    first = _changes(spark, 1, [(5, 5, "-U"), (5, 500, "+U"), (7, 7, "-D"), (ROWS, 1, "+I")])
    version = backend.commit_changes(first, path, key=["id"], retracting=True, app_id="t",
                                     app_version=2)
    actions = _commit(path, version)
    [removed] = [a["remove"] for a in actions if "remove" in a]
    readded = [a["add"] for a in actions if "add" in a and "deletionVector" in a["add"]]
    assert removed["path"] == readded[0]["path"] == big.rsplit("/", 1)[-1]
    assert readded[0]["deletionVector"]["cardinality"] == 2  # ids 5 and 7: nothing rewritten
    new_rows = sum(json.loads(a["add"]["stats"])["numRecords"] for a in actions
                   if "add" in a and "deletionVector" not in a["add"])
    assert new_rows == 2  # id 5's new row and the new id
    assert DeltaTable(str(path)).protocol().reader_features == ["deletionVectors"]
    state = _state_everywhere(backend, path)
    assert len(state) == ROWS and state[5] == 500 and 7 not in state and state[ROWS] == 1
    assert _feed(path, version) == [
        ("delete", 7, 7), ("insert", ROWS, 1), ("update_postimage", 5, 500),
        ("update_preimage", 5, 5),
    ]

    # a second update of the same file: its deletion vector grows, the remove names the old one
    second = _changes(spark, 2, [(9, 9, "-D"), (5, 500, "-U"), (5, 501, "+U")])
    version = backend.commit_changes(second, path, key=["id"], retracting=True, app_id="t",
                                     app_version=3)
    actions = _commit(path, version)
    removes = {a["remove"]["path"]: a["remove"] for a in actions if "remove" in a}
    assert removes[readded[0]["path"]]["deletionVector"] == readded[0]["deletionVector"]
    [grown] = [a["add"] for a in actions if "add" in a and "deletionVector" in a["add"]]
    assert grown["deletionVector"]["cardinality"] == 3  # ids 5, 7 and 9
    state = _state_everywhere(backend, path)
    assert state[5] == 501 and 9 not in state and len(state) == ROWS - 1
    assert _feed(path, version) == [
        ("delete", 9, 9), ("update_postimage", 5, 501), ("update_preimage", 5, 500),
    ]

    # appends and a full rewrite keep working on a table with deletion vectors
    more = spark.createDataFrame([(ROWS + 1, 2)], "id BIGINT, value BIGINT")
    backend.append_dataframe(more, path, app_id="t", app_version=4)
    assert _state_everywhere(backend, path)[ROWS + 1] == 2
    backend.overwrite_dataframe(more, path)
    assert _state_everywhere(backend, path) == {ROWS + 1: 2}


def test_a_file_where_many_rows_change_is_rewritten(
    spark: SparkSession, backend: LakeBackend, tmp_path: Path
) -> None:
    path = tmp_path / "small"
    initial = spark.createDataFrame([(i, i) for i in range(10)], "id BIGINT, value BIGINT")
    backend.append_dataframe(initial.coalesce(1), path, app_id="t", app_version=1,
                             enable_cdf=True)
    changes = _changes(spark, 1, [(3, 3, "-U"), (3, 30, "+U")])
    version = backend.commit_changes(changes, path, key=["id"], retracting=True, app_id="t",
                                     app_version=2)
    actions = _commit(path, version)
    assert not [a for a in actions if "deletionVector" in a.get("add", {})]
    assert [a for a in actions if "remove" in a]  # copy-on-write: a small file is rewritten
    assert DeltaTable(str(path)).to_pyarrow_table().num_rows == 10  # readable by every reader


PIPELINE = ORDERS_AND_RATES + """
CREATE VIEW enriched AS
SELECT o.order_id, o.amount, o.order_time, o.amount * r.rate AS usd
FROM orders AS o JOIN rates FOR SYSTEM_TIME AS OF o.order_time AS r
ON o.currency = r.currency;
CREATE VIEW daily AS
SELECT window_start, window_end, COUNT(*) AS orders, SUM(usd) AS usd
FROM TABLE(TUMBLE(TABLE enriched, DESCRIPTOR(order_time), INTERVAL '1' DAY))
GROUP BY window_start, window_end;
"""


def test_corrections_spread_over_a_large_derived_table_rewrite_no_file(
    spark: SparkSession, tmp_path: Path
) -> None:
    from datetime import datetime, timedelta

    from deltatables import update_rows, write_commits

    from chronolake import Catalog
    from chronolake.lake.layout import output_path
    from chronolake.runtime.derived import DerivedTable

    start = datetime(2026, 11, 2)
    orders = pa.table({
        "order_id": pa.array(range(ROWS), pa.int64()),
        "currency": ["EUR"] * ROWS,
        "amount": pa.array([1] * ROWS, pa.int64()),
        "order_time": [start + timedelta(seconds=i) for i in range(ROWS)],
    })
    write_commits(tmp_path / "orders", [orders])
    write_commits(tmp_path / "rates", [[{"currency": "EUR", "rate": 2, "currency_time": start}],
                                       [{"currency": "EUR", "rate": 2,
                                         "currency_time": start + timedelta(days=1)}]])
    catalog = Catalog(tmp_path, spark)
    catalog.declare(PIPELINE)
    assert DerivedTable(catalog, "enriched").run().figures["inserts_out"] == ROWS
    # corrections spread over the whole table, and time moving past the first day
    update_rows(tmp_path / "orders", "order_id % 1000 = 0", {"amount": "3"})
    write_commits(tmp_path / "orders", [[{"order_id": ROWS, "currency": "EUR", "amount": 1,
                                          "order_time": start + timedelta(days=2)}]])
    write_commits(tmp_path / "rates", [[{"currency": "EUR", "rate": 2,
                                         "currency_time": start + timedelta(days=2)}]])
    result = DerivedTable(catalog, "enriched").run()
    assert result.figures["update_afters_out"] == ROWS // 1000
    out = output_path(tmp_path, "enriched")
    actions = _commit(out, result.output_version)
    readded = {a["add"]["path"] for a in actions if "deletionVector" in a.get("add", {})}
    removed = {a["remove"]["path"] for a in actions if "remove" in a}
    assert removed and removed == readded  # every touched file kept, its rows marked deleted
    usd = {r["order_id"]: r["usd"] for r in catalog.sql("SELECT * FROM enriched").collect()}
    assert len(usd) == ROWS + 1 and usd[0] == usd[1000] == 6 and usd[1] == 2
    # the next hop reads the corrections from the change feed, before its window closes
    DerivedTable(catalog, "daily").run()
    [day] = catalog.sql("SELECT orders, usd FROM daily").collect()
    assert (day["orders"], day["usd"]) == (ROWS, 2 * ROWS + 4 * (ROWS // 1000))


def test_updates_and_replacements_of_an_append_only_table_are_refused_with_nothing_written(
    spark: SparkSession, backend: LakeBackend, tmp_path: Path
) -> None:
    """`delta.appendOnly` forbids removing data (the Delta protocol's `appendOnly` feature):
    chronolake's own commits honour it, as Delta's writer does."""
    path = tmp_path / "out"
    rows = spark.range(3).select(F.col("id"), F.col("id").alias("value"))
    backend.append_dataframe(rows, path, app_id="t", app_version=1, enable_cdf=True)
    DeltaTable(str(path)).alter.set_table_properties({"delta.appendOnly": "true"})
    version, files = DeltaTable(str(path)).version(), sorted(p.name for p in path.rglob("*"))

    update = _changes(spark, 1, [(1, 1, "-U"), (1, 100, "+U")])
    with pytest.raises(SourceError, match=r"append-only \(delta.appendOnly = true\), and "
                       "applying this run's updates and deletes would update or delete its "
                       "rows; nothing was written"):
        backend.commit_changes(update, path, key=["id"], retracting=True, app_id="t",
                               app_version=2)
    with pytest.raises(SourceError, match="replacing its rows would update or delete"):
        backend.overwrite_dataframe(rows, path)

    assert DeltaTable(str(path)).version() == version
    assert sorted(p.name for p in path.rglob("*")) == files
    inserts = _changes(spark, 2, [(3, 3, "+I")])  # appending stays allowed
    assert backend.commit_changes(inserts, path, key=["id"], retracting=False, app_id="t",
                                  app_version=3) == version + 1
    assert _state_everywhere(backend, path) == {0: 0, 1: 1, 2: 2, 3: 3}
