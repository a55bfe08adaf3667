"""Event-time TUMBLE / HOP windows over stamped changelogs (issue 3): firing at end − 1 ms,
late rows to the side table, open windows carried between runs and emitted exactly once."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable
from deltatables import write_commits
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from chronolake.errors import DefinitionError, RunError
from chronolake.lake import ARRIVAL_ORDER, backend_for
from chronolake.watermarks import LONG_MIN, REASON_COLUMN
from chronolake.watermarks.assigner import (
    WATERMARK_COLUMN,
    AssignedChangelog,
    WatermarkAssigner,
    WatermarkState,
)
from chronolake.windows import WINDOW_END, WINDOW_START, WINDOW_TIME, WindowResult, hop, tumble

pytestmark = pytest.mark.spark

T0 = datetime(2024, 1, 1)
T0_MS = 1_704_067_200_000
SCHEMA = pa.schema([("k", pa.int64()), ("user", pa.string()), ("ts", pa.timestamp("us")),
                    ("price", pa.int64())])
ASSIGNER = WatermarkAssigner(rowtime="ts", strategy="ts - INTERVAL '2' SECOND")
TEN_SECONDS = timedelta(seconds=10)


def totals() -> list[Column]:
    """The aggregations of every test (built once a Spark session exists)."""
    return [F.sum("price").alias("total"), F.count(F.lit(1)).alias("rows")]


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def ms(seconds: float) -> int:
    return T0_MS + round(seconds * 1000)


def row(k: int, user: str, seconds: float | None, price: int = 1) -> list[dict[str, Any]]:
    """One commit holding one row."""
    ts = None if seconds is None else at(seconds)
    return [{"k": k, "user": user, "ts": ts, "price": price}]


RUN_1 = [row(0, "u1", 1, 1), row(1, "u2", 4, 2), row(2, "u1", 12, 3), row(3, "u1", 8, 4)]
RUN_2 = [row(4, "u2", None, 9), row(5, "u2", 15, 5), row(6, "u1", 5, 6), row(7, "u1", 11, 7),
         row(8, "u2", 25, 8)]
RUN_3 = [row(9, "u1", 21, 10)]


def assigned_run(
    spark: SparkSession, path: Path, commits: Sequence[Any], *, state: WatermarkState | None = None
) -> AssignedChangelog:
    start = DeltaTable(str(path)).version() + 1 if DeltaTable.is_deltatable(str(path)) else 0
    write_commits(path, commits, schema=SCHEMA)
    return ASSIGNER.assign(backend_for(spark).appends(path, start), state=state)


def windows(result: WindowResult, *keys: str) -> list[tuple[Any, ...]]:
    """Fired windows as (keys..., start s, end s, total, rows), sorted (test-side collect)."""
    out = result.output.select(*keys, WINDOW_START, WINDOW_END, "total", "rows").collect()
    seconds = [
        (*r[:len(keys)], (r[WINDOW_START] - T0).total_seconds(),
         (r[WINDOW_END] - T0).total_seconds(), r["total"], r["rows"])
        for r in out
    ]
    return sorted(seconds)


def late(result: WindowResult) -> list[tuple[int, str, int]]:
    """Side-table rows as (k, reason, watermark at arrival)."""
    rows = result.late_rows.orderBy(*ARRIVAL_ORDER).select("k", REASON_COLUMN, WATERMARK_COLUMN)
    return [(r[0], r[1], r[2]) for r in rows.collect()]


def test_tumble_fires_at_end_minus_one_ms_and_sends_late_rows_aside(
    spark: SparkSession, tmp_path: Path
) -> None:
    assigned = assigned_run(spark, tmp_path / "orders", RUN_1 + RUN_2 + RUN_3)
    result = tumble(assigned, size=TEN_SECONDS, aggregations=totals(), keys=["user"], final=True)
    assert windows(result, "user") == [
        ("u1", 0, 10, 1, 1),     # k3 (8 s) and k6 (5 s) arrived after 12 s - 2 s = 10 s >= 9.999 s
        ("u1", 10, 20, 10, 2),   # k7 (11 s) is late for the source (13 s) but its window is open
        ("u1", 20, 30, 10, 1),
        ("u2", 0, 10, 2, 1),
        ("u2", 10, 20, 5, 1),
        ("u2", 20, 30, 8, 1),
    ]
    assert late(result) == [
        (3, "window_closed", ms(10)), (4, "null_rowtime", ms(10)), (6, "window_closed", ms(13)),
    ]
    assert result.late_counts() == {
        "null_rowtime": 1, "window_closed": 2, "retraction_after_emit": 0,
    }
    first = result.output.orderBy(WINDOW_START).select(WINDOW_END, WINDOW_TIME).first()
    assert first[WINDOW_TIME] == first[WINDOW_END] - timedelta(milliseconds=1)
    assert result.output.schema[WINDOW_START].dataType.typeName() == "timestamp_ntz"


def test_window_fires_exactly_when_watermark_reaches_end_minus_one_ms(
    spark: SparkSession, tmp_path: Path
) -> None:
    # ts - 2 s: a row at 11.999 s brings the watermark to 9.999 s: [0, 10) fires; 11.998 s not
    almost = [row(0, "u", 1), row(1, "u", 11.998)]
    result = tumble(
        assigned_run(spark, tmp_path / "a", almost), size=TEN_SECONDS, aggregations=totals()
    )
    assert (windows(result), result.watermark) == ([], ms(9.998))
    exactly = [row(0, "u", 1), row(1, "u", 11.999)]
    result = tumble(
        assigned_run(spark, tmp_path / "b", exactly), size=TEN_SECONDS, aggregations=totals()
    )
    assert (windows(result), result.watermark) == ([(0, 10, 1, 1)], ms(9.999))


def _persisted(spark: SparkSession, state: DataFrame, path: Path) -> DataFrame:
    """Store the open windows' rows as a real file, as the runtime does, and read them back."""
    state.write.parquet(str(path))
    return spark.read.parquet(str(path))


