"""Window views from SQL, run incrementally (issue 3 item 5, issue 5 item 3): TUMBLE and HOP
views materialized run by run; each window emitted once, by the run whose watermark passes
it; late and null-rowtime rows in the side table; processing-time sources closing windows by
the clock; the planner's errors."""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from _crash import SIGKILL_RETURNCODE, run_in_subprocess, same_rows
from deltatables import update_rows, write_commits
from pyspark.sql import SparkSession

from chronolake import Catalog, RunResult, materialize_view
from chronolake.clock import ManualClock
from chronolake.errors import DefinitionError
from chronolake.faults import FaultPoint
from chronolake.lake import DeltaRsBackend
from chronolake.lake.layout import LATE_ROOT, output_path
from chronolake.runtime.derived import DerivedTable
from chronolake.runtime.result import RunStatus
from chronolake.sql.ddl import parse_statements
from chronolake.sql.view_kinds import is_derived
from chronolake.sql.window import WindowItem, is_window_aggregate, plan_window_aggregate
from chronolake.watermarks import REASON_COLUMN, WATERMARK_COLUMN

T0 = datetime(2024, 1, 1)
T0_MS = 1_704_067_200_000
SCHEMA = pa.schema([("k", pa.int64()), ("customer", pa.string()), ("ts", pa.timestamp("us")),
                    ("price", pa.int64())])
ORDERS = """CREATE TABLE orders (
  k BIGINT, customer STRING, ts TIMESTAMP(3), price BIGINT,
  WATERMARK FOR ts AS ts - INTERVAL '2' SECOND
) WITH ('path' = 'orders'{options})"""
PER_CUSTOMER = """CREATE VIEW per_customer AS
SELECT window_start, window_end, customer, COUNT(*) AS n, SUM(price) AS total
FROM TABLE(TUMBLE(TABLE {table}, DESCRIPTOR(ts), INTERVAL '10' SECONDS))
GROUP BY window_start, window_end, customer"""


def ms(seconds: float) -> int:
    return T0_MS + round(seconds * 1000)


def row(k: int, customer: str, seconds: float | None, price: int = 1) -> dict[str, Any]:
    ts = None if seconds is None else T0 + timedelta(seconds=seconds)
    return {"k": k, "customer": customer, "ts": ts, "price": price}


def commits(*rows: dict[str, Any]) -> list[list[dict[str, Any]]]:
    """One commit per row: fixes the arrival order the test needs."""
    return [[r] for r in rows]


def output_windows(
    spark: SparkSession, lake: Path, view: str, *extra: str
) -> list[tuple[Any, ...]]:
    """The view's rows as (start s, end s, extra...), sorted (test-side collect)."""
    rows = DeltaRsBackend(spark).snapshot(output_path(lake, view))
    return sorted(
        ((r["window_start"] - T0).total_seconds(), (r["window_end"] - T0).total_seconds(),
         *(r[c] for c in extra))
        for r in rows.collect()
    )


def side_table(spark: SparkSession, lake: Path, view: str) -> list[tuple[int, str, int]]:
    """The late-rows side table as (k, reason, watermark on arrival), sorted."""
    rows = DeltaRsBackend(spark).snapshot(lake / LATE_ROOT / view)
    return sorted((r["k"], r[REASON_COLUMN], r[WATERMARK_COLUMN]) for r in rows.collect())


def lake_with(root: Path, spark: SparkSession, ddl: Sequence[str], rows: Sequence[Any]) -> Catalog:
    write_commits(root / "orders", rows, schema=SCHEMA)
    catalog = Catalog(root, spark)
    for statement in ddl:
        catalog.execute(statement)
    return catalog


# --- TUMBLE over an event-time source, run by run ----------------------------------------

RUN_1 = commits(row(0, "u1", 1, 1), row(1, "u2", 4, 2), row(2, "u1", 12, 3), row(3, "u1", 8, 4))
# k9 (9 s) is late only by the watermark run 1 stored (10 s): a run that forgot it would
# aggregate [0, 10) a second time.
RUN_2 = commits(row(9, "u1", 9, 50), row(4, "u2", None, 9), row(5, "u2", 15, 5),
                row(6, "u1", 5, 6), row(7, "u1", 11, 7), row(8, "u2", 25, 8))


@dataclass(frozen=True)
class Runs:
    """run 1 over RUN_1; RUN_2 committed; `template` copied then; run 2 (a new catalog and
    table, as a new process would); run 3 with nothing new."""

    lake: Path
    template: Path
    results: dict[int, RunResult]
    after_run_1: list[tuple[Any, ...]]


