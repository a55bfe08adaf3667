"""SESSION window views (issue 22 item 2, with the SESSION parts of items 8 and 9): Flink's
`SESSION(TABLE t [PARTITION BY k], DESCRIPTOR(ts), gap)` aggregated per session, run by run.

Expected rows are worked out by hand from Flink's rules: a row at t opens [t, t + gap);
windows that overlap *or touch* merge (`TimeWindow.intersects` is inclusive, so a row at
exactly last + gap joins the session); a session fires once, when the watermark reaches its
end - 1 ms, and is then gone; a row's window is merged with the open sessions first, and
the merged window is then checked for lateness (`MergingWindowProcessFunction`)."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltatables import write_commits
from pyspark.sql import SparkSession

from chronolake import Catalog, RunResult, materialize_view
from chronolake.clock import ManualClock
from chronolake.errors import DefinitionError
from chronolake.lake import DeltaRsBackend
from chronolake.lake.layout import LATE_ROOT, output_path
from chronolake.sql.ddl import parse_statements
from chronolake.sql.window import plan_window_aggregate
from chronolake.watermarks import REASON_COLUMN, WATERMARK_COLUMN

T0 = datetime(2024, 1, 1)
T0_MS = 1_704_067_200_000
SCHEMA = pa.schema([("k", pa.int64()), ("customer", pa.string()), ("ts", pa.timestamp("us")),
                    ("price", pa.int64())])
ORDERS = """CREATE TABLE orders (
  k BIGINT, customer STRING, ts TIMESTAMP(3), price BIGINT,
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND
) WITH ('path' = 'orders')"""
SESSIONS = """CREATE VIEW sessions AS
SELECT window_start, window_end, customer, COUNT(*) AS n, SUM(price) AS total
FROM TABLE(SESSION(TABLE orders PARTITION BY customer, DESCRIPTOR(ts), INTERVAL '10' SECONDS))
GROUP BY window_start, window_end, customer"""


def ms(seconds: float) -> int:
    return T0_MS + round(seconds * 1000)


def row(k: int, customer: str, seconds: float | None) -> dict[str, Any]:
    """Row k, priced 2**k: a session's total names the rows it holds."""
    ts = None if seconds is None else T0 + timedelta(seconds=seconds)
    return {"k": k, "customer": customer, "ts": ts, "price": 2**k}


def lake_with(root: Path, spark: SparkSession, views: list[str],
              rows: list[dict[str, Any]]) -> Catalog:
    """One commit per row (the watermark moves after each commit: a row arrives under the
    watermark of the rows before it, max ts - 5 s)."""
    write_commits(root / "orders", [[r] for r in rows], schema=SCHEMA)
    catalog = Catalog(root, spark)
    for statement in [ORDERS, *views]:
        catalog.execute(statement)
    return catalog


def output(spark: SparkSession, lake: Path, view: str, *extra: str) -> list[tuple[Any, ...]]:
    """The view's rows as (start s, end s, extra...), sorted (test-side collect)."""
    rows = DeltaRsBackend(spark).snapshot(output_path(lake, view)).collect()
    return sorted(
        ((r["window_start"] - T0).total_seconds(), (r["window_end"] - T0).total_seconds(),
         *(r[c] for c in extra))
        for r in rows
    )


def side_table(spark: SparkSession, lake: Path, view: str) -> list[tuple[int, str, int]]:
    rows = DeltaRsBackend(spark).snapshot(lake / LATE_ROOT / view).collect()
    return sorted((r["k"], r[REASON_COLUMN], r[WATERMARK_COLUMN]) for r in rows)


# --- per customer (PARTITION BY customer), gap 10 s, over three runs --------------------------

# run 1, watermark 13 s at its end: u1 [0, 28) (k2 at 8 + 10 s exactly: windows that touch
# merge in Flink), u2 [10, 20); nothing fires.
RUN_1 = [row(0, "u1", 0), row(1, "u1", 8), row(2, "u1", 18), row(3, "u2", 10)]
# run 2: k4 (21 s > 20 s) opens u2 [21, 31); k5 (15 s) bridges it with run 1's [10, 20):
# u2 [10, 31). k6 (40 s) opens u1 [40, 50) and lifts the watermark to 35 s, so u1 [0, 28)
# fires; k7 (25 s) comes after: its window [25, 35) has closed and touches no open session
# (u1 [0, 28) has fired and is gone; [40, 50) is 15 s away): late. k8 (33 s, window open)
# merges with [40, 50); k9 has no rowtime; k10 (24 s): its window [24, 34) has closed, but
# merged first with the open [33, 50) it is not late: u1 [24, 50). Run 2 ends at 35 s:
# u1 [0, 28) and u2 [10, 31) fire.
RUN_2 = [row(4, "u2", 21), row(5, "u2", 15), row(6, "u1", 40), row(7, "u1", 25),
         row(8, "u1", 33), row(9, "u2", None), row(10, "u1", 24)]
