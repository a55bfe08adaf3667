"""Pipelines of derived tables: row kinds, change feeds and watermarks flow from table to table.

A temporal join over an updating probe emits each joined row with its probe row's kind;
its output is a Delta changelog table (change data feed on, state keyed by the probe's
key) whose commits record the output watermark; the next view reads it incrementally,
and a query reads it by name.
"""

from __future__ import annotations

import json
import tempfile
from datetime import UTC
from pathlib import Path

import pyarrow as pa
import pytest
from _orders_and_rates import ORDERS_AND_RATES, at, order_row, rate_row
from click.testing import CliRunner
from deltalake import DeltaTable
from deltatables import delete_rows, update_rows, write_commits
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from chronolake import Catalog
from chronolake.cli.app import main
from chronolake.clock import ManualClock
from chronolake.errors import DefinitionError, SourceError
from chronolake.lake.layout import LATE_ROOT, catalog_dir, output_path
from chronolake.lake.stamps import WATERMARK_KEY, WATERMARK_MILLIS_KEY
from chronolake.location import LocationLike
from chronolake.runtime.derived import DerivedTable

pytestmark = pytest.mark.spark

DDL = ORDERS_AND_RATES + """
CREATE VIEW enriched AS
SELECT o.order_id, o.currency, o.amount, o.order_time, r.rate, o.amount * r.rate AS usd
FROM orders AS o LEFT JOIN rates FOR SYSTEM_TIME AS OF o.order_time AS r
ON o.currency = r.currency;
"""


@pytest.fixture
def lake(tmp_path: Path, spark) -> Catalog:  # noqa: ANN001
    catalog = Catalog(tmp_path, spark)
    catalog.declare(DDL)
    write_commits(tmp_path / "rates", [[rate_row("EUR", 2, 0), rate_row("USD", 1, 0)]])
    write_commits(tmp_path / "orders", [[order_row(1, 10, 5), order_row(2, 20, 6)]])
    return catalog


def _state(catalog: Catalog, name: str) -> set[tuple]:
    rows = catalog.sql(f"SELECT order_id, amount, usd FROM {name}").collect()
    return {(r["order_id"], r["amount"], r["usd"]) for r in rows}


def _feed(path: LocationLike, version: int) -> list[tuple]:
    """The output's change data feed at `version`, as Delta readers see it (delta-rs)."""
    feed = DeltaTable(str(path)).load_cdf(starting_version=version, ending_version=version)
    rows = pa.table(feed.read_all()).to_pylist()
    return sorted((r["_change_type"], r["order_id"], r["amount"]) for r in rows)


def _commit_info(path: LocationLike, version: int) -> dict:
    log = Path(str(path)) / "_delta_log" / f"{version:020d}.json"
    entries = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    return next(entry["commitInfo"] for entry in entries if "commitInfo" in entry)


def _stamp(path: LocationLike, version: int) -> dict:
    """The chronolake entries a commit recorded: in its commitInfo itself (delta-rs), or in
    its userMetadata (Delta's JVM writer)."""
    info = _commit_info(path, version)
    return info if WATERMARK_KEY in info else json.loads(info["userMetadata"])


@pytest.mark.lake_contract
def test_probe_updates_and_deletes_flow_into_the_output_changelog(lake: Catalog) -> None:
    root = lake.root
    write_commits(root / "rates", [[rate_row("EUR", 3, 30)]])
    write_commits(root / "orders", [[order_row(3, 30, 40)]])  # watermark min(40, 30) = 30
    first = DerivedTable(lake, "enriched").run()
    assert first.figures["inserts_out"] == 2
    assert _state(lake, "enriched") == {(1, 10, 20), (2, 20, 40)}

    update_rows(root / "orders", "order_id = 1", {"amount": "11"})
    delete_rows(root / "orders", "order_id = 2")
    write_commits(root / "rates", [[rate_row("EUR", 4, 60)]])
    write_commits(root / "orders", [[order_row(4, 40, 50)]])  # watermark 50: order 3 joins too
    second = DerivedTable(lake, "enriched").run()
    figures = second.figures
    assert (figures["update_befores_out"], figures["update_afters_out"]) == (1, 1)
    assert (figures["deletes_out"], figures["inserts_out"]) == (1, 2)
    # the update joins the rate valid at its order time; the delete retracts order 2
    assert _state(lake, "enriched") == {(1, 11, 22), (3, 30, 90), (4, 40, 120)}

    out = output_path(root, "enriched")
    assert DeltaTable(str(out)).metadata().configuration["delta.enableChangeDataFeed"] == "true"
    assert _feed(out, second.output_version) == [
        ("delete", 2, 20), ("insert", 3, 30), ("insert", 4, 40),
        ("update_postimage", 1, 11), ("update_preimage", 1, 10),
    ]


