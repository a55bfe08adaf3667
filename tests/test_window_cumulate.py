"""CUMULATE windows and window offsets (issue 22, items 1 and 3), with Flink's rules: every
window of a cumulation starts at the cumulation's start (aligned to its size, shifted by
the offset) and ends at each step up to the size; each is emitted once, when the watermark
passes its end − 1 ms; a row is late only when all its windows had fired on arrival. A
window start is ts − ((ts − offset) mod every), as Flink's TimeWindow.getWindowStartWithOffset.
Every expected row below is worked out by hand from those rules (seconds after T0)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltatables import update_rows, write_commits
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from chronolake import Catalog, RunResult, materialize_view
from chronolake.clock import ManualClock
from chronolake.errors import DefinitionError
from chronolake.lake import DeltaRsBackend, backend_for
from chronolake.lake.layout import LATE_ROOT, output_path
from chronolake.sql.ddl import parse_statements
from chronolake.sql.window import plan_window_aggregate
from chronolake.watermarks import REASON_COLUMN, WATERMARK_COLUMN
from chronolake.watermarks.assigner import WatermarkAssigner
from chronolake.windows import (
    WINDOW_END,
    WINDOW_START,
    WINDOW_TIME,
    WindowKind,
    Windows,
    cumulate,
    split_windows,
    tumble,
)

T0 = datetime(2024, 1, 1)
T0_MS = 1_704_067_200_000
SCHEMA = pa.schema([("k", pa.int64()), ("ts", pa.timestamp("us")), ("price", pa.int64())])
BIDS = """CREATE TABLE bids (
  k BIGINT, ts TIMESTAMP(3), price BIGINT,
  WATERMARK FOR ts AS ts - INTERVAL '2' SECOND
) WITH ('path' = 'bids')"""
CUMULATIVE = """CREATE VIEW cumulative AS
SELECT window_start, window_end, COUNT(*) AS n, SUM(price) AS total, window_time
FROM TABLE(CUMULATE(TABLE {table}, DESCRIPTOR(ts), INTERVAL '2' SECONDS, INTERVAL '10' SECONDS))
GROUP BY window_start, window_end"""


def ms(seconds: float) -> int:
    return T0_MS + round(seconds * 1000)


def commits(*rows: tuple[int, float, int]) -> list[list[dict[str, Any]]]:
    """One commit per (k, seconds, price): fixes the arrival order, and so the watermark."""
    return [[{"k": k, "ts": T0 + timedelta(seconds=s), "price": p}] for k, s, p in rows]


def lake_with(root: Path, spark: SparkSession, ddl: Sequence[str], rows: Sequence[Any]) -> Catalog:
    write_commits(root / "bids", rows, schema=SCHEMA)
    catalog = Catalog(root, spark)
    for statement in ddl:
        catalog.execute(statement)
    return catalog


def output(spark: SparkSession, lake: Path, view: str, *extra: str) -> list[tuple[Any, ...]]:
    """The view's rows as (start s, end s, extra...), sorted (test-side collect)."""
    rows = DeltaRsBackend(spark).snapshot(output_path(lake, view)).collect()
    return sorted(((r[WINDOW_START] - T0).total_seconds(), (r[WINDOW_END] - T0).total_seconds(),
                   *(r[c] for c in extra)) for r in rows)


def side_table(spark: SparkSession, lake: Path, view: str) -> list[tuple[int, str, int]]:
    rows = DeltaRsBackend(spark).snapshot(lake / LATE_ROOT / view).collect()
    return sorted((r["k"], r[REASON_COLUMN], r[WATERMARK_COLUMN]) for r in rows)


# --- CUMULATE views --------------------------------------------------------------------------

# Flink's documented example (window-tvf.md, CUMULATE of 2 min up to 10 min over Bid), in
# seconds; k6 at 30 s only moves the watermark past 20 s.
FLINK_DOCS = commits((0, 5, 4), (1, 7, 2), (2, 9, 5), (3, 11, 3), (4, 13, 1), (5, 17, 6),
                     (6, 30, 100))


