"""Watermark assignment on Spark (issue 3): generators per split, emission modes, late rows.

Every changelog is a real Delta table written with delta-rs, one commit per entry,
read back through the lake backend, so arrival order is (commit version, position).
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltatables import write_commits
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, TimestampNTZType

from chronolake.catalog.checkpoint import InputPosition
from chronolake.dagster.spark_jobs import counted_stage
from chronolake.errors import DefinitionError, RunError
from chronolake.lake import ARRIVAL_ORDER, COMMIT_TIMESTAMP, backend_for
from chronolake.runtime.inputs import ChangelogRead, assign_all
from chronolake.schema import (
    ComputedColumn,
    DeltaOptions,
    EmitStrategy,
    PhysicalColumn,
    TableSpec,
    WatermarkSpec,
)
from chronolake.watermarks import LONG_MIN, Watermark
from chronolake.watermarks.assigner import (
    LATE_COLUMN,
    SINGLE_SPLIT,
    WATERMARK_COLUMN,
    AssignedChangelog,
    WatermarkAssigner,
    WatermarkState,
    collect_maxima,
)

pytestmark = pytest.mark.spark

T0 = datetime(2024, 1, 1)
T0_MS = 1_704_067_200_000  # T0 as UTC epoch millis
PERIODIC, EVENT = EmitStrategy.ON_PERIODIC, EmitStrategy.ON_EVENT


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def ms(seconds: float) -> int:
    return T0_MS + round(seconds * 1000)


def changelog(spark: SparkSession, path: Path, commits: Sequence[Any], **kwargs: Any) -> DataFrame:
    """Write `commits` (one Delta commit each) and read them back as a changelog."""
    write_commits(path, commits, **kwargs)
    return backend_for(spark).appends(path, 0)


def stamped(assigned: AssignedChangelog, key: str = "k") -> list[tuple[Any, int, bool]]:
    """(key, watermark in force, late) per row in arrival order (test-side collect)."""
    rows = assigned.rows.orderBy(*ARRIVAL_ORDER).select(key, WATERMARK_COLUMN, LATE_COLUMN)
    return [(r[0], r[1], r[2]) for r in rows.collect()]


def late_keys(assigned: AssignedChangelog) -> list[Any]:
    return [k for k, _, late in stamped(assigned) if late]


# --- bounded out-of-orderness, and the two emission modes on the same data ------------------

OUT_OF_ORDER = [
    [{"k": 0, "ts": at(10)}, {"k": 1, "ts": at(4)}, {"k": 2, "ts": at(6)}],
    [{"k": 3, "ts": at(5)}, {"k": 4, "ts": at(20)}, {"k": 5, "ts": at(14)}],
]


@pytest.mark.parametrize(
    ("mode", "watermarks", "late"),
    [
        # once per commit: commit 1's rows see nothing, commit 2's see max(ts of commit 1) - 5 s
        (PERIODIC, [LONG_MIN] * 3 + [ms(5)] * 3, [3]),
        # after every row that raises it: k1 (4 s) arrives behind 10 s - 5 s, k5 behind 20 s - 5 s
        (EVENT, [LONG_MIN, ms(5), ms(5), ms(5), ms(5), ms(15)], [1, 3, 5]),
    ],
)
def test_bounded_out_of_orderness_per_emission_mode(
    spark: SparkSession, tmp_path: Path, mode: EmitStrategy, watermarks: list[int], late: list[int]
) -> None:
    assigner = WatermarkAssigner(
        rowtime="ts", strategy="ts - INTERVAL '5' SECOND", emit_strategy=mode
    )
    assigned = assigner.assign(changelog(spark, tmp_path / "t", OUT_OF_ORDER))
    assert [w for _, w, _ in stamped(assigned)] == watermarks
    assert late_keys(assigned) == late
    # exactly max(ts) - 5 s, in both modes
    assert assigned.state() == WatermarkState(splits={SINGLE_SPLIT: ms(15)}, watermark=ms(15))
    assert assigned.state().to_watermark() == Watermark(ms(15))
    assert assigned.counts() == {"rows": 6, "late_rows": len(late), "null_rowtime_rows": 0}


def test_facts_of_several_inputs_come_from_one_job(spark: SparkSession, tmp_path: Path) -> None:
    """A run's inputs share one facts job, and each gets the facts it would get alone."""
    first = changelog(spark, tmp_path / "a", OUT_OF_ORDER)
    second = changelog(spark, tmp_path / "b", [[{"k": 9, "ts": at(3)}], [{"k": 8, "ts": at(40)}]])
    bounded = WatermarkAssigner(rowtime="ts", strategy="ts - INTERVAL '5' SECOND")
    ascending = WatermarkAssigner(rowtime="ts", strategy="ts")
    pairs = [(bounded, first), (ascending, second)]
    alone = [sorted(a.assign(rows).maxima, key=str) for a, rows in pairs]
    assert [fact.generated for fact in alone[1]] == [ms(3), ms(40)]

    def jobs_of(queries: list[DataFrame]) -> tuple[list[Any], int]:
        with counted_stage(spark, "facts", label="test") as cost:
            facts = collect_maxima(queries)
        return facts, cost.spark_jobs

    _, one_input_jobs = jobs_of([bounded.fact_rows(first)])
    together, two_input_jobs = jobs_of([a.fact_rows(rows) for a, rows in pairs])
    assert [sorted(facts, key=str) for facts in together] == alone
    assert two_input_jobs == one_input_jobs