# run 3: k11 (60 s) lifts the watermark to 55 s: u1 [24, 50) fires, u2 [60, 70) stays open.
RUN_3 = [row(11, "u2", 60)]

EMITTED_BY_RUN_2 = [(0, 28, "u1", 3, 1 + 2 + 4), (10, 31, "u2", 3, 8 + 16 + 32)]
EMITTED_BY_RUN_3 = [(24, 50, "u1", 3, 64 + 256 + 1024)]
LATE = [(7, "window_closed", ms(35)), (9, "null_rowtime", ms(35))]


@pytest.fixture(scope="module")
def three_runs(
    spark: SparkSession, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, list[RunResult], list[list[tuple[Any, ...]]]]:
    lake = tmp_path_factory.mktemp("sessions")
    lake_with(lake, spark, [SESSIONS], RUN_1)  # a new Catalog per run, as a new process
    results, outputs = [], []
    for more in (None, RUN_2, RUN_3):
        if more is not None:
            write_commits(lake / "orders", [[r] for r in more], schema=SCHEMA)
        results.append(materialize_view(Catalog(lake, spark), "sessions"))
        outputs.append(output(spark, lake, "sessions", "customer", "n", "total"))
    return lake, results, outputs


@pytest.mark.spark
def test_sessions_merge_across_runs_and_fire_once_when_the_watermark_passes(
    spark: SparkSession, three_runs: tuple[Path, list[RunResult], list[list[tuple[Any, ...]]]]
) -> None:
    lake, results, outputs = three_runs
    assert outputs[0] == []  # both sessions still open at 13 s
    assert outputs[1] == EMITTED_BY_RUN_2
    assert outputs[2] == sorted(EMITTED_BY_RUN_2 + EMITTED_BY_RUN_3)
    assert [r.watermark_ms for r in results] == [ms(13), ms(35), ms(55)]
    assert [(r.figures["open_windows"], r.figures["pending_rows"]) for r in results] == [
        (2, 4), (1, 3), (1, 1)
    ]
    assert [r.figures["windows_fired"] for r in results] == [0, 2, 1]
    assert [r.figures["late_rows"] for r in results] == [0, 2, 0]
    assert side_table(spark, lake, "sessions") == LATE


@pytest.mark.spark
def test_one_run_over_the_same_commits_gives_the_same_sessions(
    spark: SparkSession, tmp_path: Path
) -> None:
    catalog = lake_with(tmp_path, spark, [SESSIONS], RUN_1 + RUN_2 + RUN_3)
    result = materialize_view(catalog, "sessions")
    assert output(spark, tmp_path, "sessions", "customer", "n", "total") == sorted(
        EMITTED_BY_RUN_2 + EMITTED_BY_RUN_3
    )
    assert side_table(spark, tmp_path, "sessions") == LATE
    assert (result.figures["windows_fired"], result.figures["open_windows"]) == (3, 1)


# --- Flink's documented example (window-agg.md / window-tvf.md): Bid, gap 5 minutes ----------

BID = [row(0, "A", 7 * 60), row(1, "A", 6 * 60), row(2, "B", 9 * 60), row(3, "A", 8 * 60),
       row(4, "B", 17 * 60), row(5, "Z", 60 * 60)]  # Z: lifts the watermark past 08:22
TVF = "FROM TABLE(SESSION(TABLE orders{partition}, DESCRIPTOR(ts), INTERVAL '5' MINUTES))"