def test_a_retraction_runs_later_than_the_row_it_retracts(lake: Catalog) -> None:
    root = lake.root
    write_commits(root / "rates", [[rate_row("USD", 1, 100)]])
    write_commits(root / "orders", [[order_row(9, 1, 100, "USD")]])
    DerivedTable(lake, "enriched").run()
    for minutes in (110, 120):  # runs in between that do not touch order 1
        write_commits(root / "rates", [[rate_row("USD", 1, minutes)]])
        write_commits(root / "orders", [[order_row(int(minutes), 1, minutes, "USD")]])
        DerivedTable(lake, "enriched").run()
    delete_rows(root / "orders", "order_id = 1")
    result = DerivedTable(lake, "enriched").run()
    assert result.figures["deletes_out"] == 1
    assert 1 not in {row[0] for row in _state(lake, "enriched")}
    assert _feed(output_path(root, "enriched"), result.output_version) == [("delete", 1, 10)]


def test_each_commit_records_the_output_watermark(lake: Catalog) -> None:
    write_commits(lake.root / "rates", [[rate_row("EUR", 3, 30)]])
    write_commits(lake.root / "orders", [[order_row(3, 30, 40)]])
    result = DerivedTable(lake, "enriched").run()
    stamp = _stamp(output_path(lake.root, "enriched"), result.output_version)
    # the join's output watermark is the minimum of its inputs' (orders 40 min, rates 30 min)
    expected = int(at(30).replace(tzinfo=None).timestamp() * 1000)
    assert result.watermark_ms == int(stamp[WATERMARK_MILLIS_KEY])
    assert stamp[WATERMARK_KEY] == "2026-11-02T09:30:00.000Z"
    assert abs(result.watermark_ms - expected) < 24 * 3600 * 1000


def test_a_derived_table_is_queried_by_name(lake: Catalog) -> None:
    with pytest.raises(SourceError, match=r"never run.*chronolake run enriched"):
        lake.sql("SELECT * FROM enriched")
    write_commits(lake.root / "rates", [[rate_row("EUR", 3, 30)]])
    write_commits(lake.root / "orders", [[order_row(3, 30, 40)]])
    DerivedTable(lake, "enriched").run()
    assert lake.table("enriched").count() == 2
    lake.execute("CREATE VIEW big AS SELECT order_id, usd FROM enriched WHERE usd > 20")
    assert {r["order_id"] for r in lake.sql("SELECT * FROM big").collect()} == {2}


def test_a_view_that_drops_the_key_its_updates_need_is_refused(lake: Catalog) -> None:
    with pytest.raises(DefinitionError, match=r"drops 'order_id'.*add o\.order_id"):
        lake.execute(
            "CREATE VIEW keyless AS SELECT o.amount, r.rate FROM orders AS o "
            "JOIN rates FOR SYSTEM_TIME AS OF o.order_time AS r ON o.currency = r.currency"
        )
    assert "keyless" not in lake.names()
    spec = lake.spec("enriched")
    assert (spec.primary_key, spec.rowtime, spec.updating) == (("order_id",), "order_time", True)


@pytest.mark.lake_contract
def test_a_window_aggregates_a_temporal_joins_output(lake: Catalog) -> None:
    lake.execute(
        "CREATE VIEW hourly AS SELECT window_start, window_end, window_time, currency, "
        "COUNT(*) AS orders, SUM(usd) AS usd "
        "FROM TABLE(TUMBLE(TABLE enriched, DESCRIPTOR(order_time), INTERVAL '1' HOUR)) "
        "GROUP BY window_start, window_end, window_time, currency"
    )
    root = lake.root
    write_commits(root / "rates", [[rate_row("EUR", 3, 70)]])
    write_commits(root / "orders", [[order_row(3, 30, 65)]])  # watermark 65: hour 9 closes
    DerivedTable(lake, "enriched").run()
    hourly = DerivedTable(lake, "hourly").run()
    # the window's watermark is the join's recorded one, not re-derived from the rows
    assert hourly.watermark_ms == DerivedTable(lake, "enriched").store.latest().watermark
    rows = lake.sql("SELECT window_start, currency, orders, usd FROM hourly").collect()
    assert [(r["window_start"], r["currency"], r["orders"], r["usd"]) for r in rows] == [
        (at(0), "EUR", 2, 60)
    ]
    spec = lake.spec("hourly")
    assert spec.rowtime == "window_time"
    assert spec.primary_key == ("window_start", "window_end", "window_time", "currency")


