"""History as a table (issue 41): `FOR SYSTEM_TIME ALL` on a versioned table, queried and as a
view run incrementally.

The rules worked out by hand come from one op-column rates table fed in four commits, a view
run after each: out-of-order versions, a tie at one time (the later arrival wins, a correction
of the row), a delete that closes an interval, a delete at a version's own time that erases
it, a re-insert, and a late version that splits an interval across runs.
"""

from __future__ import annotations

import os
import tempfile
from datetime import datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pytest
from _rates_history import HISTORY_VIEW_DDL, RATES_DDL, RATES_SCHEMA, at, rate
from deltalake import DeltaTable
from deltatables import delete_rows, table_rows, update_rows, write_commits
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from chronolake import Catalog, DefinitionError, SourceError, VersionGoneError
from chronolake.lake.changelog import COMMIT_VERSION
from chronolake.runtime.derived import DerivedTable

_ORDERS = pa.schema([("id", pa.int64()), ("currency", pa.string()),
                     ("order_time", pa.timestamp("us"))])
_DDL = RATES_DDL + """
CREATE TABLE orders (
  id BIGINT, currency STRING, order_time TIMESTAMP(3),
  WATERMARK FOR order_time AS order_time
) WITH ('path' = 'orders', 'changelog' = 'append');
""" + HISTORY_VIEW_DDL
_HISTORY = "SELECT currency, rate, valid_from, valid_to FROM rates FOR SYSTEM_TIME ALL"
Version = tuple[str, int, datetime, datetime | None]


_COMMITS = [
    [rate("EUR", 100, 0, "+I"), rate("USD", 200, 0, "+I"), rate("GBP", 300, 30, "+I")],
    # EUR's 10 arrives after its 20: out of order; GBP's 301 ties with 300 at 30 and wins
    [rate("EUR", 102, 20), rate("EUR", 101, 10), rate("GBP", 301, 30)],
    # USD is deleted at 25; GBP's -D at 30 erases the version from 30; a -U is no version
    [rate("USD", 201, 25, "-D"), rate("GBP", 301, 30, "-D"), rate("EUR", 102, 20, "-U")],
    # USD comes back at 60; EUR's 99 at 5 lands between 0 and 10 and splits that interval
    [rate("USD", 202, 60, "+I"), rate("EUR", 99, 5)],
]
_AFTER_EACH_COMMIT: list[set[Version]] = [
    {("EUR", 100, at(0), None), ("USD", 200, at(0), None), ("GBP", 300, at(30), None)},
    {("EUR", 100, at(0), at(10)), ("EUR", 101, at(10), at(20)), ("EUR", 102, at(20), None),
     ("USD", 200, at(0), None), ("GBP", 301, at(30), None)},
    {("EUR", 100, at(0), at(10)), ("EUR", 101, at(10), at(20)), ("EUR", 102, at(20), None),
     ("USD", 200, at(0), at(25))},
    {("EUR", 100, at(0), at(5)), ("EUR", 99, at(5), at(10)),
     ("EUR", 101, at(10), at(20)), ("EUR", 102, at(20), None),
     ("USD", 200, at(0), at(25)), ("USD", 202, at(60), None)},
]
# The view's changes in each run: (kind, currency, rate, valid_from, valid_to).
_CHANGES = [
    {("+I", "EUR", 100, at(0), None), ("+I", "USD", 200, at(0), None),
     ("+I", "GBP", 300, at(30), None)},
    {("-U", "EUR", 100, at(0), None), ("+U", "EUR", 100, at(0), at(10)),
     ("+I", "EUR", 101, at(10), at(20)), ("+I", "EUR", 102, at(20), None),
     ("-U", "GBP", 300, at(30), None), ("+U", "GBP", 301, at(30), None)},
    {("-U", "USD", 200, at(0), None), ("+U", "USD", 200, at(0), at(25)),
     ("-D", "GBP", 301, at(30), None)},
    {("-U", "EUR", 100, at(0), at(10)), ("+U", "EUR", 100, at(0), at(5)),
     ("+I", "EUR", 99, at(5), at(10)), ("+I", "USD", 202, at(60), None)},
]


def _versions(rows: list) -> set[Version]:
    return {(r["currency"], r["rate"], r["valid_from"], r["valid_to"]) for r in rows}