@pytest.mark.spark
def test_cumulate_view_gives_flinks_documented_windows(
    spark: SparkSession, tmp_path: Path
) -> None:
    catalog = lake_with(tmp_path, spark, [BIDS, CUMULATIVE.format(table="bids")], FLINK_DOCS)
    result = materialize_view(catalog, "cumulative")
    assert output(spark, tmp_path, "cumulative", "total") == [
        (0, 6, 4), (0, 8, 6), (0, 10, 11),
        (10, 12, 3), (10, 14, 4), (10, 16, 4), (10, 18, 10), (10, 20, 10),
    ]
    first = DeltaRsBackend(spark).snapshot(output_path(tmp_path, "cumulative")).first()
    assert first is not None
    assert first[WINDOW_TIME] == first[WINDOW_END] - timedelta(milliseconds=1)
    # k6 (30 s) holds the cumulation [30, 40): its five windows, all open at 28 s
    assert (result.figures["open_windows"], result.figures["pending_rows"]) == (5, 1)
    assert (result.figures["windows_fired"], result.figures["late_rows"]) == (8, 0)


# k1 sits exactly at the end of [0, 6) and k2 exactly at the cumulation's end (10 s): each
# belongs to the windows after. k3 (3 s) arrives at watermark 8 s: [0, 4), [0, 6), [0, 8)
# have fired, [0, 10) has not, so it counts there only. k5 (5 s) arrives at 11 s, after
# [0, 10), its last window, fired: late. The split between runs is after k2.
BOUNDARIES = commits((0, 1, 1), (1, 6, 10), (2, 10, 100),
                     (3, 3, 1000), (4, 13, 10000), (5, 5, 7), (6, 25, 1))
BOUNDARY_WINDOWS = [
    (0, 2, 1, 1), (0, 4, 1, 1), (0, 6, 1, 1), (0, 8, 2, 11), (0, 10, 3, 1011),
    (10, 12, 1, 100), (10, 14, 2, 10100), (10, 16, 2, 10100), (10, 18, 2, 10100),
    (10, 20, 2, 10100),
]


def _runs(spark: SparkSession, lake: Path, split: int | None) -> list[RunResult]:
    """The view over BOUNDARIES, in one run or two runs split after `split` commits."""
    first = BOUNDARIES if split is None else BOUNDARIES[:split]
    catalog = lake_with(lake, spark, [BIDS, CUMULATIVE.format(table="bids")], first)
    results = [materialize_view(catalog, "cumulative")]
    if split is not None:
        write_commits(lake / "bids", BOUNDARIES[split:], schema=SCHEMA)
        results.append(materialize_view(Catalog(lake, spark), "cumulative"))
    return results


@pytest.mark.slow
@pytest.mark.spark
def test_a_cumulation_split_across_two_runs_gives_the_rows_of_one_run(
    spark: SparkSession, tmp_path: Path
) -> None:
    [whole] = _runs(spark, tmp_path / "one", None)
    first, second = _runs(spark, tmp_path / "two", 3)
    for lake in (tmp_path / "one", tmp_path / "two"):
        assert output(spark, lake, "cumulative", "n", "total") == BOUNDARY_WINDOWS
        assert side_table(spark, lake, "cumulative") == [(5, "window_closed", ms(11))]
    # run 1 ends at 8 s: [0, 2) … [0, 8) fired; k0, k1 wait in state for [0, 10), k2 for
    # the cumulation [10, 20) (its five windows)
    assert (first.watermark_ms, first.figures["windows_fired"]) == (ms(8), 4)
    assert (first.figures["open_windows"], first.figures["pending_rows"]) == (6, 3)
    # run 2 (and the single run) end at 23 s with k6's cumulation [20, 30) open: [20, 26),
    # [20, 28), [20, 30)
    for last in (second, whole):
        assert (last.watermark_ms, last.figures["open_windows"]) == (ms(23), 3)
        assert last.figures["pending_rows"] == 1
    assert whole.figures["windows_fired"] == 10