def test_a_window_reads_a_filter_view_of_a_temporal_joins_output(lake: Catalog) -> None:
    """A plain view between two operators passes each change through its SELECT, row kinds,
    time attribute and recorded watermark included (Flink's Calc over a changelog)."""
    lake.execute(
        "CREATE VIEW big_eur AS SELECT e.order_id, e.order_time, e.usd * 10 AS cents "
        "FROM enriched AS e WHERE e.currency = 'EUR' AND e.amount >= 15"
    )
    lake.execute(
        "CREATE VIEW hourly_big AS SELECT window_start, window_end, COUNT(*) AS orders, "
        "SUM(cents) AS cents FROM TABLE(TUMBLE(TABLE big_eur, DESCRIPTOR(order_time), "
        "INTERVAL '1' HOUR)) GROUP BY window_start, window_end"
    )
    root = lake.root
    write_commits(root / "rates", [[rate_row("EUR", 3, 30)]])
    write_commits(root / "orders", [[order_row(3, 30, 40)]])  # watermark 30: orders 1, 2 join
    DerivedTable(lake, "enriched").run()
    first = DerivedTable(lake, "hourly_big").run()
    assert first.figures["rows_in"] == 1  # order 1 (amount 10) does not pass the view's WHERE
    # order 2 (20 -> 25) is corrected and order 3 cancelled before hour 9 closes
    update_rows(root / "orders", "order_id = 2", {"amount": "25"})
    delete_rows(root / "orders", "order_id = 3")
    write_commits(root / "rates", [[rate_row("EUR", 3, 70)]])
    write_commits(root / "orders", [[order_row(4, 40, 65)]])  # watermark 65: hour 9 closes
    DerivedTable(lake, "enriched").run()
    second = DerivedTable(lake, "hourly_big").run()
    assert second.figures["retractions_in"] == 1  # order 2's -U; order 3 never passed through
    assert second.watermark_ms == DerivedTable(lake, "enriched").store.latest().watermark
    rows = lake.sql("SELECT window_start, orders, cents FROM hourly_big").collect()
    assert [(r["window_start"], r["orders"], r["cents"]) for r in rows] == [(at(0), 1, 500)]
    assert lake.spec("big_eur").rowtime == "order_time"
    assert lake.spec("big_eur").primary_key == ("order_id",)