def _lake(lake: Path, spark: SparkSession, ddl: str = _DDL, orders: pa.Schema = _ORDERS
          ) -> Catalog:
    write_commits(lake / "rates", [[]], schema=RATES_SCHEMA, cdf=False)
    write_commits(lake / "orders", [[]], schema=orders, cdf=False)
    catalog = Catalog(lake, spark)
    list(catalog.run_script(ddl))
    return catalog


@pytest.fixture(scope="module")
def fed(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory
        ) -> tuple[Catalog, Path, list[set[tuple]]]:
    """The hand-worked lake after its four commits, the view run after each, with each
    run's changes as the view's change data feed tells them."""
    lake = tmp_path_factory.mktemp("history")
    catalog = _lake(lake, spark)
    view = DerivedTable(catalog, "rates_history")
    changes = []
    for number, commit in enumerate(_COMMITS):
        write_commits(lake / "rates", [commit], schema=RATES_SCHEMA, cdf=False)
        result = view.run()
        assert _versions(catalog.sql(_HISTORY).collect()) == _AFTER_EACH_COMMIT[number]
        assert _versions(catalog.table("rates_history").collect()) == _AFTER_EACH_COMMIT[number]
        run_changes = catalog.changelog("rates_history").where(
            f"{COMMIT_VERSION} = {result.output_version}").collect()
        changes.append({(r["_row_kind"], r["currency"], r["rate"], r["valid_from"],
                         r["valid_to"]) for r in run_changes})
    return catalog, lake, changes


def test_each_run_emits_the_changes_worked_out_by_hand(
    fed: tuple[Catalog, Path, list[set[tuple]]]
) -> None:
    """A late version splits an interval (-U/+U of the earlier row, +I of its own); a tie is
    a correction (-U/+U); a delete closes the interval (-U/+U); a delete at a version's time
    erases it (-D); a -U is no version, and touches nothing."""
    _, _, changes = fed
    assert changes == _CHANGES


def test_committed_at_is_the_time_of_the_source_commit_that_carried_the_version(
    fed: tuple[Catalog, Path, list[set[tuple]]]
) -> None:
    catalog, _, _ = fed
    commits = {r["_commit_version"]: r["_commit_timestamp"]
               for r in catalog.changelog("rates").collect()}
    rows = {(r["currency"], r["rate"]): r["committed_at"]
            for r in catalog.table("rates_history").collect()}
    assert rows[("EUR", 99)] == commits[4]  # the fourth commit (version 0 is the empty one)
    assert rows[("EUR", 100)] == commits[1]
    assert rows[("USD", 202)] == commits[4]
    assert rows == {(r["currency"], r["rate"]): r["committed_at"]
                    for r in catalog.sql(
                        "SELECT * FROM rates FOR SYSTEM_TIME ALL").collect()}


@pytest.mark.parametrize(("clause", "expected"), [
    # valid at some time in [09:07, 09:12): EUR 99 [5, 10) and 101 [10, 20), USD 200 [0, 25)
    ("FROM TIMESTAMP '2026-11-02 09:07:00' TO TIMESTAMP '2026-11-02 09:12:00'",
     {("EUR", 99), ("EUR", 101), ("USD", 200)}),
    # FROM ... TO excludes a version starting at its end; BETWEEN includes it
    ("FROM TIMESTAMP '2026-11-02 09:07:00' TO TIMESTAMP '2026-11-02 09:10:00'",
     {("EUR", 99), ("USD", 200)}),
    ("BETWEEN TIMESTAMP '2026-11-02 09:07:00' AND TIMESTAMP '2026-11-02 09:10:00'",
     {("EUR", 99), ("EUR", 101), ("USD", 200)}),
    # wholly inside [09:00, 09:20]: a current version never is
    ("CONTAINED IN (TIMESTAMP '2026-11-02 09:00:00', TIMESTAMP '2026-11-02 09:20:00')",
     {("EUR", 100), ("EUR", 99), ("EUR", 101)}),
    # the deleted gap of USD: only EUR's current version
    ("FROM TIMESTAMP '2026-11-02 09:30:00' TO TIMESTAMP '2026-11-02 09:40:00'",
     {("EUR", 102)}),
])
def test_ranges_select_versions_by_validity(
    fed: tuple[Catalog, Path, list[set[tuple]]], clause: str, expected: set[tuple]
) -> None:
    catalog, _, _ = fed
    rows = catalog.sql(f"SELECT currency, rate FROM rates FOR SYSTEM_TIME {clause}").collect()
    assert {(r["currency"], r["rate"]) for r in rows} == expected