NO_WATERMARK = """CREATE TABLE bids_plain (k BIGINT, ts TIMESTAMP(3), price BIGINT)
WITH ('path' = 'bids')"""


@pytest.mark.slow
@pytest.mark.spark
def test_a_cumulate_view_over_a_processing_time_source_closes_windows_by_the_clock(
    spark: SparkSession, tmp_path: Path
) -> None:
    view = CUMULATIVE.replace("'2' SECONDS", "'5' SECONDS").format(table="bids_plain")
    catalog = lake_with(tmp_path, spark, [NO_WATERMARK, view], commits((0, 1, 1), (1, 12, 2)))
    clock = ManualClock(ms(7))
    first = materialize_view(catalog, "cumulative", clock=clock)
    # 7 s: [0, 5) closed; [0, 10), [10, 15) and [10, 20) open
    assert output(spark, tmp_path, "cumulative", "n") == [(0, 5, 1)]
    assert (first.figures["open_windows"], first.figures["pending_rows"]) == (3, 2)
    # k2 (3 s) arrives at the clock of run 1 (7 s): [0, 5) is closed, [0, 10) is not
    write_commits(tmp_path / "bids", commits((2, 3, 4), (3, 2, 8)), schema=SCHEMA)
    clock.set(ms(21))
    materialize_view(catalog, "cumulative", clock=clock)
    assert output(spark, tmp_path, "cumulative", "n", "total") == [
        (0, 5, 1, 1), (0, 10, 3, 13), (10, 15, 1, 2), (10, 20, 1, 2),
    ]
    assert side_table(spark, tmp_path, "cumulative") == []


@pytest.mark.slow
@pytest.mark.spark
def test_a_retraction_cancels_its_row_in_the_open_windows_of_a_cumulation(
    spark: SparkSession, tmp_path: Path
) -> None:
    cdf = BIDS.replace("WITH ('path' = 'bids')", "WITH ('path' = 'bids', 'changelog' = 'cdf')")
    view = CUMULATIVE.replace("'2' SECONDS", "'5' SECONDS").replace("'10' SECONDS",
                                                                    "'20' SECONDS")
    catalog = lake_with(tmp_path, spark, [cdf, view.format(table="bids")],
                        commits((0, 1, 1), (1, 8, 10)))
    # k0's price 1 -> 2 arrives at watermark 6 s: [0, 5) was emitted with price 1 and stays
    # so; in [0, 10), [0, 15), [0, 20), still open, the -U cancels the +I and the +U counts
    update_rows(tmp_path / "bids", "k = 0", {"price": "price + 1"})
    write_commits(tmp_path / "bids", commits((2, 30, 100)), schema=SCHEMA)
    result = materialize_view(catalog, "cumulative")
    assert output(spark, tmp_path, "cumulative", "n", "total") == [
        (0, 5, 1, 1), (0, 10, 2, 12), (0, 15, 2, 12), (0, 20, 2, 12),
    ]
    assert (result.figures["retractions_in"], result.figures["late_rows"]) == (1, 0)


# --- offsets in views ------------------------------------------------------------------------

OFFSET_VIEW = """CREATE VIEW {name} AS
SELECT window_start, window_end, COUNT(*) AS n
FROM TABLE({call})
GROUP BY window_start, window_end"""