@pytest.mark.parametrize(
    ("strategy", "late"),
    [
        # "strictly ascending": a row equal to the max so far is not late, a smaller one is
        ("ts - INTERVAL '0.001' SECOND", [3]),
        # the rowtime itself: an equal timestamp is already at the watermark, so late
        ("ts", [1, 3]),
    ],
)
def test_ascending_strategies_on_event(
    spark: SparkSession, tmp_path: Path, strategy: str, late: list[int]
) -> None:
    rows = [{"k": 0, "ts": at(1)}, {"k": 1, "ts": at(1)}, {"k": 2, "ts": at(2)},
            {"k": 3, "ts": at(1.5)}]
    assigner = WatermarkAssigner(rowtime="ts", strategy=strategy, emit_strategy=EVENT)
    assigned = assigner.assign(changelog(spark, tmp_path / "t", [rows]))
    assert late_keys(assigned) == late
    expected_final = ms(2) - 1 if "0.001" in strategy else ms(2)
    assert assigned.state().watermark == expected_final


# --- rowtime flavours: computed, nested, LTZ ------------------------------------------------


def test_strategy_over_a_computed_rowtime(spark: SparkSession, tmp_path: Path) -> None:
    commits = [[{"k": 0, "ts_string": "2024-01-01 00:00:30"}],
               [{"k": 1, "ts_string": "2024-01-01 00:00:10"}],
               [{"k": 2, "ts_string": "2024-01-01 00:00:40"}]]
    rows = changelog(spark, tmp_path / "t", commits)
    # `rowtime AS TO_TIMESTAMP(ts_string)`: a TIMESTAMP_LTZ rowtime, evaluated by Spark
    rows = rows.withColumn("rowtime", F.expr("to_timestamp(ts_string)"))
    assigner = WatermarkAssigner(rowtime="rowtime", strategy="rowtime - INTERVAL '5' SECOND")
    assigned = assigner.assign(rows)
    assert stamped(assigned) == [(0, LONG_MIN, False), (1, ms(25), True), (2, ms(25), False)]
    assert assigned.state().watermark == ms(35)


