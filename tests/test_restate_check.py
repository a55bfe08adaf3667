"""The rewrite check a restatement starts with: a source's changes since its consumer's last
run are accepted when every row they change lies in the range, and refused naming the times
of the rows outside it.

Real Delta tables written by delta-rs: a whole-table OVERWRITE of a table without the change
data feed, a predicate overwrite (delta-rs's `replaceWhere`), a delete and a reinsert,
updates. The orders are 1..4 at 09:05, 09:15, 09:25 and 09:35; the range restated is
[09:10, 09:30).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from _orders_and_rates import ORDERS_AND_RATES, RAW_ORDERS, ms, order_row
from deltalake import write_deltalake
from deltatables import as_table, delete_rows, update_rows, write_commits
from pyspark.sql import SparkSession

from chronolake import Catalog
from chronolake.errors import DefinitionError, RestateRangeError, RunError, SourceError
from chronolake.runtime.restate_check import check_rewrite

ORDERS = [order_row(1, 10, 5), order_row(2, 20, 15), order_row(3, 30, 25), order_row(4, 40, 35)]
IN_RANGE = "order_time >= '2026-11-02 09:10:00' AND order_time < '2026-11-02 09:30:00'"


RANGE = {"start_ms": ms(10), "end_ms": ms(30)}


@pytest.fixture
def lake(tmp_path: Path, spark: SparkSession) -> Catalog:
    """Orders (change data feed on) and raw orders (an append table without it), each with
    the four orders at version 0, which their consumer has consumed."""
    catalog = Catalog(tmp_path, spark)
    catalog.declare(ORDERS_AND_RATES + RAW_ORDERS)
    write_commits(tmp_path / "orders", [ORDERS])
    write_commits(tmp_path / "raw_orders", [ORDERS], cdf=False)
    return catalog


def test_an_overwrite_that_changes_only_rows_in_the_range_is_accepted(lake: Catalog) -> None:
    # the whole table rewritten, without change data files: Delta's feed says every row was
    # deleted and inserted; only orders 2 (amount), 3 (gone) and 5 (new) changed, all in range
    rewritten = [order_row(1, 10, 5), order_row(2, 21, 15), order_row(5, 50, 20),
                 order_row(4, 40, 35)]
    write_deltalake(str(Path(str(lake.root)) / "raw_orders"), as_table(rewritten),
                    mode="overwrite")
    accepted = check_rewrite(lake, "raw_orders", consumed_version=0, **RANGE)
    assert (accepted.after_version, accepted.end_version) == (0, 1)
    # removed: order 2 before, order 3; added: order 2 after, order 5
    assert (accepted.removed_rows, accepted.added_rows) == (2, 2)


def test_a_predicate_overwrite_inside_the_range_is_accepted(lake: Catalog) -> None:
    replaced = [order_row(2, 22, 15), order_row(6, 60, 29)]  # order 3 gone, order 6 new
    write_deltalake(str(Path(str(lake.root)) / "orders"), as_table(replaced), mode="overwrite",
                    predicate=IN_RANGE)
    accepted = check_rewrite(lake, "orders", consumed_version=0, **RANGE)
    assert (accepted.removed_rows, accepted.added_rows) == (2, 2)


def test_a_delete_and_reinsert_of_the_range_is_accepted(lake: Catalog) -> None:
    orders = Path(str(lake.root)) / "orders"
    delete_rows(orders, "order_id IN (2, 3)")
    write_commits(orders, [[order_row(2, 20, 15), order_row(3, 33, 25)]])  # 2 as it was
    accepted = check_rewrite(lake, "orders", consumed_version=0, **RANGE)
    assert (accepted.end_version, accepted.removed_rows, accepted.added_rows) == (2, 1, 1)


def test_a_predicate_overwrite_reaching_outside_the_range_is_refused_naming_the_times(
    lake: Catalog,
) -> None:
    # the predicate covers 09:00-09:30, so order 1 at 09:05 is removed with the range
    write_deltalake(str(Path(str(lake.root)) / "orders"), as_table(ORDERS[1:3]),
                    mode="overwrite", predicate=IN_RANGE.replace("09:10", "09:00"))
    with pytest.raises(RestateRangeError) as refused:
        check_rewrite(lake, "orders", consumed_version=0, **RANGE)
    assert str(refused.value) == (
        "table 'orders': version 1 removed 1 and added 0 row(s) outside the range "
        "[2026-11-02T09:10:00.000Z, 2026-11-02T09:30:00.000Z) being restated: 1 of them with "
        "event time 2026-11-02T09:05:00.000Z (last changed at version 1); expected changes only "
        "within the range; restate "
        "[2026-11-02T09:05:00.000Z, 2026-11-02T09:30:00.000Z) instead, or run a full refresh "
        "of the views that read it; nothing was written"
    )


def test_changes_on_both_sides_of_the_range_are_refused_and_the_named_range_fits(
    lake: Catalog,
) -> None:
    orders = Path(str(lake.root)) / "orders"
    delete_rows(orders, "order_id = 1")                  # 09:05, version 1
    update_rows(orders, "order_id = 2", {"amount": "21"})  # 09:15, in range
    update_rows(orders, "order_id = 4", {"amount": "41"})  # 09:35, version 3
    with pytest.raises(RestateRangeError, match=(
        r"versions 1\.\.3 removed 2 and added 1 row\(s\) outside the range .* 3 of them "
        r"with event times from "
        r"2026-11-02T09:05:00\.000Z to 2026-11-02T09:35:00\.000Z \(last changed at versions "
        r"1\.\.3\).*restate \[2026-11-02T09:05:00\.000Z, 2026-11-02T09:35:00\.001Z\) instead"
    )):
        check_rewrite(lake, "orders", consumed_version=0, **RANGE)
    widened = check_rewrite(lake, "orders", consumed_version=0, start_ms=ms(5),
                            end_ms=ms(35) + 1)
    assert (widened.removed_rows, widened.added_rows) == (3, 2)  # order 1 deleted, 2 updates
    # from a later consumed version only the last update is new: outside the range still
    with pytest.raises(RestateRangeError, match=r"version 3 removed 1 and added 1 row\(s\)"):
        check_rewrite(lake, "orders", consumed_version=2, **RANGE)


def test_a_changed_row_without_an_event_time_is_refused(lake: Catalog) -> None:
    untimed = {**order_row(7, 70, 20), "order_time": None}
    write_commits(Path(str(lake.root)) / "orders", [[untimed]], schema=as_table(ORDERS).schema)
    with pytest.raises(RestateRangeError, match=(
        r"removed 0 and added 1 row\(s\) outside the range .*: 1 of them without an event "
        r"time \(a null rowtime\) "
        r".*; run a full refresh of the views that read it; nothing was written"
    )):
        check_rewrite(lake, "orders", consumed_version=0, **RANGE)


def test_no_commit_since_the_consumed_version_changes_nothing(lake: Catalog) -> None:
    accepted = check_rewrite(lake, "orders", consumed_version=0, **RANGE)
    assert (accepted.end_version, accepted.removed_rows, accepted.added_rows) == (0, 0, 0)


def test_a_consumed_version_beyond_the_table_is_refused(lake: Catalog) -> None:
    with pytest.raises(SourceError, match=r"latest version is 0, before version 5, .* created "
                       r"anew .*run a full refresh"):
        check_rewrite(lake, "orders", consumed_version=5, **RANGE)


# -- refused before anything is read (no Spark) ------------------------------------------------


def _declared(tmp_path: Path, ddl: str) -> Catalog:
    catalog = Catalog(tmp_path)  # declaring starts no Spark, nor does the check before reading
    catalog.declare(ddl)
    return catalog


def test_an_empty_range_is_refused(tmp_path: Path) -> None:
    catalog = _declared(tmp_path, ORDERS_AND_RATES)
    with pytest.raises(RunError, match=r"the range \[2026-11-02T09:30:00\.000Z, "
                       r"2026-11-02T09:10:00\.000Z\) is empty"):
        check_rewrite(catalog, "orders", consumed_version=0, start_ms=ms(30), end_ms=ms(10))


def test_a_table_without_an_event_time_stored_in_its_rows_is_refused(tmp_path: Path) -> None:
    catalog = _declared(tmp_path, """
        CREATE TABLE plain (id BIGINT) WITH ('path' = 'plain');
        CREATE TABLE logged (
          id BIGINT, committed TIMESTAMP(3) METADATA FROM 'commit_timestamp' VIRTUAL,
          WATERMARK FOR committed AS committed
        ) WITH ('path' = 'logged');
        CREATE TABLE attached (
          id BIGINT, rowtime AS SYSTEM_ROWTIME(), WATERMARK FOR rowtime AS SYSTEM_WATERMARK()
        ) WITH ('path' = 'attached');
    """)
    with pytest.raises(DefinitionError, match=r"'plain' has no rowtime"):
        check_rewrite(catalog, "plain", consumed_version=0, **RANGE)
    with pytest.raises(DefinitionError, match=r"'logged': its rowtime 'committed' is the "
                       r"commit time"):
        check_rewrite(catalog, "logged", consumed_version=0, **RANGE)
    with pytest.raises(DefinitionError, match=r"'attached': its rowtime 'rowtime' is the "
                       r"commit time"):
        check_rewrite(catalog, "attached", consumed_version=0, **RANGE)