def test_a_derived_table_keeps_its_bound_plan_and_later_runs_reuse_it(
    lake: Catalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run binds a view's query to what it reads once (a plain view read through costs
    Spark an analysis) and keeps the plan in the view's catalog entry; later runs, in
    other processes too, run from it until a registration it was bound against changes."""
    lake.execute(
        "CREATE VIEW big_eur AS SELECT e.order_id, e.order_time, e.amount "
        "FROM enriched AS e WHERE e.currency = 'EUR' AND e.amount >= 15"
    )
    lake.execute(
        "CREATE VIEW hourly_big AS SELECT window_start, window_end, SUM(amount) AS amount "
        "FROM TABLE(TUMBLE(TABLE big_eur, DESCRIPTOR(order_time), INTERVAL '1' HOUR)) "
        "GROUP BY window_start, window_end"
    )
    root = lake.root
    write_commits(root / "rates", [[rate_row("EUR", 3, 30)]])
    write_commits(root / "orders", [[order_row(3, 30, 40)]])
    DerivedTable(lake, "enriched").run()
    DerivedTable(lake, "hourly_big").run()
    stored = lake.entry("hourly_big").plan
    assert stored is not None
    assert set(stored.bound_against) == {"big_eur", "enriched", "orders", "rates"}
    assert stored.plan.source.name == "big_eur"  # the plain view, bound to its schema

    def bound_again(self: Catalog, query: str) -> None:
        raise AssertionError(f"bound again: {query}")

    with monkeypatch.context() as patched:
        patched.setattr(Catalog, "operator_inputs", bound_again)
        write_commits(root / "rates", [[rate_row("EUR", 3, 70)]])
        write_commits(root / "orders", [[order_row(4, 40, 65)]])  # hour 9 closes
        again = Catalog(root, lake.spark)
        DerivedTable(again, "enriched").run()
        assert DerivedTable(again, "hourly_big").run().figures["rows_out"] == 1
    rows = lake.sql("SELECT window_start, amount FROM hourly_big").collect()
    assert [(r["window_start"], r["amount"]) for r in rows] == [(at(0), 50)]

    # a changed registration, or a plan that no longer loads (another chronolake version),
    # is bound anew by the next run and kept again
    entry_file = catalog_dir(root).path / "hourly_big.json"
    entry = json.loads(entry_file.read_text())
    entry["plan"]["bound_against"]["big_eur"] = "another definition"
    entry_file.write_text(json.dumps(entry))
    assert lake.entry("hourly_big").plan != stored
    DerivedTable(lake, "hourly_big").run()
    assert lake.entry("hourly_big").plan == stored
    entry["plan"] = {"format": 0, "plan": "from another version"}
    entry_file.write_text(json.dumps(entry))
    assert lake.entry("hourly_big").plan is None
    DerivedTable(lake, "hourly_big").run()
    assert lake.entry("hourly_big").plan == stored


def test_a_temporal_join_probes_a_projection_of_an_updating_table(lake: Catalog) -> None:
    lake.execute(
        "CREATE VIEW eur_orders AS SELECT order_id, currency, amount * 2 AS doubled, order_time "
        "FROM orders WHERE currency = 'EUR'"
    )
    lake.execute(
        "CREATE VIEW eur_enriched AS SELECT o.order_id, o.doubled, o.doubled * r.rate AS usd "
        "FROM eur_orders AS o JOIN rates FOR SYSTEM_TIME AS OF o.order_time AS r "
        "ON o.currency = r.currency"
    )
    root = lake.root
    write_commits(root / "rates", [[rate_row("EUR", 3, 30)]])
    write_commits(root / "orders", [[order_row(3, 30, 40, "USD")]])
    first = DerivedTable(lake, "eur_enriched").run()
    assert first.figures["inserts_out"] == 2
    update_rows(root / "orders", "order_id = 1", {"amount": "11"})
    delete_rows(root / "orders", "order_id = 2")
    write_commits(root / "rates", [[rate_row("EUR", 4, 60)]])
    write_commits(root / "orders", [[order_row(4, 40, 50)]])
    second = DerivedTable(lake, "eur_enriched").run()
    assert (second.figures["update_afters_out"], second.figures["deletes_out"]) == (1, 1)
    rows = lake.sql("SELECT order_id, doubled, usd FROM eur_enriched").collect()
    assert {(r["order_id"], r["doubled"], r["usd"]) for r in rows} == {(1, 22, 44), (4, 80, 240)}
    assert lake.spec("eur_enriched").updating


def test_a_window_over_a_view_computed_as_a_whole_is_refused(lake: Catalog) -> None:
    lake.execute(
        "CREATE VIEW per_currency AS SELECT currency, MAX(order_time) AS order_time "
        "FROM orders GROUP BY currency"
    )
    lake.execute(
        "CREATE VIEW windows_of_it AS SELECT window_start, window_end, COUNT(*) AS n "
        "FROM TABLE(TUMBLE(TABLE per_currency, DESCRIPTOR(order_time), INTERVAL '1' HOUR)) "
        "GROUP BY window_start, window_end"
    )
    with pytest.raises(DefinitionError, match="per_currency"):
        DerivedTable(lake, "windows_of_it").run()


def test_a_derived_table_without_its_time_attribute_is_read_on_processing_time(
    lake: Catalog,
) -> None:
    """Its SELECT dropped the rowtime: a window over another timestamp closes by the clock,
    as over a source without WATERMARK FOR."""
    lake.execute(
        "CREATE VIEW untimed AS SELECT o.order_id, r.currency_time AS rate_time, o.amount "
        "FROM orders AS o JOIN rates FOR SYSTEM_TIME AS OF o.order_time AS r "
        "ON o.currency = r.currency"
    )
    assert lake.spec("untimed").rowtime is None
    lake.execute(
        "CREATE VIEW by_rate_hour AS SELECT window_start, window_end, COUNT(*) AS orders "
        "FROM TABLE(TUMBLE(TABLE untimed, DESCRIPTOR(rate_time), INTERVAL '1' HOUR)) "
        "GROUP BY window_start, window_end"
    )
    write_commits(lake.root / "rates", [[rate_row("EUR", 3, 30)]])
    write_commits(lake.root / "orders", [[order_row(3, 30, 40)]])
    DerivedTable(lake, "untimed").run()
    clock = ManualClock(int(at(120).replace(tzinfo=UTC).timestamp() * 1000))
    result = DerivedTable(lake, "by_rate_hour", clock=clock).run()
    assert result.processing_time and result.watermark_ms == clock.now_ms()
    rows = lake.sql("SELECT window_start, orders FROM by_rate_hour").collect()
    assert [(r["window_start"], r["orders"]) for r in rows] == [(at(0), 2)]


def _hourly_orders_with_hour_9_closed(lake: Catalog) -> None:
    """A window view over `enriched`, and commits that take both inputs past 10:00."""
    lake.execute(
        "CREATE VIEW hourly AS SELECT window_start, window_end, currency, COUNT(*) AS orders "
        "FROM TABLE(TUMBLE(TABLE enriched, DESCRIPTOR(order_time), INTERVAL '1' HOUR)) "
        "GROUP BY window_start, window_end, currency"
    )
    write_commits(lake.root / "rates", [[rate_row("EUR", 3, 70)]])
    write_commits(lake.root / "orders", [[order_row(3, 30, 65)]])


def test_running_a_view_says_which_upstream_tables_are_behind(lake: Catalog) -> None:
    _hourly_orders_with_hour_9_closed(lake)
    runner = CliRunner()
    args = ["run", "hourly", "--lake", str(lake.root)]
    refused = runner.invoke(main, args)
    assert refused.exit_code == 1
    assert "enriched" in refused.output and "never run" in refused.output
    chained = runner.invoke(main, [*args, "--with-upstream"])
    assert chained.exit_code == 0, chained.output
    assert lake.sql("SELECT orders FROM hourly").collect()[0]["orders"] == 2
    write_commits(lake.root / "orders", [[order_row(5, 1, 200)]])
    noted = runner.invoke(main, args)
    assert noted.exit_code == 0
    assert "note: enriched (read by hourly) have new commits" in noted.output


# -- properties: incremental runs against one run over all the input ---------------------------

_ROUND = st.lists(
    st.tuples(st.sampled_from(["insert", "update", "delete"]), st.integers(0, 7),
              st.integers(1, 50), st.integers(0, 120)),
    min_size=1, max_size=5,
)


def _apply(root: Path, ops: list[tuple[str, int, int, int]], live: set[int]) -> None:
    """Each op as one commit of `orders`: a new order, a correction or a cancellation."""
    for op, order_id, amount, minutes in ops:
        if op == "insert" and order_id not in live:
            write_commits(root / "orders", [[order_row(order_id + 100, amount, minutes)]])
            live.add(order_id)
        elif op == "update" and order_id in live:
            update_rows(root / "orders", f"order_id = {order_id + 100}", {"amount": str(amount)})
        elif op == "delete" and order_id in live:
            delete_rows(root / "orders", f"order_id = {order_id + 100}")
            live.discard(order_id)


def _replayed(path: LocationLike) -> set[tuple]:
    """The output's change data feed applied from version 0, per key: the state it describes."""
    feed = pa.table(DeltaTable(str(path)).load_cdf(starting_version=0).read_all()).to_pylist()
    state: dict[int, tuple] = {}
    for row in sorted(feed, key=lambda r: (r["_commit_version"], r["_change_type"] != "delete"
                                          and r["_change_type"] != "update_preimage")):
        if row["_change_type"] in ("delete", "update_preimage"):
            assert state.pop(row["order_id"]) == (row["order_id"], row["amount"], row["usd"])
        else:
            assert row["order_id"] not in state
            state[row["order_id"]] = (row["order_id"], row["amount"], row["usd"])
    return set(state.values())