@pytest.mark.spark
def test_sessions_per_partition_key_or_over_all_rows_as_flinks_docs_show(
    spark: SparkSession, tmp_path: Path
) -> None:
    views = [
        f"CREATE VIEW by_item AS SELECT window_start, window_end, customer, SUM(price) AS total "
        f"{TVF.format(partition=' PARTITION BY customer')} "
        "GROUP BY customer, window_start, window_end",
        f"CREATE VIEW overall AS SELECT window_start, window_end, SUM(price) AS total "
        f"{TVF.format(partition='')} GROUP BY window_start, window_end",
        # no PARTITION BY: Flink keys the sessions by nothing (the TVF runs on its own when
        # partition keys and GROUP BY keys differ, `WindowUtil.validGroupKeyPartitionKey`);
        # GROUP BY customer then splits each session's rows by customer
        f"CREATE VIEW overall_by_item AS SELECT window_start, window_end, customer, "
        f"COUNT(*) AS n {TVF.format(partition='')} GROUP BY window_start, window_end, customer",
    ]
    catalog = lake_with(tmp_path, spark, views, BID)
    for view in ("by_item", "overall", "overall_by_item"):
        materialize_view(catalog, view)
    # 08:06-08:13 A (1 + 2 + 8), 08:09-08:14 B, 08:17-08:22 B
    assert output(spark, tmp_path, "by_item", "customer", "total") == [
        (360, 780, "A", 11), (540, 840, "B", 4), (1020, 1320, "B", 16)
    ]
    # B at 08:09 joins A's session: 08:06-08:14 holds four rows
    assert output(spark, tmp_path, "overall", "total") == [(360, 840, 15), (1020, 1320, 16)]
    assert output(spark, tmp_path, "overall_by_item", "customer", "n") == [
        (360, 840, "A", 3), (360, 840, "B", 1), (1020, 1320, "B", 1)
    ]


# --- planning and Flink's errors (no Spark) --------------------------------------------------

CATALOG = {spec.name: spec for spec in parse_statements(ORDERS, catalog={})}
GROUP = "GROUP BY window_start, window_end, customer"


def session(arguments: str, group: str = GROUP) -> str:
    return (f"SELECT window_start, window_end, customer, COUNT(*) AS n "
            f"FROM TABLE(SESSION({arguments})) {group}")


def test_a_session_view_is_planned_with_its_gap_and_partition_keys() -> None:
    plan = plan_window_aggregate(
        session("TABLE orders PARTITION BY (customer, k), DESCRIPTOR(ts), INTERVAL '2' MINUTE"),
        CATALOG,
    )
    assert (plan.kind, plan.gap_ms, plan.partition_keys, plan.group_keys) == (
        "SESSION", 120_000, ("customer", "k"), ("customer",)
    )
    named = plan_window_aggregate(session(
        "DATA => TABLE orders PARTITION BY customer, TIMECOL => DESCRIPTOR(ts), "
        "GAP => INTERVAL '30' SECONDS"
    ), CATALOG)
    assert (named.gap_ms, named.partition_keys) == (30_000, ("customer",))
    plain = plan_window_aggregate(session("TABLE orders, DESCRIPTOR(ts), INTERVAL '1' HOUR"),
                                  CATALOG)
    assert (plain.gap_ms, plain.partition_keys) == (3_600_000, ())