def test_nested_rowtime(spark: SparkSession, tmp_path: Path) -> None:
    event = pa.struct([("log_ts", pa.timestamp("us")), ("message", pa.string())])
    schema = pa.schema([("k", pa.int64()), ("event", event)])
    commits = [[{"k": 0, "event": {"log_ts": at(8), "message": "a"}}],
               [{"k": 1, "event": {"log_ts": at(2), "message": "b"}}],
               [{"k": 2, "event": {"log_ts": None, "message": "c"}}],
               [{"k": 3, "event": {"log_ts": at(9), "message": "d"}}]]
    rows = changelog(spark, tmp_path / "t", commits, schema=schema)
    assigner = WatermarkAssigner(
        rowtime="event.log_ts", strategy="event.log_ts - INTERVAL '1' SECOND"
    )
    assigned = assigner.assign(rows)
    # the null rowtime generates nothing (skipped) and is never flagged late
    assert stamped(assigned) == [
        (0, LONG_MIN, False), (1, ms(7), True), (2, ms(7), False), (3, ms(7), False)
    ]
    assert assigned.counts() == {"rows": 4, "late_rows": 1, "null_rowtime_rows": 1}


# --- user-defined strategy functions (the seed's watermarkOnFlag) ---------------------------

FLAGGED = [
    [{"k": 0, "log_ts": at(5), "flag": False}],
    [{"k": 1, "log_ts": at(7), "flag": True}],
    [{"k": 2, "log_ts": at(6), "flag": False}],
    [{"k": 3, "log_ts": at(20), "flag": False}],
    [{"k": 4, "log_ts": at(8), "flag": False}],
]


@pytest.mark.parametrize("returns", ["bigint", "timestamp"])
def test_udf_strategy_emits_only_on_flagged_rows(
    spark: SparkSession, tmp_path: Path, returns: str
) -> None:
    # Defined here, not at module level, so that Spark's workers get them by value.
    def on_flag_millis(log_ts: datetime, flag: bool) -> int | None:
        return round((log_ts - datetime(1970, 1, 1)).total_seconds() * 1000) if flag else None

    def on_flag_timestamp(log_ts: datetime, flag: bool) -> datetime | None:
        return log_ts if flag else None

    if returns == "bigint":
        spark.udf.register("watermarkOnFlag", on_flag_millis, LongType())
    else:
        spark.udf.register("watermarkOnFlag", on_flag_timestamp, TimestampNTZType())
    assigner = WatermarkAssigner(
        rowtime="log_ts", strategy="watermarkOnFlag(log_ts, flag)", emit_strategy=EVENT
    )
    assigned = assigner.assign(changelog(spark, tmp_path / "t", FLAGGED))
    # only k1 (flag) emits: 7 s; the 20 s row does not move the watermark
    assert stamped(assigned) == [
        (0, LONG_MIN, False), (1, LONG_MIN, False), (2, ms(7), True), (3, ms(7), False),
        (4, ms(7), False),
    ]
    assert assigned.state().watermark == ms(7)


FAILS_ON_K3 = (
    r"watermark strategy '(?i:watermarkOrFail)\(log_ts, flag\)' failed on the row at commit "
    r"version 3, position 0 \(split '<all>', k=3\): ValueError: cannot read the "
    r"end-of-sequence flag; fix the function .* nothing was committed"
)


def _register_failing_strategy(spark: SparkSession) -> None:
    """`watermarkOrFail(log_ts, flag)`: raises on FLAGGED's k=3 (a closure, so that Spark's
    Python workers get it by value)."""
    failing_at = at(20)

    def fails_on_k3(log_ts: datetime, flag: bool) -> int | None:
        if log_ts == failing_at:
            raise ValueError("cannot read the end-of-sequence flag")
        return None

    spark.udf.register("watermarkOrFail", fails_on_k3, LongType())


def test_udf_that_raises_fails_the_run_naming_the_row(spark: SparkSession, tmp_path: Path) -> None:
    _register_failing_strategy(spark)
    assigner = WatermarkAssigner(
        rowtime="log_ts", strategy="watermarkOrFail(log_ts, flag)", key=("k",)
    )
    rows = changelog(spark, tmp_path / "t", FLAGGED)
    with pytest.raises(RunError, match=FAILS_ON_K3):
        assigner.assign(rows)