@settings(max_examples=4, deadline=None, phases=[Phase.generate],
          suppress_health_check=list(HealthCheck))
@given(rounds=st.lists(_ROUND, min_size=1, max_size=3))
def test_updating_probe_runs_equal_the_bounded_join(spark, rounds: list) -> None:  # noqa: ANN001
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        catalog = Catalog(root, spark)
        catalog.declare(DDL)
        write_commits(root / "rates", [[rate_row("EUR", 2, 0)], [rate_row("EUR", 3, 60)]])
        write_commits(root / "orders", [[order_row(1, 1, 0)]])
        live: set[int] = set()
        for ops in rounds:
            _apply(root, ops, live)
            DerivedTable(catalog, "enriched").run()
        write_commits(root / "rates", [[rate_row("EUR", 3, 10_000)]])  # both watermarks pass all
        write_commits(root / "orders", [[order_row(99, 1, 10_000)]])
        DerivedTable(catalog, "enriched").run()
        incremental = _state(catalog, "enriched")
        bounded = catalog.sql(DDL.split("CREATE VIEW enriched AS")[1].rstrip().rstrip(";"))
        expected = {(r["order_id"], r["amount"], r["usd"]) for r in bounded.collect()}
        assert incremental == expected
        assert _replayed(output_path(root, "enriched")) == incremental


