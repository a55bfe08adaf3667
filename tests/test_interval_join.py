"""Event-time interval joins (issue 22 items 5, 8, 9): Flink's bounds from BETWEEN and the
comparison forms, rows of Flink's IntervalJoinITCase (inner, LEFT, RIGHT, FULL), bounds met
exactly, a join split over two runs, bounded state, rows arriving after their interval
closed, null rowtimes, and the planner's errors."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltatables import write_commits
from pyspark.sql import SparkSession

from chronolake import Catalog, RunResult
from chronolake.errors import DefinitionError
from chronolake.lake import DeltaRsBackend
from chronolake.lake.layout import LATE_ROOT, output_path
from chronolake.lake.stamps import latest_recorded_watermark
from chronolake.runtime.derived import DerivedTable
from chronolake.schema import ViewKind
from chronolake.sql.ddl import parse_statements
from chronolake.sql.interval import plan_interval_join
from chronolake.sql.view_kinds import is_derived, view_kind
from chronolake.watermarks import REASON_COLUMN

T0 = datetime(2024, 1, 1)
T0_MS = 1_704_067_200_000
SCHEMA = pa.schema([("key", pa.string()), ("id", pa.string()), ("b", pa.int64()),
                    ("rowtime", pa.timestamp("us")), ("other_ts", pa.timestamp("us"))])
TABLE = """CREATE TABLE {name} (
  key STRING, id STRING, b BIGINT, rowtime TIMESTAMP(3), other_ts TIMESTAMP(3),
  WATERMARK FOR rowtime AS rowtime
) WITH ('path' = '{name}')"""
BETWEEN = "t1.rowtime BETWEEN t2.rowtime - INTERVAL '5' SECOND AND t2.rowtime + INTERVAL '6' SECOND"
# Rows far ahead move both watermarks to 100 s; their keys meet nothing, their intervals stay open.
PUSH_LEFT, PUSH_RIGHT = ("ZL", "L-Z", 100_000), ("ZR", "R-Z", 100_000)


def row(key: str | None, id_: str, millis: int | None, b: int = 0) -> dict[str, Any]:
    at = None if millis is None else T0 + timedelta(milliseconds=millis)
    return {"key": key, "id": id_, "b": b, "rowtime": at, "other_ts": at}


def commits(*rows: tuple[Any, ...]) -> list[list[dict[str, Any]]]:
    return [[row(*r)] for r in rows]


def lake(root: Path, spark: SparkSession, view: str) -> Catalog:
    catalog = Catalog(root, spark)
    for name in ("t1", "t2"):
        catalog.execute(TABLE.format(name=name))
    catalog.execute(view)
    return catalog


def add(root: Path, name: str, rows: Sequence[tuple[Any, ...]]) -> None:
    write_commits(root / name, commits(*rows), schema=SCHEMA)


def output(spark: SparkSession, root: Path, view: str) -> list[tuple[Any, ...]]:
    rows = DeltaRsBackend(spark).snapshot(output_path(root, view)).collect()
    return sorted((tuple(r) for r in rows), key=lambda r: tuple(str(v) for v in r))


def triples(*rows: tuple[Any, ...]) -> list[tuple[Any, ...]]:
    return sorted(rows, key=lambda r: tuple(str(v) for v in r))


def run(root: Path, spark: SparkSession, view: str) -> RunResult:
    return DerivedTable(Catalog(root, spark), view).run()


# --- bounds, as Flink's IntervalJoinTest.testJoinTimeBoundary reads them ----------------------

SPECS = {spec.name: spec for spec in parse_statements(";\n".join(
    TABLE.format(name=name) for name in ("t1", "t2")
))}


@pytest.mark.parametrize(("condition", "bounds"), [
    (BETWEEN, (-5000, 6000)),
    ("t1.rowtime > t2.rowtime - INTERVAL '1' SECOND AND t1.rowtime < t2.rowtime + "
     "INTERVAL '1' SECOND", (-999, 999)),
    ("t1.rowtime >= t2.rowtime - INTERVAL '1' SECOND AND t1.rowtime <= t2.rowtime + "
     "INTERVAL '1' SECOND", (-1000, 1000)),
    ("t1.rowtime >= t2.rowtime AND t1.rowtime <= t2.rowtime + INTERVAL '1' SECOND", (0, 1000)),
    ("t1.rowtime >= t2.rowtime + INTERVAL '1' SECOND AND t1.rowtime <= t2.rowtime + "
     "INTERVAL '10' SECOND", (1000, 10000)),
    ("t2.rowtime - INTERVAL '1' SECOND <= t1.rowtime AND t2.rowtime + INTERVAL '10' SECOND "
     ">= t1.rowtime", (-1000, 10000)),
    ("t1.rowtime - INTERVAL '2' SECOND >= t2.rowtime + INTERVAL '1' SECOND - INTERVAL '10' "
     "SECOND AND t1.rowtime <= t2.rowtime + INTERVAL '10' SECOND", (-7000, 10000)),
    ("t1.rowtime >= t2.rowtime - INTERVAL '10' SECOND AND t1.rowtime <= t2.rowtime - "
     "INTERVAL '5' SECOND", (-10000, -5000)),
    ("t2.rowtime > t1.rowtime - INTERVAL '2' MINUTE AND t2.rowtime < t1.rowtime", (1, 119999)),
])
def test_bounds_are_read_as_flink_reads_them(condition: str, bounds: tuple[int, int]) -> None:
    on = f"SELECT t1.id, t2.id FROM t1 JOIN t2 ON t1.key = t2.key AND {condition}"
    where = f"SELECT t1.id, t2.id FROM t1, t2 WHERE t1.key = t2.key AND {condition}"
    for query in (on, where):
        plan = plan_interval_join(query, SPECS)
        assert (plan.lower_ms, plan.upper_ms) == bounds
        assert plan.condition == "t1.key = t2.key"


# --- rows, as Flink's IntervalJoinITCase expects them -----------------------------------------

INNER = f"""CREATE VIEW v AS SELECT t2.key, t2.id AS rid, t1.id AS lid
FROM t1 JOIN t2 ON t1.key = t2.key AND {BETWEEN}"""


@pytest.mark.spark
@pytest.mark.slow
def test_inner_join_bounds_are_inclusive_and_null_keys_never_meet(
    spark: SparkSession, tmp_path: Path
) -> None:
    """testRowTimeInnerJoin: LEFT1 is exactly at the lower bound (RIGHT6 − 5 s), LEFT0.999 1 ms
    before it; the null keys (LEFT8, RIGHT10) match nothing."""
    add(tmp_path, "t1", [("A", "LEFT0.999", 999), ("A", "LEFT1", 1000), ("A", "LEFT2", 2000),
                         ("A", "LEFT3", 3000), ("B", "LEFT4", 4000), ("A", "LEFT5", 5000),
                         ("A", "LEFT6", 6000), (None, "LEFT8", 8000), ("A", "LEFT12", 12000)])
    add(tmp_path, "t2", [("A", "RIGHT6", 6000), ("B", "RIGHT7", 7000), (None, "RIGHT10", 10000)])
    catalog = lake(tmp_path, spark, INNER)
    assert view_kind(catalog.spec("v")) is ViewKind.INTERVAL_JOIN  # type: ignore[arg-type]
    result = DerivedTable(catalog, "v").run()
    # LEFT12 is exactly at the upper bound (RIGHT6 + 6 s): inclusive too
    assert output(spark, tmp_path, "v") == triples(
        ("A", "RIGHT6", "LEFT1"), ("A", "RIGHT6", "LEFT2"), ("A", "RIGHT6", "LEFT3"),
        ("A", "RIGHT6", "LEFT5"), ("A", "RIGHT6", "LEFT6"), ("A", "RIGHT6", "LEFT12"),
        ("B", "RIGHT7", "LEFT4"),
    )
    assert (result.figures["rows_in"], result.figures["matched_pairs"]) == (12, 7)
    assert result.figures["padded_rows"] == 0


@pytest.mark.spark
@pytest.mark.slow
def test_strict_bounds_and_other_conditions(spark: SparkSession, tmp_path: Path) -> None:
    """testRowTimeInnerJoinWithOtherConditions: `>` and `<` exclude rows exactly at the bound
    (LEFT1 at RIGHT6 − 5 s, LEFT5 at RIGHT6 − 1 s); other conditions filter the pairs."""
    add(tmp_path, "t1", [("1", "LEFT1", 1000, 4), ("1", "LEFT1.1", 1001, 8),
                         ("1", "LEFT2", 2000, 2), ("1", "LEFT3", 3000, 7),
                         ("2", "LEFT4", 4000, 5), ("1", "LEFT4.9", 4999, 4),
                         ("1", "LEFT5", 5000, 4), ("1", "LEFT6", 6000, 10)])
    add(tmp_path, "t2", [("1", "RIGHT1", 1000, 1), ("1", "RIGHT6", 6000, 9),
                         ("2", "RIGHT7", 7000, 14), ("1", "RIGHT8", 8000, 4)])
    lake(tmp_path, spark, """CREATE VIEW v AS SELECT t2.key, t1.id AS lid, t2.id AS rid