@pytest.fixture(scope="module")
def runs(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Runs:
    root = tmp_path_factory.mktemp("tumble")
    lake, template = root / "lake", root / "template"
    catalog = lake_with(lake, spark, [ORDERS.format(options=""),
                                      PER_CUSTOMER.format(table="orders")], RUN_1)
    results = {1: materialize_view(catalog, "per_customer")}
    after_run_1 = output_windows(spark, lake, "per_customer", "customer", "n", "total")
    write_commits(lake / "orders", RUN_2, schema=SCHEMA)
    shutil.copytree(lake, template)
    results[2] = DerivedTable(Catalog(lake, spark), "per_customer").run()
    results[3] = materialize_view(Catalog(lake, spark), "per_customer")
    return Runs(lake, template, results, after_run_1)


EMITTED_BY_RUN_1 = [(0, 10, "u1", 1, 1), (0, 10, "u2", 1, 2)]
EMITTED_BY_RUN_2 = [(10, 20, "u1", 2, 10), (10, 20, "u2", 1, 5)]


@pytest.mark.spark
def test_tumble_view_emits_each_window_once_by_the_run_that_closes_it(
    spark: SparkSession, runs: Runs
) -> None:
    assert runs.after_run_1 == EMITTED_BY_RUN_1  # k3 (8 s) came after the watermark hit 10 s
    first, second, third = runs.results[1], runs.results[2], runs.results[3]
    assert (first.watermark_ms, second.watermark_ms) == (ms(10), ms(23))
    assert first.figures == {
        "rows_in": 4, "rows_out": 2, "late_rows": 1, "null_rowtime_rows": 0, "windows_fired": 1,
        "open_windows": 1, "pending_rows": 1, "state_rows": 1, "retractions_in": 0,
        "inserts_out": 2, "update_befores_out": 0, "update_afters_out": 0, "deletes_out": 0,
    }
    # [10, 20) holds k2 of run 1 (state) and k7 of run 2; [20, 30) stays open with k8
    assert second.figures == {
        "rows_in": 6, "rows_out": 2, "late_rows": 3, "null_rowtime_rows": 1, "windows_fired": 1,
        "open_windows": 1, "pending_rows": 1, "state_rows": 1, "retractions_in": 0,
        "inserts_out": 2, "update_befores_out": 0, "update_afters_out": 0, "deletes_out": 0,
    }
    assert third.status is RunStatus.UP_TO_DATE
    everything = output_windows(spark, runs.lake, "per_customer", "customer", "n", "total")
    assert everything == EMITTED_BY_RUN_1 + EMITTED_BY_RUN_2


@pytest.mark.spark
def test_late_and_null_rowtime_rows_go_to_the_side_table_with_the_watermark_on_arrival(
    spark: SparkSession, runs: Runs
) -> None:
    assert side_table(spark, runs.lake, "per_customer") == [
        (3, "window_closed", ms(10)),   # run 1: after k2 (12 s) raised the watermark to 10 s
        (4, "null_rowtime", ms(10)),
        (6, "window_closed", ms(13)),   # after k5 (15 s)
        (9, "window_closed", ms(10)),   # run 2 starts from the watermark run 1 stored
    ]


@pytest.mark.slow
@pytest.mark.spark
def test_a_window_run_killed_after_its_output_is_redone_exactly_once(
    spark: SparkSession, runs: Runs, tmp_path: Path
) -> None:
    lake = tmp_path / "lake"
    shutil.copytree(runs.template, lake)
    crashed = run_in_subprocess(lake, "per_customer", fault=FaultPoint.AFTER_SIDE_OUTPUT.value)
    assert crashed.returncode == SIGKILL_RETURNCODE, crashed.stderr[-3000:]
    redone = DerivedTable(Catalog(lake, spark), "per_customer").run()
    assert (redone.run, redone.figures) == (2, runs.results[2].figures)
    backend = DeltaRsBackend(spark)
    for path in (output_path, lambda root, name: root / LATE_ROOT / name):
        assert same_rows(backend.snapshot(path(lake, "per_customer")),
                         backend.snapshot(path(runs.lake, "per_customer")))


@pytest.mark.spark
def test_a_run_in_ticks_fires_windows_tick_by_tick_with_state_carried_in_memory(
    spark: SparkSession, tmp_path: Path
) -> None:
    ddl = [ORDERS.format(options=", 'scan.max-rows-per-tick' = '5'"),
           PER_CUSTOMER.format(table="orders")]
    catalog = lake_with(tmp_path, spark, ddl, RUN_1 + RUN_2)
    result = materialize_view(catalog, "per_customer")
    # tick 0 (k0-k3, k9) emits its watermark only at its end: k3 and k9 are in time, and
    # [0, 10) fires at 10 s; tick 1 takes k2 (12 s) back from tick 0's state for [10, 20)
    assert output_windows(spark, tmp_path, "per_customer", "customer", "n", "total") == [
        (0, 10, "u1", 3, 55), (0, 10, "u2", 1, 2), *EMITTED_BY_RUN_2,
    ]
    assert side_table(spark, tmp_path, "per_customer") == [
        (4, "null_rowtime", ms(10)), (6, "window_closed", ms(10)),
    ]
    figures = result.figures
    assert (figures["ticks"], figures["windows_fired"], figures["pending_rows"]) == (2, 2, 1)


# --- HOP with WHERE, HAVING and expressions -------------------------------------------------

HOP_VIEW = """CREATE VIEW busy AS
SELECT window_start, window_end, t.customer, COUNT(*) AS n, SUM(price) * 10 AS total_x10,
       window_time
FROM TABLE(HOP(TABLE orders, DESCRIPTOR(ts), INTERVAL '5' SECONDS, INTERVAL '10' SECONDS)) AS t
WHERE price > 0
GROUP BY window_start, window_end, t.customer
HAVING COUNT(*) > 1"""


@pytest.mark.spark
def test_hop_view_filters_rows_before_windows_and_groups_after(
    spark: SparkSession, tmp_path: Path
) -> None:
    rows = commits(
        row(0, "u", 1), row(5, "v", 2), row(6, "v", 4), row(1, "u", 12), row(2, "v", 7),
        row(3, "v", 3),      # both its windows, [-5, 5) and [0, 10), fired at 10 s: late
        row(4, "v", 2, 0),   # as late, but WHERE drops it first: not in the side table
    )
    catalog = lake_with(tmp_path, spark, [ORDERS.format(options=""), HOP_VIEW], rows)
    result = materialize_view(catalog, "busy")
    # v has 2 rows in each fired window; u's single row is dropped by HAVING
    assert output_windows(spark, tmp_path, "busy", "customer", "n", "total_x10") == [
        (-5, 5, "v", 2, 20), (0, 10, "v", 2, 20),
    ]
    window_time = DeltaRsBackend(spark).snapshot(output_path(tmp_path, "busy")).first()
    assert window_time is not None
    assert window_time["window_time"] == window_time["window_end"] - timedelta(milliseconds=1)
    assert side_table(spark, tmp_path, "busy") == [(3, "window_closed", ms(10))]
    # [5, 15) holds k1 (12 s) and k2 (7 s; its [0, 10) had fired), [10, 20) holds k1
    assert (result.figures["pending_rows"], result.figures["open_windows"]) == (2, 2)
    assert result.figures["windows_fired"] == 2


# --- emission strategy: on-event vs on-periodic on the same commits -------------------------


@pytest.mark.spark
def test_on_event_emission_makes_a_row_late_that_on_periodic_aggregates(
    spark: SparkSession, tmp_path: Path
) -> None:
    on_event = ORDERS.replace("orders (", "orders_on_event (").format(
        options=", 'scan.watermark.emit.strategy' = 'on-event'"
    )
    ddl = [ORDERS.format(options=""), on_event, PER_CUSTOMER.format(table="orders"),
           PER_CUSTOMER.replace("per_customer", "per_customer_on_event").format(
               table="orders_on_event")]
    # one commit holding 12 s then 5 s: on-event, 12 s raises the watermark to 10 s before
    # 5 s arrives; on-periodic, the watermark moves only after the commit
    catalog = lake_with(tmp_path, spark, ddl, [[row(0, "u", 1)], [row(1, "u", 12),
                                                                  row(2, "u", 5)]])
    periodic = materialize_view(catalog, "per_customer")
    event = materialize_view(catalog, "per_customer_on_event")
    assert output_windows(spark, tmp_path, "per_customer", "n") == [(0, 10, 2)]
    assert output_windows(spark, tmp_path, "per_customer_on_event", "n") == [(0, 10, 1)]
    assert (periodic.figures["late_rows"], event.figures["late_rows"]) == (0, 1)
    assert side_table(spark, tmp_path, "per_customer_on_event") == [
        (2, "window_closed", ms(10))
    ]


# --- processing-time watermarks: windows close by the clock ---------------------------------

NO_WATERMARK = """CREATE TABLE orders_plain (k BIGINT, customer STRING, ts TIMESTAMP(3),
  price BIGINT) WITH ('path' = 'orders')"""
HYBRID = """CREATE TABLE orders_hybrid (k BIGINT, customer STRING, ts TIMESTAMP(3), price BIGINT,
  WATERMARK FOR ts AS ts - INTERVAL '2' SECOND
) WITH ('path' = 'orders', 'scan.startup.mode' = 'snapshot-then-changelog')"""


@pytest.mark.spark
def test_windows_over_a_processing_time_source_close_by_the_clock(
    spark: SparkSession, tmp_path: Path
) -> None:
    ddl = [NO_WATERMARK, HYBRID, PER_CUSTOMER.format(table="orders_plain"),
           PER_CUSTOMER.replace("per_customer", "per_customer_hybrid").format(
               table="orders_hybrid")]
    catalog = lake_with(tmp_path, spark, ddl, commits(row(0, "u", 1), row(1, "u", 12),
                                                      row(2, "u", 25)))
    clock = ManualClock(ms(15))  # past [0, 10), inside [10, 20)
    first = materialize_view(catalog, "per_customer", clock=clock)
    hybrid = materialize_view(catalog, "per_customer_hybrid", clock=clock)
    assert output_windows(spark, tmp_path, "per_customer", "n") == [(0, 10, 1)]
    assert output_windows(spark, tmp_path, "per_customer_hybrid", "n") == [(0, 10, 1)]
    assert (first.processing_time, first.watermark_ms) == (True, ms(15))
    assert (hybrid.processing_time, hybrid.source_phases) == (True, {"orders_hybrid": "changelog"})
    assert first.figures["pending_rows"] == 2

    write_commits(tmp_path / "orders", commits(row(3, "u", 5), row(4, "u", 18)), schema=SCHEMA)
    clock.set(ms(21))
    second = materialize_view(catalog, "per_customer", clock=clock)
    # [10, 20) closed by the clock at 21 s: k1 (state) and k4; k3's window closed at 15 s
    assert output_windows(spark, tmp_path, "per_customer", "n") == [(0, 10, 1), (10, 20, 2)]
    assert side_table(spark, tmp_path, "per_customer") == [(3, "window_closed", ms(15))]
    assert (second.watermark_ms, second.figures["open_windows"]) == (ms(21), 1)


# --- the input must be append-only ----------------------------------------------------------


@pytest.mark.spark
def test_a_window_view_over_updates_sends_changes_of_emitted_windows_aside(
    spark: SparkSession, tmp_path: Path
) -> None:
    cdf = ORDERS.format(options=", 'changelog' = 'cdf'")
    catalog = lake_with(tmp_path, spark, [cdf, PER_CUSTOMER.format(table="orders")],
                        commits(row(0, "u", 1), row(1, "u", 12)))
    update_rows(tmp_path / "orders", "k = 0", {"price": "price + 1"})  # after [0, 10) closed
    result = materialize_view(catalog, "per_customer")
    assert (result.figures["retractions_in"], result.figures["late_rows"]) == (1, 2)
    late = DeltaRsBackend(spark).snapshot(tmp_path / LATE_ROOT / "per_customer").collect()
    assert {(r["source_row_kind"], r["_late_reason"]) for r in late} == {
        ("-U", "retraction_after_emit"), ("+U", "window_closed"),
    }
    # [0, 10) emitted once with k0's first price, never revised
    assert output_windows(spark, tmp_path, "per_customer", "customer", "n", "total") == [
        (0.0, 10.0, "u", 1, 1)
    ]


# --- planning: dispatch and Flink's errors (no Spark) ---------------------------------------

CATALOG = {
    spec.name: spec
    for spec in parse_statements(
        ";\n".join([
            ORDERS.format(options=""), NO_WATERMARK,
            """CREATE TABLE events (id BIGINT, at_ms BIGINT, label STRING,
               pt AS PROCTIME()) WITH ('path' = 'events')""",
            "CREATE VIEW big AS SELECT * FROM orders WHERE price > 10",
        ]),
        catalog={},
    )
    if hasattr(spec, "name")
}
TUMBLE_SQL = "FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '10' MINUTES))"


def test_a_window_view_is_planned_from_its_select() -> None:
    query = (
        "SELECT window_start, window_end, customer, COUNT(*) AS n, SUM(price) * 2, "
        f"UPPER(o.customer) AS upper_customer {TUMBLE_SQL} AS o WHERE price > 0 "
        "GROUP BY window_start, window_end, o.customer HAVING SUM(price) > 3"
    )
    plan = plan_window_aggregate(query, CATALOG)
    assert (plan.source.name, plan.time_column, plan.kind, plan.size_ms, plan.slide_ms) == (
        "orders", "ts", "TUMBLE", 600_000, 600_000
    )
    assert plan.items == (
        WindowItem(name="window_start", expression="window_start"),
        WindowItem(name="window_end", expression="window_end"),
        WindowItem(name="customer", expression="customer"),
        WindowItem(name="n", expression="COUNT(*)"),
        WindowItem(name="EXPR$4", expression="SUM(price) * 2"),
        WindowItem(name="upper_customer", expression="UPPER(customer)"),
    )
    assert (plan.group_keys, plan.where, plan.having) == (
        ("customer",), "price > 0", "SUM(price) > 3"
    )
    assert plan.event_time
    hop = plan_window_aggregate(
        "SELECT window_start, window_end, COUNT(*) AS n FROM TABLE(HOP(TABLE orders_plain, "
        "DESCRIPTOR(ts), INTERVAL '30' SECONDS, INTERVAL '1.5' MINUTE)) "
        "GROUP BY window_start, window_end",
        CATALOG,
    )
    assert (hop.kind, hop.size_ms, hop.slide_ms, hop.event_time) == ("HOP", 90_000, 30_000, False)


def test_window_views_run_incrementally() -> None:
    window = f"SELECT window_start, window_end, COUNT(*) AS n {TUMBLE_SQL} " \
        "GROUP BY window_start, window_end"
    assert is_window_aggregate(window)
    assert not is_window_aggregate("SELECT customer, COUNT(*) FROM orders GROUP BY customer")
    [view] = parse_statements(f"CREATE VIEW w AS {window}", catalog=CATALOG)
    assert is_derived(view)  # type: ignore[arg-type]


def _select(body: str) -> str:
    return body.replace("FROM_TVF", TUMBLE_SQL)


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("SELECT window_start, window_end, COUNT(*) FROM TABLE(TUMBLE(TABLE orders, "
         "DESCRIPTOR(price), INTERVAL '10' MINUTES)) GROUP BY window_start, window_end",
         r"TUMBLE\(TABLE orders, DESCRIPTOR\(price\), INTERVAL '10' MINUTES\): the window "
         r"function requires the timecol to be a time attribute, but 'price' is not the rowtime "
         r"of 'orders' \(WATERMARK FOR ts\); use DESCRIPTOR\(ts\)"),
        ("SELECT window_start, window_end, COUNT(*) FROM TABLE(TUMBLE(TABLE orders, "
         "DESCRIPTOR(nope), INTERVAL '10' MINUTES)) GROUP BY window_start, window_end",
         r"Can't find the time attribute field 'nope' in the input schema "
         r"orders\(k, customer, ts, price\)"),
        ("SELECT window_start, window_end, COUNT(*) FROM TABLE(TUMBLE(TABLE events, "
         "DESCRIPTOR(at_ms), INTERVAL '10' MINUTES)) GROUP BY window_start, window_end",
         r"The window function requires the timecol to be TIMESTAMP or TIMESTAMP_LTZ, but "
         r"'at_ms' is BIGINT; use a TIMESTAMP\(3\) column, or declare one, e\.g\. "
         r"`ts AS TO_TIMESTAMP_LTZ\(at_ms, 3\)`"),
        ("SELECT window_start, window_end, COUNT(*) FROM TABLE(TUMBLE(TABLE events, "
         "DESCRIPTOR(pt), INTERVAL '10' MINUTES)) GROUP BY window_start, window_end",
         r"'pt' is a PROCTIME\(\) attribute; chronolake windows are event-time windows"),
        (_select("SELECT window_start, COUNT(*) FROM_TVF GROUP BY window_start, customer"),
         r"GROUP BY window_start, customer: a window aggregation groups by both window_start "
         r"and window_end \(missing window_end\); write GROUP BY window_start, window_end, "
         r"customer"),
        (_select("SELECT COUNT(*) AS n FROM_TVF"),
         r"GROUP BY \(none\): a window aggregation groups by both window_start and window_end"),
        ("SELECT window_start, window_end, COUNT(*) FROM TABLE(HOP(TABLE orders, DESCRIPTOR(ts), "
         "INTERVAL '3' SECOND, INTERVAL '10' SECOND)) GROUP BY window_start, window_end",
         r"HOP window must satisfy slide\|size, but got size 10000ms and slide 3000ms; make the "
         r"size a whole multiple of the slide, e\.g\. 9000ms or 12000ms"),
        (_select("SELECT window_start, window_end, SUM(amount) FROM_TVF "
                 "GROUP BY window_start, window_end"),
         r"Column 'amount' not found in any table; the window view reads k, customer, ts, "
         r"price, window_start, window_end, window_time"),
        (_select("SELECT window_start, window_end, price FROM_TVF "
                 "GROUP BY window_start, window_end"),
         r"SELECT price: Expression 'price' is not being grouped; add it to GROUP BY or "
         r"aggregate it, e\.g\. MAX\(price\)"),
        (_select("SELECT window_start, window_end, COUNT(*) AS n FROM_TVF "
                 "GROUP BY window_start, window_end HAVING price > 1"),
         r"HAVING price > 1: Expression 'price' is not being grouped"),
        ("SELECT window_start, window_end, COUNT(*) FROM TABLE(TUMBLE(TABLE big, DESCRIPTOR(ts), "
         "INTERVAL '10' MINUTES)) GROUP BY window_start, window_end",
         r"'big' is a view; a window view reads a table declared with CREATE TABLE"),
        ("SELECT window_start, window_end, COUNT(*) FROM TABLE(TUMBLE(DESCRIPTOR(ts), "
         "INTERVAL '10' MINUTES)) GROUP BY window_start, window_end",
         r"Illegal first argument to Window TVF: the data must be a table"),
        (_select("SELECT window_start, window_end, COUNT(*) FROM_TVF "
                 "WHERE window_start > '2024-01-01' GROUP BY window_start, window_end"),
         r"window_start is a window column and WHERE filters the source rows before windowing; "
         r"filter windows in HAVING instead"),
        (_select("SELECT window_start, window_end, COUNT(*) AS n, SUM(price) AS n FROM_TVF "
                 "GROUP BY window_start, window_end"),
         r"the column name 'n' appears twice in the window view"),
        (_select("SELECT * FROM_TVF GROUP BY window_start, window_end"),
         r"SELECT \* is not supported in a window aggregation"),
        (_select("SELECT window_start, window_end, COUNT(*) FROM_TVF GROUP BY window_start, "
                 "window_end ORDER BY window_start"),
         r"ORDER BY is not supported in a window view"),
        ("SELECT window_start, window_end, COUNT(*) FROM TABLE(TUMBLE(TABLE orders, "
         "DESCRIPTOR(ts), INTERVAL '1' MONTH)) GROUP BY window_start, window_end",
         r"the window size must be a day-time interval with one unit \(SECOND, MINUTE, HOUR or "
         r"DAY\), e\.g\. INTERVAL '10' MINUTES; got INTERVAL '1' MONTH"),
        ("SELECT window_start, window_end, COUNT(*) FROM TABLE(TUMBLE(TABLE orders, "
         "DESCRIPTOR(ts), INTERVAL '0.0001' SECOND)) GROUP BY window_start, window_end",
         r"the window size INTERVAL '0\.0001' SECOND must be a positive whole number of "
         r"milliseconds"),
        ("SELECT window_start, window_end, COUNT(*) FROM TABLE(TUMBLE(TABLE orders, ts, "
         "INTERVAL '1' MINUTE)) GROUP BY window_start, window_end",
         r"Illegal second argument to Window TVF: Expecting TIMECOL"),
        ("SELECT w.window_start, w.window_end, COUNT(*) FROM TABLE(TUMBLE(TABLE orders, "
         "DESCRIPTOR(ts), INTERVAL '1' MINUTE)) AS w JOIN orders ON true "
         "GROUP BY w.window_start, w.window_end",
         r"a JOIN is not supported in a window view"),
    ],
    ids=[
        "descriptor-not-rowtime", "descriptor-unknown", "descriptor-not-timestamp",
        "descriptor-proctime", "group-without-window-end", "no-group-by", "hop-multiple",
        "unknown-column", "not-grouped", "having-not-grouped", "source-view", "source-not-table",
        "where-on-window", "duplicate-name", "star", "order-by", "month-interval",
        "sub-millisecond", "no-descriptor", "join",
    ],
)
def test_planner_errors(query: str, message: str) -> None:
    with pytest.raises(DefinitionError, match=message):
        plan_window_aggregate(query, CATALOG)