@settings(max_examples=3, deadline=None, phases=[Phase.generate],
          suppress_health_check=list(HealthCheck))
@given(schedule=st.lists(st.sampled_from(["feed", "enrich", "aggregate"]), min_size=3,
                         max_size=8))
def test_a_chain_ends_the_same_in_any_interleaving_of_runs(spark, schedule: list) -> None:  # noqa: ANN001
    appended = DDL.replace("'changelog' = 'cdf');\nCREATE TABLE rates", "'changelog' = 'append');"
                           "\nCREATE TABLE rates", 1)
    hourly = (
        "CREATE VIEW hourly AS SELECT window_start, window_end, currency, COUNT(*) AS orders, "
        "SUM(usd) AS usd FROM TABLE(TUMBLE(TABLE enriched, DESCRIPTOR(order_time), "
        "INTERVAL '30' MINUTES)) GROUP BY window_start, window_end, currency"
    )

    def build(root: Path, steps: list[str]) -> set[tuple]:
        catalog = Catalog(root, spark)
        catalog.declare(appended)
        catalog.execute(hourly)
        write_commits(root / "rates", [[rate_row("EUR", 2, 0), rate_row("USD", 1, 0)]])
        write_commits(root / "orders", [[order_row(1, 10, 5)]])
        feeds = iter(range(1, 100))
        for step in steps:
            if step == "feed":
                n = next(feeds)
                write_commits(root / "orders", [[order_row(n + 1, n, 5 + 13 * n, "USD")]])
                write_commits(root / "rates", [[rate_row("EUR", 2 + n, 5 + 13 * n)]])
            elif step == "enrich":
                DerivedTable(catalog, "enriched").run()
            elif lake_has(root, "enriched"):
                DerivedTable(catalog, "hourly").run()
        DerivedTable(catalog, "enriched").run()
        DerivedTable(catalog, "hourly").run()
        rows = catalog.sql("SELECT window_start, currency, orders, usd FROM hourly").collect()
        return {tuple(r) for r in rows}

    feeds = ["feed"] * schedule.count("feed")
    with tempfile.TemporaryDirectory() as one, tempfile.TemporaryDirectory() as other:
        assert build(Path(one), schedule) == build(Path(other), feeds)


def lake_has(root: Path, view: str) -> bool:
    return DeltaTable.is_deltatable(str(output_path(root, view)))


def test_a_window_applies_retractions_until_it_fires(lake: Catalog) -> None:
    lake.execute(
        "CREATE VIEW hourly AS SELECT window_start, window_end, currency, COUNT(*) AS orders, "
        "SUM(usd) AS usd FROM TABLE(TUMBLE(TABLE enriched, DESCRIPTOR(order_time), "
        "INTERVAL '1' HOUR)) GROUP BY window_start, window_end, currency"
    )
    root = lake.root
    write_commits(root / "rates", [[rate_row("EUR", 3, 30)]])
    write_commits(root / "orders", [[order_row(3, 30, 40)]])
    for view in ("enriched", "hourly"):
        DerivedTable(lake, view).run()  # orders 1 and 2 joined, their window still open
    update_rows(root / "orders", "order_id = 1", {"amount": "11"})
    delete_rows(root / "orders", "order_id = 2")
    write_commits(root / "rates", [[rate_row("EUR", 3, 70)]])
    write_commits(root / "orders", [[order_row(4, 40, 70)]])  # watermark 70 min: hour 9 fires
    DerivedTable(lake, "enriched").run()
    fired = DerivedTable(lake, "hourly").run()
    assert fired.figures["retractions_in"] == 2  # the -U of order 1 and the -D of order 2
    rows = lake.sql("SELECT window_start, orders, usd FROM hourly").collect()
    assert [(r["window_start"], r["orders"], r["usd"]) for r in rows] == [(at(0), 2, 22 + 90)]

    update_rows(root / "orders", "order_id = 1", {"amount": "12"})  # after the window fired
    write_commits(root / "orders", [[order_row(5, 1, 80)]])
    DerivedTable(lake, "enriched").run()
    late = DerivedTable(lake, "hourly").run()
    assert late.figures["late_rows"] == 2
    side = lake.backend.snapshot(root / LATE_ROOT.as_posix() / "hourly").collect()
    reasons = {(r["source_row_kind"], r["_late_reason"]) for r in side}
    assert reasons == {("-U", "retraction_after_emit"), ("+U", "window_closed")}
    rows = lake.sql("SELECT orders, usd FROM hourly").collect()
    assert [(r["orders"], r["usd"]) for r in rows] == [(2, 112)]  # never revised