def test_open_windows_fire_in_a_later_run_exactly_once(spark: SparkSession, tmp_path: Path) -> None:
    orders = tmp_path / "orders"
    first = assigned_run(spark, orders, RUN_1)
    run_1 = tumble(first, size=TEN_SECONDS, aggregations=totals(), keys=["user"])
    assert windows(run_1, "user") == [("u1", 0, 10, 1, 1), ("u2", 0, 10, 2, 1)]
    assert run_1.watermark == ms(10)
    state_1 = _persisted(spark, run_1.state, tmp_path / "state1")

    second = assigned_run(spark, orders, RUN_2, state=first.state())
    run_2 = tumble(second, size=TEN_SECONDS, aggregations=totals(), keys=["user"], state=state_1)
    # [10, 20) holds k2 from run 1 and fires now that the watermark is 23 s
    assert windows(run_2, "user") == [("u1", 10, 20, 10, 2), ("u2", 10, 20, 5, 1)]
    # k6 (5 s) belongs to [0, 10), which run 1 already emitted
    assert late(run_2) == [(4, "null_rowtime", ms(10)), (6, "window_closed", ms(13))]
    state_2 = _persisted(spark, run_2.state, tmp_path / "state2")

    third = assigned_run(spark, orders, RUN_3, state=second.state())
    run_3 = tumble(
        third, size=TEN_SECONDS, aggregations=totals(), keys=["user"], state=state_2, final=True
    )
    assert windows(run_3, "user") == [("u1", 20, 30, 10, 1), ("u2", 20, 30, 8, 1)]
    assert run_3.state.count() == 0

    whole = assigned_run(spark, tmp_path / "again", RUN_1 + RUN_2 + RUN_3)
    batch = tumble(whole, size=TEN_SECONDS, aggregations=totals(), keys=["user"], final=True)
    runs = windows(run_1, "user") + windows(run_2, "user") + windows(run_3, "user")
    assert sorted(runs) == windows(batch, "user")


def test_hop_counts_a_row_in_its_open_windows_only(spark: SparkSession, tmp_path: Path) -> None:
    commits = [row(0, "u", 1), row(1, "u", 12), row(2, "u", 7), row(3, "u", 3)]
    assigned = assigned_run(spark, tmp_path / "orders", commits)
    result = hop(
        assigned, size=TEN_SECONDS, slide=timedelta(seconds=5), aggregations=totals(), final=True
    )
    assert windows(result) == [
        (-5, 5, 1, 1),
        (0, 10, 1, 1),     # k2 (7 s) arrived at watermark 10 s: [0, 10) had fired
        (5, 15, 2, 2),     # ... but [5, 15) had not: k2 counts there
        (10, 20, 1, 1),
    ]
    # k3 (3 s): both of its windows, [-5, 5) and [0, 10), had fired
    assert late(result) == [(3, "window_closed", ms(10))]


# --- definition errors: raised before any Spark job of the window runs ----------------------


@pytest.fixture(scope="module")
def stamped(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> AssignedChangelog:
    return assigned_run(spark, tmp_path_factory.mktemp("errors") / "orders", RUN_1[:1])


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda a: tumble(a, size=TEN_SECONDS, aggregations=totals(), time_col="k"),
         r"TUMBLE\(DESCRIPTOR\(k\)\): an event-time window needs the rowtime attribute the "
         r"input's watermark is defined on, 'ts'; use DESCRIPTOR\(ts\)"),
        (lambda a: tumble(a, size=timedelta(0), aggregations=totals()),
         r"TUMBLE size must be a positive whole number of milliseconds, got "
         r"datetime.timedelta\(0\)"),
        (lambda a: tumble(a, size=timedelta(microseconds=1500), aggregations=totals()),
         r"TUMBLE size must be a positive whole number of milliseconds"),
        (lambda a: hop(a, size=TEN_SECONDS, slide=timedelta(seconds=3), aggregations=totals()),
         r"HOP size 0:00:10 is not a whole multiple of slide 0:00:03; choose a size that is "
         r"k × slide, e.g. size=0:00:09"),
        (lambda a: tumble(a, size=TEN_SECONDS, aggregations=[]),
         r"TUMBLE window aggregation needs at least one aggregation"),
        (lambda a: tumble(a, size=TEN_SECONDS, aggregations=totals(), keys=["customer"]),
         r"TUMBLE window keys 'customer' are not input columns; use some of: k, user, ts"),
    ],
    ids=["descriptor", "zero-size", "sub-millisecond", "hop-multiple", "no-aggregation", "key"],
)
def test_definition_errors(stamped: AssignedChangelog, call: Any, message: str) -> None:
    with pytest.raises(DefinitionError, match=message):
        call(stamped)


def test_state_from_another_query_is_refused(
    spark: SparkSession, stamped: AssignedChangelog
) -> None:
    foreign = spark.createDataFrame([(1, LONG_MIN)], "other long, _watermark long")
    with pytest.raises(
        RunError,
        match=r"window state columns \['other', '_watermark'\] do not match the input's "
        r"\['k', 'user', .*pass the `state` the previous run of this query returned",
    ):
        tumble(stamped, size=TEN_SECONDS, aggregations=totals(), state=foreign)