FROM t1 JOIN t2 ON t1.key = t2.key
 AND t1.rowtime > t2.rowtime - INTERVAL '5' SECOND AND t1.rowtime < t2.rowtime - INTERVAL '1' SECOND
 AND t1.b < t2.b AND t1.b > 2""")
    run(tmp_path, spark, "v")
    assert output(spark, tmp_path, "v") == triples(
        ("1", "LEFT3", "RIGHT6"), ("1", "LEFT1.1", "RIGHT6"), ("2", "LEFT4", "RIGHT7"),
        ("1", "LEFT4.9", "RIGHT6"),
    )


LEFT_ROWS = [("A", "L-1", 1000), ("A", "L-2", 2000), ("B", "L-4", 4000), ("B", "L-5", 5000),
             ("A", "L-6", 6000), ("C", "L-7", 7000), ("A", "L-10", 10000),
             ("A", "L-12", 12000), ("A", "L-20", 20000)]
RIGHT_ROWS = [("A", "R-6", 6000), ("B", "R-7", 7000), ("D", "R-8", 8000), ("A", "R-11", 11000)]
OUTER = """CREATE VIEW v AS SELECT t1.key, t2.id AS rid, t1.id AS lid
FROM t1 {kind} JOIN t2 ON t1.key = t2.key AND {between} AND t1.id <> 'L-5'"""
LEFT_EXPECTED = [
    ("A", "R-6", "L-1"), ("A", "R-6", "L-2"), ("A", "R-6", "L-6"), ("A", "R-6", "L-10"),
    ("A", "R-6", "L-12"), ("B", "R-7", "L-4"), ("A", "R-11", "L-6"), ("A", "R-11", "L-10"),
    ("A", "R-11", "L-12"), ("B", None, "L-5"), ("C", None, "L-7"), ("A", None, "L-20"),
]


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.parametrize(("kind", "extra"), [
    ("LEFT OUTER", []), ("FULL OUTER", [(None, "R-8", None)]),
])
def test_outer_join_pads_unmatched_rows_once_the_watermark_passes(
    spark: SparkSession, tmp_path: Path, kind: str, extra: list[tuple[Any, ...]]
) -> None:
    """testRowTimeLeftOuterJoin (L-5 fails the other ON condition, so it is padded); FULL
    pads R-8 too. The pushers' intervals are still open: they are neither joined nor padded."""
    add(tmp_path, "t1", [*LEFT_ROWS, PUSH_LEFT])
    add(tmp_path, "t2", [*RIGHT_ROWS, PUSH_RIGHT])
    lake(tmp_path, spark, OUTER.format(kind=kind, between=BETWEEN))
    result = run(tmp_path, spark, "v")
    assert output(spark, tmp_path, "v") == triples(*LEFT_EXPECTED, *extra)
    assert result.figures["padded_rows"] == 3 + len(extra)
    assert result.figures["state_rows"] == 2  # only the pushers' intervals are open