@pytest.mark.slow
@pytest.mark.spark
def test_offsets_shift_tumble_hop_and_cumulate_views(spark: SparkSession, tmp_path: Path) -> None:
    calls = {
        # Flink's docs: on a 10 s tumble, -6 s places windows as +4 s does
        "tumble_plus_4": "TUMBLE(TABLE bids, DESCRIPTOR(ts), INTERVAL '10' SECOND, "
                         "INTERVAL '4' SECOND)",
        "tumble_minus_4": "TUMBLE(TABLE bids, DESCRIPTOR(ts), INTERVAL '10' SECOND, "
                          "-INTERVAL '4' SECOND)",
        "hop_named_minus_3": "HOP(DATA => TABLE bids, TIMECOL => DESCRIPTOR(ts), "
                             "SLIDE => INTERVAL '5' SECOND, SIZE => INTERVAL '10' SECOND, "
                             "OFFSET => INTERVAL '-3' SECOND)",
        "cumulate_minus_16": "CUMULATE(TABLE bids, DESCRIPTOR(ts), INTERVAL '5' SECOND, "
                             "INTERVAL '10' SECOND, INTERVAL '-16' SECOND)",
    }
    ddl = [BIDS, *(OFFSET_VIEW.format(name=name, call=call) for name, call in calls.items())]
    rows = commits((0, 3, 1), (1, 4, 1), (2, 13, 1), (3, 14, 1), (4, 30, 1))  # watermark 28 s
    catalog = lake_with(tmp_path, spark, ddl, rows)
    for name in calls:
        materialize_view(catalog, name)
    found = {name: output(spark, tmp_path, name, "n") for name in calls}
    # [−6, 4) [4, 14) [14, 24) …: k1 starts [4, 14); k4's [24, 34) is open
    assert found["tumble_plus_4"] == [(-6, 4, 1), (4, 14, 2), (14, 24, 1)]
    # [−4, 6) [6, 16) …
    assert found["tumble_minus_4"] == [(-4, 6, 2), (6, 16, 2)]
    # starts at 2 mod 5 (−3 ≡ 2): k0, k1 in [−3, 7) and [2, 12); k2, k3 in [7, 17), [12, 22)
    assert found["hop_named_minus_3"] == [(-3, 7, 2), (2, 12, 2), (7, 17, 2), (12, 22, 2)]
    # cumulations start at 4 mod 10 (−16 ≡ 4), windows end every 5 s: k0 (3 s) is in
    # [−6, 4) only; k1 (4 s) in [4, 9) and [4, 14); k2 (13 s) in [4, 14); k3 (14 s) starts
    # [14, 19) and [14, 24); k4 (30 s) holds [24, 34), open
    assert found["cumulate_minus_16"] == [(-6, 4, 1), (4, 9, 1), (4, 14, 2), (14, 19, 1),
                                          (14, 24, 1)]


# --- window assignment with offsets (split_windows, one Spark job each) ---------------------