def test_predicates_on_validity_select_what_was_valid_when(
    fed: tuple[Catalog, Path, list[set[tuple]]]
) -> None:
    """Plain SQL over the history: the rate valid at 09:07 per currency, and the current ones,
    also joined with another table and aggregated (a query computed on read)."""
    catalog, _, _ = fed
    at_seven = catalog.sql(
        "SELECT h.currency, h.rate FROM rates FOR SYSTEM_TIME ALL AS h "
        "WHERE h.valid_from <= TIMESTAMP '2026-11-02 09:07:00' "
        "AND (h.valid_to IS NULL OR h.valid_to > TIMESTAMP '2026-11-02 09:07:00')").collect()
    assert {(r["currency"], r["rate"]) for r in at_seven} == {("EUR", 99), ("USD", 200)}
    counted = catalog.sql(
        "SELECT currency, COUNT(*) AS versions, SUM(CASE WHEN valid_to IS NULL THEN 1 END) "
        "AS current FROM rates FOR SYSTEM_TIME ALL GROUP BY currency").collect()
    assert {(r["currency"], r["versions"], r["current"]) for r in counted} == {
        ("EUR", 4, 1), ("USD", 2, 1)}


def test_as_of_a_column_outside_a_join_is_still_refused(
    fed: tuple[Catalog, Path, list[set[tuple]]]
) -> None:
    catalog, _, _ = fed
    with pytest.raises(DefinitionError, match="only read in a join"):
        catalog.sql("SELECT * FROM rates FOR SYSTEM_TIME AS OF rates.currency_time")


def test_a_history_needs_a_versioned_table(spark: SparkSession, tmp_path: Path) -> None:
    """Refused at CREATE VIEW, naming the table and what to declare; the catalog unchanged."""
    catalog = _lake(tmp_path, spark)
    before = sorted(catalog.specs())
    with pytest.raises(DefinitionError, match=r"'orders' has no primary key.*PRIMARY KEY"):
        catalog.execute("CREATE VIEW h AS SELECT * FROM orders FOR SYSTEM_TIME ALL")
    with pytest.raises(DefinitionError, match=r"keyed by \(currency, valid_from\).*drops "
                                              r"'valid_from'"):
        catalog.execute("CREATE VIEW h AS SELECT currency, rate FROM rates FOR SYSTEM_TIME ALL")
    catalog.execute("CREATE VIEW eur AS SELECT * FROM rates WHERE currency = 'EUR'")
    with pytest.raises(DefinitionError, match=r"'eur' is a view computed on read"):
        catalog.sql("SELECT * FROM eur FOR SYSTEM_TIME ALL")
    assert sorted(catalog.specs()) == sorted([*before, "eur"])


_DEDUP_DDL = _DDL + """
CREATE TABLE rate_log (
  currency STRING, rate BIGINT, currency_time TIMESTAMP(3),
  WATERMARK FOR currency_time AS currency_time
) WITH ('path' = 'rate_log', 'changelog' = 'append');
CREATE VIEW latest_rates AS
SELECT currency, rate, currency_time FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY currency ORDER BY currency_time DESC) AS rownum
  FROM rate_log) WHERE rownum = 1;
CREATE VIEW latest_history AS SELECT * FROM latest_rates FOR SYSTEM_TIME ALL;
CREATE VIEW enriched AS
SELECT o.id, o.currency, o.order_time, r.rate
FROM orders AS o JOIN latest_rates FOR SYSTEM_TIME AS OF o.order_time AS r
ON o.currency = r.currency;
"""