@pytest.mark.spark
@pytest.mark.slow
def test_right_outer_join(spark: SparkSession, tmp_path: Path) -> None:
    """testRowTimeRightOuterJoin."""
    add(tmp_path, "t1", [("A", "L-1", 1000), ("A", "L-2", 2000), ("B", "L-4", 4000),
                         ("A", "L-6", 6000), ("C", "L-7", 7000), ("A", "L-10", 10000),
                         ("A", "L-12", 12000), PUSH_LEFT])
    add(tmp_path, "t2", [("A", "R-5", 5000), ("A", "R-6", 6000), ("B", "R-7", 7000),
                         ("D", "R-8", 8000), ("A", "R-20", 20000), PUSH_RIGHT])
    lake(tmp_path, spark, f"""CREATE VIEW v AS SELECT t2.key, t2.id AS rid, t1.id AS lid
FROM t1 RIGHT OUTER JOIN t2 ON t1.key = t2.key AND {BETWEEN} AND t2.id <> 'R-5'""")
    run(tmp_path, spark, "v")
    assert output(spark, tmp_path, "v") == triples(
        ("A", "R-5", None), ("A", "R-6", "L-1"), ("A", "R-6", "L-2"), ("A", "R-6", "L-6"),
        ("A", "R-6", "L-10"), ("A", "R-6", "L-12"), ("A", "R-20", None), ("B", "R-7", "L-4"),
        ("D", "R-8", None),
    )
    assert view_kind(Catalog(tmp_path, spark).spec("v")).value == "interval_join"  # type: ignore[arg-type]
    assert Catalog(tmp_path, spark).spec("v").rowtime is None  # neither rowtime is selected