@pytest.mark.spark
@pytest.mark.parametrize(
    ("windows", "seconds", "expected"),
    [
        # Flink's docs: 00:00:04 on a 10 min tumble, per offset (here in seconds)
        (Windows(WindowKind.TUMBLE, 600_000, 600_000, -960_000), 4, [(-360, 240)]),
        (Windows(WindowKind.TUMBLE, 600_000, 600_000, -360_000), 4, [(-360, 240)]),
        (Windows(WindowKind.TUMBLE, 600_000, 600_000, -240_000), 4, [(-240, 360)]),
        (Windows(WindowKind.TUMBLE, 600_000, 600_000, 0), 4, [(0, 600)]),
        (Windows(WindowKind.TUMBLE, 600_000, 600_000, 240_000), 4, [(-360, 240)]),
        (Windows(WindowKind.TUMBLE, 600_000, 600_000, 360_000), 4, [(-240, 360)]),
        # a row exactly at a window end starts the next window
        (Windows(WindowKind.TUMBLE, 10_000, 10_000, 4_000), 14, [(14, 24)]),
        (Windows(WindowKind.HOP, 10_000, 5_000, 2_000), 7, [(2, 12), (7, 17)]),
        (Windows(WindowKind.HOP, 10_000, 5_000, 0), 5, [(0, 10), (5, 15)]),
        # CUMULATE: the cumulation [0, 10) by 2 s; a row at 6 s is not in [0, 6)
        (Windows(WindowKind.CUMULATE, 10_000, 2_000), 6, [(0, 8), (0, 10)]),
        (Windows(WindowKind.CUMULATE, 10_000, 2_000), 5.999, [(0, 6), (0, 8), (0, 10)]),
        (Windows(WindowKind.CUMULATE, 10_000, 2_000), 10, [(10, 12), (10, 14), (10, 16),
                                                           (10, 18), (10, 20)]),
        (Windows(WindowKind.CUMULATE, 10_000, 2_000, 3_000), 2, [(-7, 3)]),
        (Windows(WindowKind.CUMULATE, 10_000, 2_000, 3_000), 3, [(3, 5), (3, 7), (3, 9),
                                                                 (3, 11), (3, 13)]),
        (Windows(WindowKind.CUMULATE, 10_000, 5_000, -2_000), -1, [(-2, 3), (-2, 8)]),
    ],
    ids=["tumble-minus-16m", "tumble-minus-6m", "tumble-minus-4m", "tumble-0", "tumble-plus-4m",
         "tumble-plus-6m", "tumble-at-end", "hop-offset", "hop-at-end", "cumulate-at-step-end",
         "cumulate-before-step-end", "cumulate-at-size-end", "cumulate-offset-before",
         "cumulate-offset-at-start", "cumulate-negative-offset-before-epoch"],
)
def test_a_row_gets_the_windows_flinks_rules_give(
    spark: SparkSession, windows: Windows, seconds: float, expected: list[tuple[int, int]]
) -> None:
    rows = spark.createDataFrame(
        [(T0 + timedelta(seconds=seconds), -(2**63))],
        "ts timestamp_ntz, _watermark long",
    )
    split = split_windows(rows, windows, rowtime=F.col("ts"), started=-(2**63),
                          ending=2**63 - 1)
    fired = sorted(((r[WINDOW_START] - T0).total_seconds(), (r[WINDOW_END] - T0).total_seconds())
                   for r in split.fired.collect())
    assert fired == expected


# --- the Python API --------------------------------------------------------------------------


@pytest.mark.spark
def test_cumulate_in_python_matches_the_view(spark: SparkSession, tmp_path: Path) -> None:
    write_commits(tmp_path / "bids", FLINK_DOCS, schema=SCHEMA)
    assigner = WatermarkAssigner(rowtime="ts", strategy="ts - INTERVAL '2' SECOND")
    assigned = assigner.assign(backend_for(spark).appends(tmp_path / "bids", 0))
    result = cumulate(assigned, step=timedelta(seconds=2), size=timedelta(seconds=10),
                      aggregations=[F.sum("price").alias("total")], final=True)
    fired = sorted(((r[WINDOW_START] - T0).total_seconds(), (r[WINDOW_END] - T0).total_seconds(),
                    r["total"]) for r in result.output.collect())
    assert fired == [
        (0, 6, 4), (0, 8, 6), (0, 10, 11),
        (10, 12, 3), (10, 14, 4), (10, 16, 4), (10, 18, 10), (10, 20, 10),
        (30, 32, 100), (30, 34, 100), (30, 36, 100), (30, 38, 100), (30, 40, 100),
    ]
    shifted = tumble(assigned, size=timedelta(seconds=10), offset=timedelta(seconds=-6),
                     aggregations=[F.count(F.lit(1)).alias("n")], final=True)
    assert sorted(((r[WINDOW_START] - T0).total_seconds(), r["n"])
                  for r in shifted.output.collect()) == [(4, 5), (14, 1), (24, 1)]


NOT_READ: Any = None  # errors come before the input is read


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: cumulate(NOT_READ, step=timedelta(seconds=3), size=timedelta(seconds=10),
                          aggregations=[]),
         r"CUMULATE size 0:00:10 is not a whole multiple of step 0:00:03; choose a size that "
         r"is k × step, e\.g\. size=0:00:09"),
        (lambda: cumulate(NOT_READ, step=timedelta(0), size=timedelta(seconds=10),
                          aggregations=[]),
         r"CUMULATE step must be a positive whole number of milliseconds"),
        (lambda: tumble(NOT_READ, size=timedelta(hours=1), offset=timedelta(hours=1),
                        aggregations=[]),
         r"TUMBLE offset 1:00:00 must be shorter than the size 1:00:00 \(Flink: abs\(offset\) "
         r"< size\); offset=0:00:00 gives the same windows"),
    ],
    ids=["cumulate-multiple", "cumulate-zero-step", "tumble-offset-too-long"],
)
def test_python_api_errors(call: Any, message: str) -> None:
    with pytest.raises(DefinitionError, match=message):
        call()