def test_temporal_joins_read_derived_tables_on_either_side(lake: Catalog) -> None:
    root = lake.root
    lake.declare("""
    CREATE TABLE fees (
      currency STRING, fee BIGINT, fee_time TIMESTAMP(3),
      WATERMARK FOR fee_time AS fee_time, PRIMARY KEY (currency) NOT ENFORCED
    ) WITH ('path' = 'fees', 'changelog' = 'cdf');
    CREATE TABLE shipments (
      ship_id BIGINT, order_id BIGINT, ship_time TIMESTAMP(3),
      WATERMARK FOR ship_time AS ship_time
    ) WITH ('path' = 'shipments', 'changelog' = 'append');
    CREATE VIEW with_fees AS
    SELECT e.order_id, e.usd, f.fee FROM enriched AS e
    LEFT JOIN fees FOR SYSTEM_TIME AS OF e.order_time AS f ON e.currency = f.currency;
    CREATE VIEW shipped AS
    SELECT s.ship_id, e.order_id, e.usd FROM shipments AS s
    JOIN enriched FOR SYSTEM_TIME AS OF s.ship_time AS e ON s.order_id = e.order_id;
    """)
    write_commits(root / "fees", [[{"currency": "EUR", "fee": 7, "fee_time": at(0)}],
                                  [{"currency": "EUR", "fee": 8, "fee_time": at(500)}]])
    write_commits(root / "rates", [[rate_row("EUR", 3, 30)]])
    write_commits(root / "orders", [[order_row(3, 30, 40)]])
    DerivedTable(lake, "enriched").run()
    assert lake.spec("with_fees").primary_key == ("order_id",)  # the probe's key carries over
    DerivedTable(lake, "with_fees").run()
    fees = {(r["order_id"], r["usd"], r["fee"]) for r in lake.table("with_fees").collect()}
    assert fees == {(1, 20, 7), (2, 40, 7)}

    update_rows(root / "orders", "order_id = 2", {"amount": "21"})  # flows through both hops
    write_commits(root / "rates", [[rate_row("EUR", 3, 60)]])
    write_commits(root / "orders", [[order_row(4, 40, 60)]])
    DerivedTable(lake, "enriched").run()
    result = DerivedTable(lake, "with_fees").run()
    assert (result.figures["update_befores_out"], result.figures["update_afters_out"]) == (1, 1)
    fees = {(r["order_id"], r["usd"], r["fee"]) for r in lake.table("with_fees").collect()}
    assert fees == {(1, 20, 7), (2, 42, 7), (3, 90, 7), (4, 120, 7)}

    # enriched is versioned (key order_id, rowtime order_time): a build side
    write_commits(root / "shipments", [[{"ship_id": 1, "order_id": 2, "ship_time": at(30)},
                                        {"ship_id": 2, "order_id": 3, "ship_time": at(50)}]])
    DerivedTable(lake, "shipped").run()
    shipped = {(r["ship_id"], r["order_id"], r["usd"]) for r in lake.table("shipped").collect()}
    assert shipped == {(1, 2, 42), (2, 3, 90)}


def test_a_full_refresh_upstream_is_noticed_downstream(lake: Catalog) -> None:
    _hourly_orders_with_hour_9_closed(lake)
    DerivedTable(lake, "enriched").run()
    DerivedTable(lake, "hourly").run()
    DerivedTable(lake, "enriched").run(full_refresh=True)  # rewrites enriched's output
    with pytest.raises(SourceError, match=r"'enriched'.*rewritten by OVERWRITE.*full refresh"):
        DerivedTable(lake, "hourly").run()
    refreshed = DerivedTable(lake, "hourly", on_source_overwrite="full-refresh").run()
    assert refreshed.message.startswith("run 2 rebuilt the table from scratch")
    assert [r["orders"] for r in lake.table("hourly").collect()] == [2]


# -- deduplication views are derived tables ----------------------------------------------------

DEDUP_DDL = """
CREATE TABLE rate_log (
  currency STRING, rate BIGINT, currency_time TIMESTAMP(3),
  WATERMARK FOR currency_time AS currency_time
) WITH ('path' = 'rate_log', 'changelog' = 'append');
CREATE VIEW last_rates AS
SELECT currency, rate, currency_time FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY currency ORDER BY currency_time DESC) AS rownum
  FROM rate_log
) WHERE rownum = 1;
CREATE VIEW first_rates AS
SELECT currency, rate * 10 AS rate10 FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY currency ORDER BY currency_time ASC) AS rownum
  FROM rate_log
) WHERE rownum = 1;
"""