# --- runs --------------------------------------------------------------------------------------


@pytest.mark.spark
def test_a_run_leaves_no_temporary_view_in_the_session(spark: SparkSession, tmp_path: Path
                                                       ) -> None:
    """An outer join's run reads its rows, matches and padded rows without naming them in the
    Spark session: a long session keeps none of them (nor the rows they would hold)."""
    add(tmp_path, "t1", [*LEFT_ROWS, PUSH_LEFT])
    add(tmp_path, "t2", [*RIGHT_ROWS, PUSH_RIGHT])
    lake(tmp_path, spark, OUTER.format(kind="FULL OUTER", between=BETWEEN))
    before = {t.name for t in spark.catalog.listTables() if t.isTemporary}
    assert run(tmp_path, spark, "v").figures["padded_rows"] > 0
    assert {t.name for t in spark.catalog.listTables() if t.isTemporary} == before


@pytest.mark.spark
@pytest.mark.slow
def test_a_join_split_over_two_runs_gives_the_rows_of_one_and_drops_expired_state(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Run 1 sees rows up to 7 s (watermark 7 s), run 2 the rest. Pairs across the runs (L-10,
    L-12 × R-6 from state; R-11 × L-6 from state, exactly at its lower bound) come in run 2;
    L-5, L-7, L-20 are padded in run 2, when the watermark passes their intervals."""
    add(tmp_path, "t1", LEFT_ROWS[:6])
    add(tmp_path, "t2", RIGHT_ROWS[:2])
    lake(tmp_path, spark, OUTER.format(kind="LEFT", between=BETWEEN))
    first = run(tmp_path, spark, "v")
    # Held back by the interval's widest side (6 s), as Flink's max output delay: a pair of
    # run 2 can be that old, and downstream must not find it late.
    assert first.watermark_ms == T0_MS + 7_000 - 6_000
    assert latest_recorded_watermark(output_path(tmp_path, "v")) == first.watermark_ms
    assert output(spark, tmp_path, "v") == triples(
        ("A", "R-6", "L-1"), ("A", "R-6", "L-2"), ("A", "R-6", "L-6"), ("B", "R-7", "L-4"))
    # L-1's interval ended at 6 s < 7 s: dropped; L-2's ends at 7 s: kept, as Flink keeps it
    assert (first.figures["left_state_rows"], first.figures["right_state_rows"]) == (5, 2)
    assert first.figures["padded_rows"] == 0
    add(tmp_path, "t1", [*LEFT_ROWS[6:], PUSH_LEFT])
    add(tmp_path, "t2", [*RIGHT_ROWS[2:], PUSH_RIGHT])
    second = run(tmp_path, spark, "v")
    assert output(spark, tmp_path, "v") == triples(*LEFT_EXPECTED)
    assert (second.figures["matched_pairs"], second.figures["padded_rows"]) == (5, 3)
    assert second.figures["state_rows"] == 2  # the rest left state when their interval closed
    assert second.figures["closed_on_arrival_rows"] == 0


@pytest.mark.spark
@pytest.mark.slow
def test_a_row_after_its_interval_closed_joins_what_state_holds_and_is_padded_at_once(
    spark: SparkSession, tmp_path: Path
) -> None:
    """After run 1 (watermark 7 s), L-1.8 (A, 1.8 s: its interval ended at 6.8 s) still meets
    R-6 in state; L-1.5 (B, 1.5 s) meets nothing and is padded at once; a null rowtime goes
    to the side table."""
    add(tmp_path, "t1", LEFT_ROWS[:6])
    add(tmp_path, "t2", RIGHT_ROWS[:2])
    lake(tmp_path, spark, OUTER.format(kind="LEFT", between=BETWEEN))
    run(tmp_path, spark, "v")
    before = output(spark, tmp_path, "v")
    add(tmp_path, "t1", [("A", "L-1.8", 1800), ("B", "L-1.5", 1500), ("A", "L-null", None)])
    result = run(tmp_path, spark, "v")
    assert output(spark, tmp_path, "v") == triples(
        *before, ("A", "R-6", "L-1.8"), ("B", None, "L-1.5"))
    assert result.figures["closed_on_arrival_rows"] == 2
    assert (result.figures["late_rows"], result.figures["null_rowtime_rows"]) == (1, 1)
    assert result.figures["left_state_rows"] == 5  # closed rows are never kept
    side = DeltaRsBackend(spark).snapshot(tmp_path / LATE_ROOT / "v").collect()
    assert [(r["id"], r[REASON_COLUMN]) for r in side] == [("L-null", "null_rowtime")]


# --- what is refused, and what stays a regular join ----------------------------------------------


@pytest.mark.parametrize(("query", "message"), [
    ("SELECT * FROM t1 JOIN t2 ON t1.key = t2.key AND t1.rowtime > t2.rowtime - INTERVAL '5' "
     "SECOND", "bounded on one side: it has no upper bound"),
    ("SELECT * FROM t1, t2 WHERE t1.key = t2.key AND t1.rowtime > t2.rowtime - INTERVAL '5' "
     "SECOND AND t1.rowtime >= t2.rowtime", "bounds the left time twice"),
    (f"SELECT t1.id, t2.id FROM t1 JOIN t2 ON {BETWEEN}", "no equality between their columns"),
    ("SELECT t1.id FROM t1 JOIN t2 ON t1.key = t2.key AND t1.other_ts BETWEEN t2.rowtime - "
     "INTERVAL '5' SECOND AND t2.rowtime", r"t1.other_ts, which is not a time attribute of "
     r"'t1' \(its rowtime attribute is 'rowtime'\); .* bound t1.rowtime instead"),
    (f"SELECT t1.key, COUNT(*) FROM t1 JOIN t2 ON t1.key = t2.key AND {BETWEEN} GROUP BY "
     "t1.key", "has GROUP BY; create the interval join as a view"),
    (f"SELECT * FROM t1 LEFT JOIN t2 ON t1.key = t2.key WHERE {BETWEEN}", "go in its ON"),
])
def test_misuse_is_refused_at_create_view(query: str, message: str) -> None:
    with pytest.raises(DefinitionError, match=message):
        parse_statements(f"CREATE VIEW v AS {query}", catalog=SPECS)


def test_a_join_without_time_bounds_is_computed_on_read() -> None:
    [view] = parse_statements(
        "CREATE VIEW v AS SELECT t1.id FROM t1 JOIN t2 ON t1.key = t2.key AND t1.b < t2.b",
        catalog=SPECS,
    )
    assert not is_derived(view)  # type: ignore[arg-type]
