"""Splits by Delta partition and idle splits (`'scan.idle-timeout'`), issue 6 item 1.

Spark tests use real Delta tables written with delta-rs, one commit per entry. Idleness
follows commit time, so the tests set each commit's `commitInfo.timestamp` in the Delta log
(what the lake reads as the commit timestamp) to fix the time between commits. The rules
themselves are also driven directly through `Progress.of`, which needs no Spark.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable
from deltatables import write_commits
from pydantic import ValidationError
from pyspark.sql import SparkSession

from chronolake import Catalog
from chronolake.clock import ManualClock
from chronolake.errors import DefinitionError
from chronolake.lake import ARRIVAL_ORDER, backend_for
from chronolake.runtime.derived import DerivedTable
from chronolake.schema import DeltaOptions, EmitStrategy, PhysicalColumn, TableSpec, WatermarkSpec
from chronolake.watermarks import LONG_MIN, WatermarkStatus
from chronolake.watermarks.assigner import (
    LATE_COLUMN,
    WATERMARK_COLUMN,
    AssignedChangelog,
    WatermarkAssigner,
    WatermarkState,
)
from chronolake.watermarks.progress import Progress, SplitTick

T0 = datetime(2024, 1, 1)
T0_MS = 1_704_067_200_000  # T0 as UTC epoch millis


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def ms(seconds: float) -> int:
    return T0_MS + round(seconds * 1000)


def orders_spec(**options: str) -> TableSpec:
    return TableSpec(
        name="orders",
        columns=[PhysicalColumn(name="k", type="INT"), PhysicalColumn(name="s", type="STRING"),
                 PhysicalColumn(name="ts", type="TIMESTAMP(3)")],
        watermark=WatermarkSpec(rowtime="ts", expression="ts"),
        options=DeltaOptions.from_map({"path": "orders", **options}),
    )


def write_timed_commits(path: Path, commits: Sequence[tuple[float, list[dict[str, Any]]]],
                        **kwargs: Any) -> None:
    """Write one commit per (commit time in seconds after T0, rows), then set each commit's
    timestamp in the Delta log to that time."""
    write_commits(path, [rows for _, rows in commits], **kwargs)
    for version, (seconds, _) in enumerate(commits):
        log = path / "_delta_log" / f"{version:020d}.json"
        entries = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
        for entry in entries:
            if "commitInfo" in entry:
                entry["commitInfo"]["timestamp"] = ms(seconds)
        log.write_text("".join(json.dumps(entry) + "\n" for entry in entries))


def stamped(assigned: AssignedChangelog) -> list[tuple[int, int, bool]]:
    """(k, watermark in force, late) per row in arrival order (test-side collect)."""
    rows = assigned.rows.orderBy(*ARRIVAL_ORDER).select("k", WATERMARK_COLUMN, LATE_COLUMN)
    return [(r[0], r[1], r[2]) for r in rows.collect()]


# --- idle splits on a real Delta table ------------------------------------------------------

# (commit time s, rows): split b goes quiet after the first commit, then comes back behind a
QUIET_B = [
    (0, [{"k": 0, "s": "a", "ts": at(10)}, {"k": 1, "s": "b", "ts": at(10)}]),
    (1, [{"k": 2, "s": "a", "ts": at(20)}]),
    (2, [{"k": 3, "s": "a", "ts": at(30)}]),   # b: no rows for 2 s > 1.5 s: idle
    (3, [{"k": 4, "s": "a", "ts": at(40)}]),
    (4, [{"k": 5, "s": "b", "ts": at(15)}]),   # b active again, 25 s behind the source
    (5, [{"k": 6, "s": "a", "ts": at(50)}]),
    (6, [{"k": 7, "s": "b", "ts": at(60)}]),   # b caught up
]


@pytest.mark.spark
@pytest.mark.parametrize(
    ("options", "watermarks", "late"),
    [
        # b idle after the commit at 2 s: the source follows a; b's return cannot lower it
        # (its 15 s row is late) and holds it at 40 s until b passes a
        ({"scan.idle-timeout": "1500 ms"}, [LONG_MIN, LONG_MIN, 10, 10, 30, 40, 40, 40], [5]),
        # on-event: idleness is still decided at the end of each commit, so the same here
        ({"scan.idle-timeout": "1500 ms", "scan.watermark.emit.strategy": "on-event"},
         [LONG_MIN, LONG_MIN, 10, 10, 30, 40, 40, 40], [5]),
        # without the option b holds the source at 10 s until its next row
        ({}, [LONG_MIN, LONG_MIN, 10, 10, 10, 10, 15, 15], []),
    ],
)
def test_an_idle_split_does_not_hold_back_the_source(
    spark: SparkSession, tmp_path: Path, options: dict[str, str], watermarks: list[int],
    late: list[int],
) -> None:
    write_timed_commits(tmp_path / "orders", QUIET_B)
    assigner = WatermarkAssigner.for_table(orders_spec(**{"scan.split-by": "s", **options}))
    assigned = assigner.assign(backend_for(spark).appends(tmp_path / "orders", 0))
    assert [w for _, w, _ in stamped(assigned)] == [
        w if w == LONG_MIN else ms(w) for w in watermarks
    ]
    assert [k for k, _, is_late in stamped(assigned) if is_late] == late
    state = assigned.state()
    assert (state.splits, state.watermark, state.idle) == ({"a": ms(50), "b": ms(60)}, ms(50), ())


@pytest.mark.spark
def test_idle_splits_are_stored_and_a_restart_equals_one_run(
    spark: SparkSession, tmp_path: Path
) -> None:
    path = tmp_path / "orders"
    write_timed_commits(path, QUIET_B)
    assigner = WatermarkAssigner.for_table(
        orders_spec(**{"scan.split-by": "s", "scan.idle-timeout": "1500 ms"})
    )
    first = assigner.assign(backend_for(spark).appends(path, 0, 3))
    stored = WatermarkState.model_validate_json(first.state().model_dump_json())
    assert stored == WatermarkState(
        splits={"a": ms(40), "b": ms(10)}, watermark=ms(40), idle=("b",),
        active_at={"a": ms(3), "b": ms(0)},
    )
    second = assigner.assign(backend_for(spark).appends(path, 4), state=stored)
    whole = assigner.assign(backend_for(spark).appends(path, 0))
    assert stamped(first) + stamped(second) == stamped(whole)
    assert second.state() == whole.state()


@pytest.mark.spark
def test_the_runs_clock_idles_a_source_without_new_commits(
    spark: SparkSession, tmp_path: Path
) -> None:
    path = tmp_path / "orders"
    write_timed_commits(path, QUIET_B[:2])
    assigner = WatermarkAssigner(rowtime="ts", strategy="ts", split_by="s", idle_timeout_ms=1500)
    # at 2 s on the run's clock b has been quiet for 2 s: idle, the source follows a
    state = assigner.assign(backend_for(spark).appends(path, 0), now_ms=ms(2)).state()
    assert (state.watermark, state.idle, state.status) == (ms(20), ("b",), WatermarkStatus.ACTIVE)
    # a run much later with nothing new: every split idle, the source keeps its watermark
    nothing_new = backend_for(spark).appends(path, 0).limit(0)
    later = assigner.assign(nothing_new, state=state, now_ms=ms(60))
    assert later.state().idle == ("a", "b")
    assert later.state().watermark == ms(20)
    assert later.state().status is WatermarkStatus.IDLE


# --- splits by Delta partition --------------------------------------------------------------


@pytest.mark.spark
def test_one_split_per_delta_partition(spark: SparkSession, tmp_path: Path) -> None:
    path = tmp_path / "orders"
    write_commits(
        path,
        [[{"k": 0, "region": "eu/west", "shard": 1, "ts": at(10)},
          {"k": 1, "region": "us", "shard": 1, "ts": at(20)}],
         [{"k": 2, "region": None, "shard": 2, "ts": at(5)},
          {"k": 3, "region": "us", "shard": 1, "ts": at(30)}]],
        partition_by=["region", "shard"],
    )
    spec = orders_spec(**{"scan.split-by": "$partitions",
                          "scan.watermark.emit.strategy": "on-event"})
    partitions = DeltaTable(str(path)).metadata().partition_columns
    assigner = WatermarkAssigner.for_table(spec, partition_columns=partitions)
    assert assigner.split_by_partitions == ("region", "shard")
    assert assigner.emit_strategy is EmitStrategy.ON_EVENT
    assigned = assigner.assign(backend_for(spark).appends(path, 0))
    # keyed like the partition's path, values URL-encoded; the null partition is its own split
    assert assigned.state() == WatermarkState(
        splits={"region=eu%2Fwest/shard=1": ms(10), "region=us/shard=1": ms(30),
                "region=<null>/shard=2": ms(5)},
        watermark=ms(10),
    )
    # the null partition's split is discovered behind the source: it cannot lower it
    assert [w for _, w, _ in stamped(assigned)][-2:] == [ms(10), ms(10)]


def test_split_by_partitions_needs_a_partitioned_table() -> None:
    spec = orders_spec(**{"scan.split-by": "$partitions"})
    with pytest.raises(DefinitionError, match=r"table 'orders' declares 'scan.split-by' = "
                       r"'\$partitions' but its Delta table is not partitioned; split by a column"):
        WatermarkAssigner.for_table(spec, partition_columns=[])
    with pytest.raises(DefinitionError, match=r"needs the Delta table's partition columns; pass "
                       r"WatermarkAssigner.for_table\(spec, partition_columns=...\)"):
        WatermarkAssigner.for_table(spec)
    with pytest.raises(ValidationError, match=r"a source splits one way; to split by Delta "
                       r"partitions pass their columns as split_by_partitions"):
        WatermarkAssigner(rowtime="ts", strategy="ts", split_by="$partitions")


# --- the option ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "millis"),
    [("30 s", 30_000), ("1 min", 60_000), ("200ms", 200), ("1500", 1_500), ("2 H", 7_200_000),
     ("0 ms", None)],
)
def test_idle_timeout_is_a_flink_duration(text: str, millis: int | None) -> None:
    assert DeltaOptions.from_map({"path": "t", "scan.idle-timeout": text}).idle_timeout_ms == millis
    assert WatermarkAssigner.for_table(
        orders_spec(**{"scan.idle-timeout": text})
    ).idle_timeout_ms == millis


def test_idle_timeout_that_is_not_a_duration() -> None:
    with pytest.raises(DefinitionError, match=r"table 'orders': option 'scan.idle-timeout': .*"
                       r"'soon' is not a duration; write a whole number and a unit"):
        DeltaOptions.from_map({"path": "t", "scan.idle-timeout": "soon"}, table="orders")


# --- the rules, without Spark ---------------------------------------------------------------


def replay(ticks: Sequence[tuple[int, dict[str, int | None]]], *, timeout_ms: int | None,
           now_ms: int | None = None, start: WatermarkState | None = None) -> Progress:
    """`Progress.of` over ticks given as (commit ms, {split: max generated value})."""
    start = start or WatermarkState()
    return Progress.of(
        [SplitTick(split, tick, value, commit_ms, rows=1)
         for tick, (commit_ms, values) in enumerate(ticks) for split, value in values.items()],
        start_splits=start.splits, start_watermark=start.watermark, start_idle=start.idle,
        start_active_at=start.active_at, idle_timeout_ms=timeout_ms, now_ms=now_ms,
    )


def test_idleness_is_checked_at_the_end_of_each_tick() -> None:
    progress = replay([(0, {"a": 1, "b": 1}), (100, {"a": 2}), (101, {"a": 3}), (102, {"a": 4})],
                      timeout_ms=100)
    # quiet for exactly the timeout is not idle; longer is
    assert [t.watermark for t in progress.ticks] == [LONG_MIN, 1, 1, 3]
    assert [sorted(t.splits) for t in progress.ticks] == [["a", "b"], ["a", "b"], ["a", "b"], ["a"]]
    assert (progress.watermark, progress.idle) == (4, frozenset({"b"}))


def test_commit_time_never_goes_back() -> None:
    # the third commit's timestamp is behind the second's: it happens at 500, not 50
    progress = replay([(0, {"a": 1, "b": 1}), (500, {"a": 2, "b": 2}), (50, {"a": 3})],
                      timeout_ms=100)
    assert progress.active_at == {"a": 500, "b": 500}
    assert progress.idle == frozenset()


def test_a_split_from_a_state_without_activity_times_starts_active() -> None:
    start = WatermarkState(splits={"a": 5, "b": 5}, watermark=5)
    progress = replay([(1_000, {"a": 9}), (1_200, {"a": 10})], timeout_ms=100, start=start)
    assert [t.watermark for t in progress.ticks] == [5, 5]
    assert (progress.watermark, progress.idle) == (10, frozenset({"b"}))


def test_a_stored_idle_split_stays_idle_until_it_has_rows() -> None:
    start = WatermarkState(splits={"a": 5, "b": 1}, watermark=5, idle=("b",),
                           active_at={"a": 0, "b": -2_000})
    progress = replay([(10, {"a": 9}), (20, {"b": 2}), (30, {"a": 11})], timeout_ms=1_000,
                      start=start)
    assert [sorted(t.splits) for t in progress.ticks] == [["a"], ["a", "b"], ["a", "b"]]
    assert [t.watermark for t in progress.ticks] == [5, 9, 9]
    assert progress.watermark == 9 and progress.idle == frozenset()


def test_without_a_timeout_nothing_is_tracked() -> None:
    progress = replay([(0, {"a": 1, "b": 1}), (10_000, {"a": 2})], timeout_ms=None, now_ms=99_999)
    assert (progress.watermark, progress.idle, dict(progress.active_at)) == (1, frozenset(), {})


# --- an idle input of a join ----------------------------------------------------------------

JOIN = """
CREATE TABLE orders (
  order_id BIGINT, currency STRING, order_time TIMESTAMP(3),
  WATERMARK FOR order_time AS order_time
) WITH ('path' = 'orders');
CREATE TABLE rates (
  currency STRING, rate BIGINT, currency_time TIMESTAMP(3),
  WATERMARK FOR currency_time AS currency_time,
  PRIMARY KEY (currency) NOT ENFORCED
) WITH ('path' = 'rates', 'changelog' = 'cdf'{idle});
CREATE VIEW enriched AS
SELECT o.order_id, o.order_time, r.rate
FROM orders AS o JOIN rates FOR SYSTEM_TIME AS OF o.order_time AS r
ON o.currency = r.currency;
"""


@pytest.mark.spark
@pytest.mark.parametrize(("idle", "emitted"), [
    # rates has had no commit for longer than its timeout: it no longer holds the join back,
    # whose watermark is the orders' (Flink's rule for the inputs of an operator)
    (", 'scan.idle-timeout' = '1 min'", [(1, 2), (2, 2)]),
    # without a timeout rates' watermark (09:00) holds both orders in state
    ("", []),
])
def test_an_idle_input_does_not_hold_back_a_join(
    spark: SparkSession, tmp_path: Path, idle: str, emitted: list[tuple[int, int]]
) -> None:
    catalog = Catalog(tmp_path, spark)
    catalog.declare(JOIN.format(idle=idle))
    nine = datetime(2026, 11, 2, 9, 0)
    write_commits(tmp_path / "rates", [[{"currency": "EUR", "rate": 2, "currency_time": nine}]])
    write_commits(tmp_path / "orders", [[
        {"order_id": 1, "currency": "EUR", "order_time": nine + timedelta(minutes=10)},
        {"order_id": 2, "currency": "EUR", "order_time": nine + timedelta(minutes=20)},
    ]])
    later = ManualClock(int(time.time() * 1000) + 10 * 60 * 1000)  # rates quiet for 10 min
    result = DerivedTable(catalog, "enriched", clock=later).run()
    assert result.figures["pending_rows"] == 2 - len(emitted)
    rows = catalog.sql("SELECT order_id, rate FROM enriched").collect()
    assert sorted((r["order_id"], r["rate"]) for r in rows) == emitted
    if emitted:
        assert result.watermark_ms == int(
            (nine + timedelta(minutes=20)).replace(tzinfo=UTC).timestamp() * 1000
        )