# --- planning (no Spark) ---------------------------------------------------------------------

CATALOG = {spec.name: spec for spec in parse_statements(BIDS, catalog={})
           if hasattr(spec, "name")}


def _plan(call: str) -> Any:
    return plan_window_aggregate(
        f"SELECT window_start, window_end, COUNT(*) AS n FROM TABLE({call}) "
        "GROUP BY window_start, window_end",
        CATALOG,
    )


def test_cumulate_and_offsets_are_planned_from_positional_or_named_arguments() -> None:
    plan = _plan("CUMULATE(TABLE bids, DESCRIPTOR(ts), INTERVAL '1' HOUR, INTERVAL '1' DAY)")
    assert (plan.kind, plan.slide_ms, plan.size_ms, plan.offset_ms) == (
        "CUMULATE", 3_600_000, 86_400_000, 0
    )
    assert plan.windows == Windows(WindowKind.CUMULATE, 86_400_000, 3_600_000, 0)
    named = _plan("CUMULATE(DATA => TABLE bids, SIZE => INTERVAL '1' DAY, "
                  "STEP => INTERVAL '1' HOUR, TIMECOL => DESCRIPTOR(ts), "
                  "OFFSET => INTERVAL '-8' HOURS)")
    assert named.windows == Windows(WindowKind.CUMULATE, 86_400_000, 3_600_000, -28_800_000)
    for negative in ("INTERVAL '-16' MINUTE", "-INTERVAL '16' MINUTE", "INTERVAL -'16' MINUTE"):
        plan = _plan(f"TUMBLE(TABLE bids, DESCRIPTOR(ts), INTERVAL '1' HOUR, {negative})")
        assert plan.offset_ms == -960_000
    hop = _plan("HOP(TABLE bids, DESCRIPTOR(ts), INTERVAL '5' MINUTE, INTERVAL '10' MINUTE, "
                "INTERVAL '2' HOUR)")
    assert (hop.kind, hop.offset_ms) == ("HOP", 7_200_000)  # any offset on HOP, as in Flink