def test_udf_that_raises_among_a_runs_inputs_is_named(spark: SparkSession, tmp_path: Path) -> None:
    """The inputs' facts are collected together; the failure still names its input's row."""
    _register_failing_strategy(spark)

    def read(name: str, commits: Sequence[Any], strategy: str) -> ChangelogRead:
        spec = TableSpec(
            name=name,
            columns=[PhysicalColumn(name="k", type="BIGINT"),
                     PhysicalColumn(name="log_ts", type="TIMESTAMP(3)"),
                     PhysicalColumn(name="flag", type="BOOLEAN")],
            watermark=WatermarkSpec(rowtime="log_ts", expression=strategy),
            primary_key=("k",),
            options=DeltaOptions(path=name),
        )
        return ChangelogRead(spec, changelog(spark, tmp_path / name, commits), InputPosition(), ())

    good = read("good", [[{"k": 1, "log_ts": at(1), "flag": True}]], "log_ts")
    bad = read("bad", FLAGGED, "watermarkOrFail(log_ts, flag)")
    assert assign_all({"good": good})["good"].watermark == Watermark(ms(1))
    with pytest.raises(RunError, match=FAILS_ON_K3):
        assign_all({"good": good, "bad": bad})


# --- SYSTEM_ROWTIME() / SYSTEM_WATERMARK(): the Delta source's own progress -----------------


def test_system_watermark_follows_commit_timestamps(spark: SparkSession, tmp_path: Path) -> None:
    commits = [[{"k": 0, "s": "a"}, {"k": 1, "s": "b"}], [{"k": 2, "s": "a"}], [{"k": 3, "s": "b"}]]
    rows = changelog(spark, tmp_path / "t", commits)
    assigner = WatermarkAssigner(
        rowtime="SYSTEM_ROWTIME()", strategy="SYSTEM_WATERMARK()", split_by="s",
        emit_strategy=EVENT,  # the source's watermark is per commit whatever the mode
    )
    assigned = assigner.assign(rows)
    commit_ms = [
        r[0] for r in rows.select(F.unix_millis(COMMIT_TIMESTAMP)).distinct().orderBy(
            F.unix_millis(COMMIT_TIMESTAMP)).collect()
    ]
    assert stamped(assigned) == [
        (0, LONG_MIN, False), (1, LONG_MIN, False), (2, commit_ms[0], False),
        (3, commit_ms[1], False),
    ]
    assert assigned.state() == WatermarkState(
        splits={SINGLE_SPLIT: commit_ms[2]}, watermark=commit_ms[2]
    )


# --- splits, restart from stored state ------------------------------------------------------

SPLIT_COMMITS = [
    [{"k": 0, "s": "a", "ts": at(10)}],
    [{"k": 1, "s": "b", "ts": None}],     # b is discovered but emits nothing: holds back
    [{"k": 2, "s": "a", "ts": at(30)}],
    [{"k": 3, "s": "b", "ts": at(12)}],
    [{"k": 4, "s": "a", "ts": at(3)}],
    [{"k": 5, "s": "c", "ts": at(1)}],    # c arrives behind: cannot lower the source watermark
    [{"k": 6, "s": "c", "ts": at(40)}],
    [{"k": 7, "s": "b", "ts": at(9)}],
]


def test_source_watermark_is_min_over_active_splits(spark: SparkSession, tmp_path: Path) -> None:
    assigner = WatermarkAssigner(rowtime="ts", strategy="ts", split_by="s")
    assigned = assigner.assign(changelog(spark, tmp_path / "t", SPLIT_COMMITS))
    assert stamped(assigned) == [
        (0, LONG_MIN, False),
        (1, ms(10), False),  # only a was active after commit 0
        (2, ms(10), False),  # b holds the source at 10 s
        (3, ms(10), False),
        (4, ms(12), True),   # min(a=30, b=12)
        (5, ms(12), True),   # c is active from its own commit: late against the source
        (6, ms(12), False),  # min(a, b, c=1) = 1 s, but the source never goes back
        (7, ms(12), True),
    ]
    assert assigned.state() == WatermarkState(
        splits={"a": ms(30), "b": ms(12), "c": ms(40)}, watermark=ms(12)
    )