def test_a_deduplication_views_history_is_the_versions_the_join_uses(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Keep-last drops a version older than its key's latest (Flink's deduplication does):
    the history leaves it out, and the temporal join never meets it."""
    catalog = _lake(tmp_path, spark, _DEDUP_DDL)
    log = pa.schema([("currency", pa.string()), ("rate", pa.int64()),
                     ("currency_time", pa.timestamp("us"))])
    write_commits(tmp_path / "rate_log", [
        [{"currency": "EUR", "rate": 1, "currency_time": at(0)},
         {"currency": "EUR", "rate": 3, "currency_time": at(20)}],
        [{"currency": "EUR", "rate": 2, "currency_time": at(10)}],  # older than 20: dropped
    ], schema=log, cdf=False)
    write_commits(tmp_path / "orders", [[
        {"id": 1, "currency": "EUR", "order_time": at(12)},
        {"id": 2, "currency": "EUR", "order_time": at(25)},
    ]], schema=_ORDERS, cdf=False)
    expected = {("EUR", 1, at(0), at(20)), ("EUR", 3, at(20), None)}
    bounded = catalog.sql("SELECT * FROM latest_rates FOR SYSTEM_TIME ALL").collect()
    assert _versions(bounded) == expected
    DerivedTable(catalog, "latest_history").run()
    assert _versions(catalog.table("latest_history").collect()) == expected
    joined = catalog.sql("SELECT o.id, r.rate FROM orders AS o JOIN latest_rates FOR "
                         "SYSTEM_TIME AS OF o.order_time AS r ON o.currency = r.currency")
    assert {(r["id"], r["rate"]) for r in joined.collect()} == {(1, 1), (2, 3)}


def test_a_derived_tables_history_follows_its_changelog(
    spark: SparkSession, tmp_path: Path
) -> None:
    """A temporal join's output keyed by the order: an order updated at the same time is
    corrected in place, so its history holds its latest row only."""
    ddl = _DEDUP_DDL.replace("'orders', 'changelog' = 'append'",
                             "'orders', 'changelog' = 'op-column', 'changelog.op-column' = 'op'")
    ddl = ddl.replace("order_time TIMESTAMP(3),\n", "order_time TIMESTAMP(3), "
                      "PRIMARY KEY (id) NOT ENFORCED,\n")
    ddl += "CREATE VIEW enriched_history AS SELECT * FROM enriched FOR SYSTEM_TIME ALL;"
    orders = _ORDERS.append(pa.field("op", pa.string()))
    catalog = _lake(tmp_path, spark, ddl, orders)
    log = pa.schema([("currency", pa.string()), ("rate", pa.int64()),
                     ("currency_time", pa.timestamp("us"))])
    write_commits(tmp_path / "rate_log", [[
        {"currency": "EUR", "rate": 1, "currency_time": at(0)},
        {"currency": "USD", "rate": 5, "currency_time": at(0)},
        {"currency": "GBP", "rate": 9, "currency_time": at(10)}]], schema=log, cdf=False)
    write_commits(tmp_path / "orders", [
        [{"id": 1, "currency": "EUR", "order_time": at(2), "op": "+I"}],
        [{"id": 1, "currency": "USD", "order_time": at(2), "op": "+U"}],
    ], schema=orders, cdf=False)
    DerivedTable(catalog, "enriched").run()
    DerivedTable(catalog, "enriched_history").run()
    rows = catalog.table("enriched_history").collect()
    assert [(r["id"], r["currency"], r["rate"], r["valid_from"], r["valid_to"]) for r in rows] == [
        (1, "USD", 5, at(2), None)]
    assert _versions(catalog.table("enriched_history").select(
        "currency", "rate", "valid_from", "valid_to").collect()) == _versions(
        catalog.sql("SELECT * FROM enriched FOR SYSTEM_TIME ALL").collect())


# -- the property -------------------------------------------------------------------------------

_CHANGE = st.tuples(st.sampled_from(["A", "B", "C"]), st.integers(0, 9),
                    st.sampled_from(["+I", "+U", "+U", "-U", "-D"]))
_ROUNDS = st.lists(st.lists(st.lists(_CHANGE, min_size=1, max_size=4), min_size=1, max_size=2),
                   min_size=1, max_size=4)


@pytest.mark.slow
@settings(max_examples=5, deadline=None, suppress_health_check=list(HealthCheck),
          phases=(Phase.explicit, Phase.reuse, Phase.generate))
@given(rounds=_ROUNDS, probes=st.lists(st.tuples(st.sampled_from(["A", "B", "C"]),
                                                 st.integers(0, 10)), max_size=8))
def test_the_history_view_equals_the_history_of_the_whole_changelog(
    spark: SparkSession, rounds: list[list[list[tuple[str, int, str]]]],
    probes: list[tuple[str, int]],
) -> None:
    """Any op-column changes (ties, deletes, -U rows, late versions), in commits grouped
    into runs: after each run the view equals the bounded history of everything so far; and
    the version a temporal join meets at any time is the history row valid then."""
    with tempfile.TemporaryDirectory(prefix="history-") as directory:
        lake = Path(directory)
        catalog = _lake(lake, spark)
        view = DerivedTable(catalog, "rates_history")
        value = 0
        for commits in rounds:
            for changes in commits:
                rows = []
                for currency, minute, op in changes:
                    value += 1
                    rows.append(rate(currency, value, minute, op))
                write_commits(lake / "rates", [rows], schema=RATES_SCHEMA, cdf=False)
            view.run()
            bounded = _versions(catalog.sql(_HISTORY).collect())
            assert _versions(catalog.table("rates_history").collect()) == bounded
            assert len(table_rows(str(lake / "_chronolake" / "views" / "rates_history"))
                       ) == len(bounded)
        write_commits(lake / "orders", [[
            {"id": i, "currency": c, "order_time": at(m)} for i, (c, m) in enumerate(probes)
        ]], schema=_ORDERS, cdf=False)
        joined = catalog.sql(
            "SELECT o.id, r.rate FROM orders AS o JOIN rates FOR SYSTEM_TIME AS OF o.order_time "
            "AS r ON o.currency = r.currency").collect()
        valid_then = catalog.sql(
            "SELECT o.id, h.rate FROM orders AS o JOIN rates FOR SYSTEM_TIME ALL AS h "
            "ON o.currency = h.currency AND h.valid_from <= o.order_time "
            "AND (h.valid_to IS NULL OR o.order_time < h.valid_to)").collect()
        assert sorted(tuple(r) for r in joined) == sorted(tuple(r) for r in valid_then)


_SOURCES_DDL = """
CREATE TABLE rates_cdf (
  currency STRING, rate BIGINT, currency_time TIMESTAMP(3),
  WATERMARK FOR currency_time AS currency_time,
  PRIMARY KEY (currency) NOT ENFORCED
) WITH ('path' = 'rates_cdf', 'changelog' = 'cdf');
CREATE TABLE rate_upserts (
  currency STRING, rate BIGINT, currency_time TIMESTAMP(3),
  WATERMARK FOR currency_time AS currency_time,
  PRIMARY KEY (currency) NOT ENFORCED
) WITH ('path' = 'rate_upserts', 'changelog' = 'append');
CREATE VIEW cdf_history AS SELECT * FROM rates_cdf FOR SYSTEM_TIME ALL;
CREATE VIEW upsert_history AS SELECT * FROM rate_upserts FOR SYSTEM_TIME ALL;
"""


def test_change_data_feed_and_upsert_sources_have_histories(
    spark: SparkSession, tmp_path: Path
) -> None:
    """A CDF table's update is a new version (its -U no version); its delete carries the
    deleted row's time, so it erases that version (the join meets no version from then on).
    An append-only table with a key is a stream of upserts: each row a version."""
    log = pa.schema([("currency", pa.string()), ("rate", pa.int64()),
                     ("currency_time", pa.timestamp("us"))])
    write_commits(tmp_path / "rates_cdf", [[
        {"currency": "EUR", "rate": 1, "currency_time": at(0)},
        {"currency": "USD", "rate": 5, "currency_time": at(0)}]], schema=log)
    update_rows(tmp_path / "rates_cdf", "currency = 'EUR'",
                {"rate": "2", "currency_time": "'2026-11-02 09:10:00'"})
    delete_rows(tmp_path / "rates_cdf", "currency = 'USD'")
    write_commits(tmp_path / "rate_upserts", [
        [{"currency": "EUR", "rate": 1, "currency_time": at(10)}],
        [{"currency": "EUR", "rate": 2, "currency_time": at(0)}],  # late: splits nothing
    ], schema=log, cdf=False)
    catalog = _lake(tmp_path, spark, _DDL + _SOURCES_DDL)
    expected = {
        "rates_cdf": {("EUR", 1, at(0), at(10)), ("EUR", 2, at(10), None)},
        "rate_upserts": {("EUR", 2, at(0), at(10)), ("EUR", 1, at(10), None)},
    }
    for table, view in (("rates_cdf", "cdf_history"), ("rate_upserts", "upsert_history")):
        bounded = catalog.sql(f"SELECT * FROM {table} FOR SYSTEM_TIME ALL").collect()
        assert _versions(bounded) == expected[table], table
        DerivedTable(catalog, view).run()
        assert _versions(catalog.table(view).collect()) == expected[table], view


def test_as_of_a_constant_travels_to_the_version_current_then(
    fed: tuple[Catalog, Path, list[set[tuple]]]
) -> None:
    """FLIP-308's time travel: the table as its last commit at or before the time left it,
    for a source and for a derived table; before the first commit it is refused."""
    catalog, lake, _ = fed
    commits = sorted({(r["_commit_version"], r["_commit_timestamp"])
                      for r in catalog.changelog("rates").collect()})
    # rates after its second commit: each key's last change by arrival (EUR's 101 came last)
    second = commits[1][1]
    rows = catalog.sql("SELECT currency, rate FROM rates FOR SYSTEM_TIME AS OF TIMESTAMP "
                       f"'{second:%Y-%m-%d %H:%M:%S.%f}' AS r").collect()
    assert {(r["currency"], r["rate"]) for r in rows} == {
        ("EUR", 101), ("USD", 200), ("GBP", 301)}
    view_commits = sorted({(r["_commit_version"], r["_commit_timestamp"])
                           for r in catalog.changelog("rates_history").collect()})
    first_run = view_commits[0][1]
    rows = catalog.sql("SELECT currency, rate, valid_to FROM rates_history FOR SYSTEM_TIME AS OF "
                       f"TIMESTAMP '{first_run:%Y-%m-%d %H:%M:%S.%f}'").collect()
    assert {(r["currency"], r["rate"], r["valid_to"]) for r in rows} == {
        ("EUR", 100, None), ("USD", 200, None), ("GBP", 300, None)}
    with pytest.raises(SourceError, match=r"'rates' did not exist then; its first commit is at"):
        catalog.sql("SELECT * FROM rates FOR SYSTEM_TIME AS OF TIMESTAMP '2000-01-01 00:00:00'")


def test_a_full_refresh_rebuilds_the_same_history(
    fed: tuple[Catalog, Path, list[set[tuple]]]
) -> None:
    """Rebuilt from every change, not from the history earlier runs appended."""
    catalog, _, _ = fed
    before = _versions(catalog.table("rates_history").collect())
    DerivedTable(catalog, "rates_history").run(full_refresh=True)
    assert _versions(catalog.table("rates_history").collect()) == before == _AFTER_EACH_COMMIT[-1]


def test_time_travel_after_log_cleanup_reads_the_commits_still_logged(
    spark: SparkSession, tmp_path: Path
) -> None:
    """A recent time reads from the commits log cleanup kept (an append-only table's snapshot
    needs no older commit); a time whose version it removed is refused, naming them."""
    catalog = _lake(tmp_path, spark)
    for number in range(3):
        write_commits(tmp_path / "orders", [[{"id": number, "currency": "EUR",
                                              "order_time": at(number)}]],
                      schema=_ORDERS, cdf=False)
    times = {r["_commit_version"]: r["_commit_timestamp"]
             for r in catalog.changelog("orders").collect()}
    table = DeltaTable(str(tmp_path / "orders"))
    table.create_checkpoint()
    long_ago = (datetime.now() - timedelta(days=60)).timestamp()
    for commit in sorted((tmp_path / "orders" / "_delta_log").glob("*.json"))[:-1]:
        os.utime(commit, (long_ago, long_ago))
    table.cleanup_metadata()
    recent = catalog.sql("SELECT id FROM orders FOR SYSTEM_TIME AS OF TIMESTAMP "
                         f"'{times[3]:%Y-%m-%d %H:%M:%S.%f}'").collect()
    assert sorted(r["id"] for r in recent) == [0, 1, 2]
    with pytest.raises(VersionGoneError, match=r"versions 0\.\.2 are no longer in the Delta log"):
        catalog.sql("SELECT id FROM orders FOR SYSTEM_TIME AS OF TIMESTAMP "
                    f"'{times[1]:%Y-%m-%d %H:%M:%S.%f}'")