@pytest.mark.parametrize(
    ("query", "message"),
    [
        (session("TABLE orders, DESCRIPTOR(ts), INTERVAL '0' SECOND"),
         r"SESSION\(TABLE orders, DESCRIPTOR\(ts\), INTERVAL '0' SECOND\): SESSION table "
         r"function based aggregate requires gap to be positive, but got gap 0 ms; write a "
         r"positive interval"),
        (session("TABLE orders, DESCRIPTOR(ts), INTERVAL '-5' SECONDS"),
         r"requires gap to be positive, but got gap -5000 ms"),
        (session("TABLE orders, DESCRIPTOR(ts), 5"),
         r"Cannot apply 'SESSION' to 5 as its gap\. Supported form\(s\): 'SESSION\(TABLE "
         r"table_name \[PARTITION BY \(keycols, \.\.\.\)\], DESCRIPTOR\(timecol\), gap\)'"),
        (session("TABLE orders PARTITION BY custmer, DESCRIPTOR(ts), INTERVAL '5' SECONDS"),
         r"PARTITION BY custmer: Column 'custmer' not found in table 'orders'; did you mean "
         r"'customer'\?"),
        (session("TABLE orders PARTITION BY , DESCRIPTOR(ts), INTERVAL '5' SECONDS"),
         r"syntax error at line 1, column 103: expected 'a column', found ','\n.*PARTITION BY , "
         r"DESCRIPTOR"),
        (session("TABLE orders PARTITION BY customer, k, DESCRIPTOR(ts), INTERVAL '5' SECONDS"),
         r"several PARTITION BY columns go in parentheses, written TABLE orders PARTITION BY "
         r"\(customer, k\)"),
        (session("TABLE orders PARTITION BY customer, DESCRIPTOR(ts), INTERVAL '5' SECONDS",
                 group="GROUP BY window_start, customer"),
         r"GROUP BY window_start, customer: a window aggregation groups by both window_start "
         r"and window_end \(missing window_end\); write GROUP BY window_start, window_end, "
         r"customer"),
        (session("TABLE orders, DESCRIPTOR(ts), INTERVAL '5' SECONDS, INTERVAL '1' SECOND"),
         r"Invalid arguments to function 'SESSION' \(it takes no offset\)"),
        ("SELECT window_start, window_end, COUNT(*) FROM TABLE(TUMBLE(TABLE orders PARTITION BY "
         "customer, DESCRIPTOR(ts), INTERVAL '5' SECONDS)) GROUP BY window_start, window_end",
         r"Only table with set semantics may be partitioned\. Invalid PARTITION BY clause in "
         r"the 0-th operand of table function 'TUMBLE': only SESSION takes TABLE t PARTITION "
         r"BY k"),
    ],
    ids=["gap-zero", "gap-negative", "gap-not-interval", "partition-unknown", "partition-empty",
         "partition-unparenthesized", "group-without-window-end", "offset", "tumble-partition"],
)
def test_session_planner_errors(query: str, message: str) -> None:
    with pytest.raises(DefinitionError, match=message):
        plan_window_aggregate(query, CATALOG)


# --- a source without WATERMARK FOR: sessions close by the clock -----------------------------


@pytest.mark.spark
def test_sessions_over_a_processing_time_source_close_by_the_clock(
    spark: SparkSession, tmp_path: Path
) -> None:
    plain = ORDERS.replace("orders (", "orders_plain (").replace(
        ",\n  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND", ""
    )
    view = SESSIONS.replace("sessions", "by_clock").replace("TABLE orders", "TABLE orders_plain")
    catalog = lake_with(tmp_path, spark, [plain, view], [row(0, "u", 1), row(1, "u", 8)])
    clock = ManualClock(ms(15))
    first = materialize_view(catalog, "by_clock", clock=clock)
    assert (first.watermark_ms, first.figures["open_windows"]) == (ms(15), 1)  # [1, 18) open
    # k2 (12 s) extends it to [1, 22); k3's window [2, 12) closed by 15 s, but it merges with
    # the open session first, so it is not late
    write_commits(tmp_path / "orders", [[row(2, "u", 12)], [row(3, "u", 2)]], schema=SCHEMA)
    clock.set(ms(30))
    second = materialize_view(catalog, "by_clock", clock=clock)
    assert output(spark, tmp_path, "by_clock", "n", "total") == [(1, 22, 4, 1 + 2 + 4 + 8)]
    assert (second.figures["late_rows"], second.figures["open_windows"]) == (0, 0)


class _RunningClock:
    """A wall clock's readings: each one a second after the one before."""

    def __init__(self, start_ms: int) -> None:
        self.readings = iter(range(start_ms, start_ms + 3_600_000, 1000))

    def now_ms(self) -> int:
        return next(self.readings)


@pytest.mark.spark
@pytest.mark.parametrize("start", [15, 16, 17])
def test_a_run_commits_the_processing_time_watermark_its_windows_closed_by(
    spark: SparkSession, tmp_path: Path, start: int
) -> None:
    """The clock moves between the step and the commit (in Dagster they are separate ops):
    the watermark stamped on the output is the one the step ran at, so a session the run
    left open ([1, 18) here) is never behind the watermark a reader sees."""
    plain = ORDERS.replace("orders (", "orders_plain (").replace(
        ",\n  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND", ""
    )
    view = SESSIONS.replace("sessions", "by_clock").replace("TABLE orders", "TABLE orders_plain")
    catalog = lake_with(tmp_path, spark, [plain, view], [row(0, "u", 1), row(1, "u", 8)])
    result = materialize_view(catalog, "by_clock", clock=_RunningClock(ms(start)))
    assert result.watermark_ms is not None
    still_open = result.figures["open_windows"] == 1
    assert still_open == (result.watermark_ms < ms(18)), (start, result.watermark_ms)