def test_restart_from_stored_state_equals_one_run(spark: SparkSession, tmp_path: Path) -> None:
    path = tmp_path / "t"
    assigner = WatermarkAssigner(rowtime="ts", strategy="ts", split_by="s", emit_strategy=EVENT)
    write_commits(path, SPLIT_COMMITS[:4])
    first = assigner.assign(backend_for(spark).appends(path, 0))
    stored = WatermarkState.model_validate_json(first.state().model_dump_json())
    write_commits(path, SPLIT_COMMITS[4:])
    second = assigner.assign(backend_for(spark).appends(path, 4), state=stored)
    whole = assigner.assign(backend_for(spark).appends(path, 0))
    assert stamped(first) + stamped(second) == stamped(whole)
    assert second.state() == whole.state()


def test_a_run_never_lowers_the_stored_watermark(spark: SparkSession, tmp_path: Path) -> None:
    stored = WatermarkState(splits={"a": ms(100), "b": ms(50)}, watermark=ms(60))
    assigner = WatermarkAssigner(rowtime="ts", strategy="ts", split_by="s")
    assigned = assigner.assign(changelog(spark, tmp_path / "t", SPLIT_COMMITS[:2]), state=stored)
    assert stamped(assigned) == [(0, ms(60), True), (1, ms(60), False)]
    assert assigned.state() == WatermarkState(
        splits={"a": ms(100), "b": ms(50)}, watermark=ms(60)
    )


# --- definition errors: raised before any Spark job runs ------------------------------------


@pytest.fixture(scope="module")
def plain(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> DataFrame:
    path = tmp_path_factory.mktemp("plain") / "t"
    return changelog(spark, path, [[{"k": 0, "s": "a", "ts": at(1), "name": "x"}]])


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"rowtime": "missing", "strategy": "missing"},
         r"rowtime of WATERMARK FOR missing AS missing does not resolve against columns k, s"),
        ({"rowtime": "name", "strategy": "ts"},
         r"rowtime 'name' is STRING; the rowtime must be TIMESTAMP\(3\) or TIMESTAMP_LTZ\(3\)"),
        ({"rowtime": "ts", "strategy": "name"},
         r"watermark strategy 'name' returns STRING; a watermark strategy must return a "
         r"nullable TIMESTAMP\(3\), TIMESTAMP_LTZ\(3\) or BIGINT"),
        ({"rowtime": "ts", "strategy": "ts -"},
         r"watermark strategy of WATERMARK FOR ts: syntax error at line 1, column 4"),
        ({"rowtime": "ts", "strategy": "noSuchFunction(ts)"},
         r"watermark strategy of WATERMARK FOR ts AS noSuchFunction\(ts\) does not resolve.*"
         r"register the function with spark.udf.register"),
        ({"rowtime": "ts", "strategy": "ts", "split_by": "shard"},
         r"split column 'shard' is not a column of the changelog; use one of: k, s, ts"),
        ({"rowtime": "ts", "strategy": "ts", "tick": "batch"},
         r"tick column 'batch' is not a column of the changelog"),
    ],
)
def test_definition_errors(plain: DataFrame, options: Mapping[str, str], message: str) -> None:
    with pytest.raises(DefinitionError, match=message):
        WatermarkAssigner(**options).assign(plain)


def test_input_must_be_a_changelog(spark: SparkSession) -> None:
    frame = spark.createDataFrame([(1,)], "k long")
    with pytest.raises(
        DefinitionError,
        match=r"needs a changelog DataFrame with the system columns _commit_version, _position, "
        r"_commit_timestamp; read the table through a chronolake lake backend",
    ):
        WatermarkAssigner(rowtime="ts", strategy="ts").assign(frame)


# --- against a brute-force reference --------------------------------------------------------