def _rates_feed(path: LocationLike, version: int) -> list[tuple]:
    feed = DeltaTable(str(path)).load_cdf(starting_version=version, ending_version=version)
    rows = pa.table(feed.read_all()).to_pylist()
    return sorted((r["_change_type"], r["currency"], r["rate"]) for r in rows)


def test_a_keep_last_deduplication_emits_updates_and_keep_first_only_inserts(
    tmp_path: Path, spark  # noqa: ANN001
) -> None:
    catalog = Catalog(tmp_path, spark)
    catalog.declare(DEDUP_DDL)
    log = tmp_path / "rate_log"
    write_commits(log, [[rate_row("EUR", 2, 10), rate_row("USD", 1, 10)], [rate_row("EUR", 3, 20)]])
    last = DerivedTable(catalog, "last_rates").run()
    assert (last.figures["inserts_out"], last.figures["update_afters_out"]) == (2, 0)
    first = DerivedTable(catalog, "first_rates").run()
    assert first.figures["inserts_out"] == 2

    # a newer EUR rate replaces the kept one; an older USD rate arriving late is dropped
    write_commits(log, [[rate_row("EUR", 4, 30)], [rate_row("USD", 9, 5)],
                        [rate_row("GBP", 7, 40)]])
    last = DerivedTable(catalog, "last_rates").run()
    figures = last.figures
    assert (figures["update_befores_out"], figures["update_afters_out"]) == (1, 1)
    assert (figures["inserts_out"], figures["outdated_rows"]) == (1, 1)
    out = output_path(tmp_path, "last_rates")
    assert _rates_feed(out, last.output_version) == [
        ("insert", "GBP", 7), ("update_postimage", "EUR", 4), ("update_preimage", "EUR", 3),
    ]
    rows = catalog.sql("SELECT currency, rate FROM last_rates").collect()
    assert {(r["currency"], r["rate"]) for r in rows} == {("EUR", 4), ("USD", 1), ("GBP", 7)}
    spec = catalog.spec("last_rates")
    assert (spec.primary_key, spec.rowtime, spec.updating) == (("currency",), "currency_time",
                                                               True)
    # the output watermark is the input's (the log's 40 min), recorded in the commit
    assert _stamp(out, last.output_version)[WATERMARK_KEY] == "2026-11-02T09:40:00.000Z"

    first = DerivedTable(catalog, "first_rates").run()
    assert (first.figures["inserts_out"], first.figures["rows_out"]) == (1, 1)  # GBP only
    rows = catalog.sql("SELECT currency, rate10 FROM first_rates").collect()
    assert {(r["currency"], r["rate10"]) for r in rows} == {("EUR", 20), ("USD", 10),
                                                            ("GBP", 70)}
    assert not catalog.spec("first_rates").updating


def test_a_window_counts_the_changes_of_a_keep_last_deduplication(
    tmp_path: Path, spark  # noqa: ANN001
) -> None:
    catalog = Catalog(tmp_path, spark)
    catalog.declare(DEDUP_DDL)
    catalog.execute(
        "CREATE VIEW rates_per_hour AS SELECT window_start, window_end, COUNT(*) AS currencies, "
        "SUM(rate) AS total FROM TABLE(TUMBLE(TABLE last_rates, DESCRIPTOR(currency_time), "
        "INTERVAL '1' HOUR)) GROUP BY window_start, window_end"
    )
    log = tmp_path / "rate_log"
    write_commits(log, [[rate_row("EUR", 2, 10), rate_row("USD", 1, 10)]])
    DerivedTable(catalog, "last_rates").run()
    DerivedTable(catalog, "rates_per_hour").run()
    write_commits(log, [[rate_row("EUR", 3, 20)], [rate_row("USD", 5, 70)]])  # hour 9 closes
    DerivedTable(catalog, "last_rates").run()
    fired = DerivedTable(catalog, "rates_per_hour").run()
    assert fired.figures["retractions_in"] == 2  # EUR's -U (10 min) and USD's -U (10 min)
    rows = catalog.sql("SELECT window_start, currencies, total FROM rates_per_hour").collect()
    assert [(r["window_start"], r["currencies"], r["total"]) for r in rows] == [(at(0), 1, 3)]