TVF = "TABLE bids, DESCRIPTOR(ts)"


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (f"CUMULATE({TVF}, INTERVAL '7' MINUTE, INTERVAL '1' HOUR)",
         r"CUMULATE\(TABLE bids, DESCRIPTOR\(ts\), INTERVAL '7' MINUTE, INTERVAL '1' HOUR\): "
         r"CUMULATE table function based aggregate requires maxSize must be an integral "
         r"multiple of step, but got maxSize 3600000 ms and step 420000 ms; make the size a "
         r"whole multiple of the step, e\.g\. 3360000ms or 3780000ms"),
        (f"CUMULATE({TVF}, INTERVAL '0' MINUTE, INTERVAL '1' HOUR)",
         r"CUMULATE table function based aggregate requires maxSize and step to be positive, "
         r"but got maxSize 3600000 ms and step 0 ms; write a positive interval, e\.g\. "
         r"INTERVAL '10' MINUTES"),
        (f"CUMULATE({TVF}, INTERVAL '1' MINUTE, INTERVAL '-1' HOUR)",
         r"requires maxSize and step to be positive, but got maxSize -3600000 ms and step "
         r"60000 ms"),
        (f"TUMBLE({TVF}, -INTERVAL '1' HOUR)",
         r"TUMBLE table function based aggregate requires size to be positive, but got "
         r"-3600000 ms"),
        (f"HOP({TVF}, INTERVAL '0' SECOND, INTERVAL '1' HOUR)",
         r"HOP table function based aggregate requires slide and size to be positive, but got "
         r"slide 0 ms and size 3600000 ms"),
        (f"TUMBLE({TVF}, INTERVAL '1' HOUR, 5)",
         r"TUMBLE\(TABLE bids, DESCRIPTOR\(ts\), INTERVAL '1' HOUR, 5\): Cannot apply 'TUMBLE' "
         r"to 5 as its offset\. Supported form\(s\): 'TUMBLE\(TABLE table_name, "
         r"DESCRIPTOR\(timecol\), datetime interval\[, datetime interval\]\)'; write the offset "
         r"as an interval, e\.g\. INTERVAL '16' MINUTES or INTERVAL '-16' MINUTES"),
        (f"CUMULATE({TVF}, INTERVAL '1' MINUTE, INTERVAL '1' HOUR, '5 minutes')",
         r"Cannot apply 'CUMULATE' to '5 minutes' as its offset\. Supported form\(s\): "
         r"'CUMULATE\(TABLE table_name, DESCRIPTOR\(timecol\), datetime interval, datetime "
         r"interval\[, datetime interval\]\)'"),
        (f"TUMBLE({TVF}, INTERVAL '1' HOUR, INTERVAL '1' MONTH)",
         r"the window offset must be a day-time interval with one unit \(SECOND, MINUTE, HOUR "
         r"or DAY\)"),
        (f"TUMBLE({TVF}, INTERVAL '1' HOUR, INTERVAL '0.0001' SECOND)",
         r"the window offset INTERVAL '0\.0001' SECOND must be a whole number of milliseconds"),
        (f"TUMBLE({TVF}, INTERVAL '1' HOUR, INTERVAL '1' HOUR)",
         r"TUMBLE table function parameters must satisfy abs\(offset\) < size, but got size "
         r"3600000 ms and offset 3600000 ms; drop the offset"),
        (f"TUMBLE({TVF}, INTERVAL '10' MINUTE, INTERVAL '-16' MINUTE)",
         r"must satisfy abs\(offset\) < size, but got size 600000 ms and offset -960000 ms; an "
         r"offset of 240000 ms places the windows alike"),
        (f"CUMULATE({TVF}, INTERVAL '1' MINUTE)",
         r"Invalid number of arguments to function 'CUMULATE'; write CUMULATE\(TABLE <table>, "
         r"DESCRIPTOR\(<time column>\), step, size\[, offset\]\)"),
        (f"HOP({TVF}, INTERVAL '1' MINUTE, INTERVAL '1' HOUR, INTERVAL '1' MINUTE, "
         "INTERVAL '1' MINUTE)",
         r"Invalid number of arguments to function 'HOP'"),
        ("TUMBLE(DATA => TABLE bids, TIMECOL => DESCRIPTOR(ts), SIZ => INTERVAL '1' HOUR)",
         r"TUMBLE: SIZ is not a parameter; write TUMBLE\(DATA => \.\.\., TIMECOL => \.\.\., "
         r"SIZE => \.\.\., OFFSET => \.\.\.\)"),
        ("CUMULATE(DATA => TABLE bids, TIMECOL => DESCRIPTOR(ts), STEP => INTERVAL '1' HOUR)",
         r"CUMULATE: SIZE missing"),
        ("TUMBLE(DATA => TABLE bids, DESCRIPTOR(ts), INTERVAL '1' HOUR)",
         r"TUMBLE: name every argument or none"),
    ],
    ids=["cumulate-multiple", "cumulate-zero-step", "cumulate-negative-size",
         "tumble-negative-size", "hop-zero-slide", "offset-not-interval",
         "cumulate-offset-not-interval", "offset-month", "offset-sub-millisecond",
         "tumble-offset-equals-size", "tumble-offset-beyond-size", "cumulate-too-few",
         "hop-too-many", "named-unknown", "named-missing", "named-mixed"],
)
def test_planner_errors(call: str, message: str) -> None:
    with pytest.raises(DefinitionError, match=message):
        _plan(call)