def reference(
    rows: Sequence[tuple[str, int, int | None]], *, mode: EmitStrategy
) -> tuple[list[tuple[int, bool]], dict[str, int], int]:
    """Row by row, as the design states it: rows are (split, commit, rowtime ms), strategy ts."""
    emitted: dict[str, int] = {}
    generator: dict[str, int] = {}
    source = LONG_MIN
    out: list[tuple[int, bool]] = []
    commits = sorted({commit for _, commit, _ in rows})
    for commit in commits:
        batch = [row for row in rows if row[1] == commit]
        for split, _, _ in batch:  # a split is active from the start of its first commit
            emitted.setdefault(split, LONG_MIN)
            generator.setdefault(split, LONG_MIN)
        for split, _, rowtime in batch:
            out.append((source, rowtime is not None and rowtime <= source))
            if rowtime is not None:
                generator[split] = max(generator[split], rowtime)
            if mode is EVENT:
                emitted[split] = generator[split]
                source = max(source, min(emitted.values()))
        emitted = dict(generator)
        source = max(source, min(emitted.values()))
    return out, emitted, source


changelogs = st.lists(
    st.lists(
        st.tuples(st.sampled_from("xyz"), st.one_of(st.none(), st.integers(0, 20))),
        min_size=1, max_size=4,
    ),
    min_size=1, max_size=5,
)


@settings(
    max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(commits=changelogs, mode=st.sampled_from([PERIODIC, EVENT]))
def test_matches_brute_force_reference(
    spark: SparkSession, commits: list[list[tuple[str, int | None]]], mode: EmitStrategy
) -> None:
    schema = pa.schema([("s", pa.string()), ("ts", pa.timestamp("us"))])
    with tempfile.TemporaryDirectory() as directory:
        rows = changelog(
            spark, Path(directory) / "t",
            [[{"s": s, "ts": None if t is None else at(t)} for s, t in c] for c in commits],
            schema=schema,
        )
        assigner = WatermarkAssigner(rowtime="ts", strategy="ts", split_by="s", emit_strategy=mode)
        assigned = assigner.assign(rows)
        actual = [
            (r[0], r[1]) for r in assigned.rows.orderBy(*ARRIVAL_ORDER)
            .select(WATERMARK_COLUMN, LATE_COLUMN).collect()
        ]
        state = assigned.state()
    flat = [(s, i, None if t is None else ms(t)) for i, c in enumerate(commits) for s, t in c]
    expected, splits, source = reference(flat, mode=mode)
    assert actual == expected
    assert state == WatermarkState(splits=splits, watermark=source)


# --- from a table's DDL ---------------------------------------------------------------------


def test_for_table_reads_watermark_split_and_emit_strategy() -> None:
    orders = TableSpec(
        name="orders",
        columns=[PhysicalColumn(name="order_time", type="TIMESTAMP(3)"),
                 PhysicalColumn(name="shard", type="STRING")],
        watermark=WatermarkSpec(
            rowtime="order_time", expression="order_time - INTERVAL '5' SECOND"
        ),
        options=DeltaOptions.from_map(
            {"path": "orders", "scan.split-by": "shard", "scan.watermark.emit.strategy": "on-event"}
        ),
    )
    assert WatermarkAssigner.for_table(orders) == WatermarkAssigner(
        rowtime="order_time", strategy="order_time - INTERVAL '5' SECOND", split_by="shard",
        emit_strategy=EVENT,
    )
    system = TableSpec(
        name="log",
        columns=[PhysicalColumn(name="k", type="INT"),
                 ComputedColumn(name="rowtime", expression="SYSTEM_ROWTIME()")],
        watermark=WatermarkSpec(rowtime="rowtime", expression="SYSTEM_WATERMARK()"),
        primary_key=("k",),
        options=DeltaOptions(path="log"),
    )
    assert WatermarkAssigner.for_table(system) == WatermarkAssigner(
        rowtime="SYSTEM_ROWTIME()", strategy="SYSTEM_WATERMARK()", key=("k",)
    )
    plain = TableSpec(name="plain", columns=[PhysicalColumn(name="k", type="INT")],
                      options=DeltaOptions(path="plain"))
    with pytest.raises(DefinitionError, match=r"table 'plain' declares no WATERMARK"):
        WatermarkAssigner.for_table(plain)
