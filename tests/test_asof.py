"""The as-of core of the event-time temporal join against FLIP-132's version rules.

Hand-written cases pin each rule; a hypothesis property compares every plan (broadcast,
shuffled, hot-key buckets) with a brute-force model on random changelogs.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from chronolake.errors import DefinitionError
from chronolake.joins import AsOfTuning, JoinKind, join_valid_versions

pytestmark = pytest.mark.spark

T0 = datetime(2024, 1, 1)
BROADCAST = AsOfTuning()
SHUFFLED = AsOfTuning(broadcast_max_rows=0)
# Every key hot: its own bucket width from its build count, and from its probe rows.
ALL_HOT = AsOfTuning(broadcast_max_rows=0, hot_key_min_rows=1, probe_rows_per_bucket=1)

Event = tuple[str | None, int, int | None, str]  # key, version id, time (s), row kind
Order = tuple[int, str | None, int | None]  # order id, key, time (s)

BUILD_SCHEMA = StructType(
    [
        StructField("currency", StringType()),
        StructField("version_id", LongType()),
        StructField("currency_time", TimestampNTZType()),
        StructField("_row_kind", StringType()),
        StructField("_commit_version", LongType()),
        StructField("_commit_timestamp", TimestampType()),
        StructField("_position", LongType()),
    ]
)
PROBE_SCHEMA = StructType(
    [
        StructField("order_id", LongType()),
        StructField("currency", StringType()),
        StructField("order_time", TimestampNTZType()),
        StructField("_row_kind", StringType()),
    ]
)


def _at(seconds: int | None) -> datetime | None:
    return None if seconds is None else T0 + timedelta(seconds=seconds)


def _changelog(
    spark: SparkSession, events: Sequence[Event], arrival: Sequence[int] | None = None
) -> DataFrame:
    """One commit per event; `arrival[i]` is event i's commit version (default: list order)."""
    versions = arrival if arrival is not None else range(len(events))
    rows = [
        (key, vid, _at(t), kind, version, datetime(2024, 1, 1, tzinfo=UTC), 0)
        for (key, vid, t, kind), version in zip(events, versions, strict=True)
    ]
    return spark.createDataFrame(rows, BUILD_SCHEMA)


def _orders(spark: SparkSession, orders: Sequence[Order]) -> DataFrame:
    rows = [(oid, key, _at(t), "+I") for oid, key, t in orders]
    return spark.createDataFrame(rows, PROBE_SCHEMA)


def _join(
    probe: DataFrame, build: DataFrame, *, how: str = "inner", tuning: AsOfTuning = BROADCAST
) -> DataFrame:
    return join_valid_versions(
        probe,
        build,
        probe_keys=["currency"],
        build_keys=["currency"],
        probe_time="order_time",
        build_time="currency_time",
        how=how,
        build_columns={"version_id": "version_id"},
        tuning=tuning,
    )


def _matches(result: DataFrame) -> dict[int, int | None]:
    """order id -> matched version id (test-side collect of a handful of rows)."""
    rows = result.select("order_id", "version_id").collect()
    assert len(rows) == len({row.order_id for row in rows}), "a probe row came out twice"
    return {row.order_id: row.version_id for row in rows}


def _expected(
    events: Sequence[Event], orders: Sequence[Order], arrival: Sequence[int], how: str
) -> dict[int, int | None]:
    """Brute force: per probe row, the latest-arriving event at the greatest time <= its time."""
    result: dict[int, int | None] = {}
    for oid, key, t in orders:
        candidates = [
            (et, arrive, vid, kind)
            for (ekey, vid, et, kind), arrive in zip(events, arrival, strict=True)
            if key is not None and t is not None and ekey == key and et is not None
            if kind != "-U" and et <= t
        ]
        winner = max(candidates, default=None)
        vid = winner[2] if winner is not None and winner[3] != "-D" else None
        if vid is not None or how == "left":
            result[oid] = vid
    return result


def _check(spark: SparkSession, events, orders, *, how="inner", tuning=BROADCAST, arrival=None):
    arrival = list(arrival if arrival is not None else range(len(events)))
    result = _join(
        _orders(spark, orders), _changelog(spark, events, arrival), how=how, tuning=tuning
    )
    assert _matches(result) == _expected(events, orders, arrival, how)
    return result


# --- the version rules, one case each -------------------------------------------------------


@pytest.mark.parametrize(
    "tuning", [BROADCAST, SHUFFLED, ALL_HOT], ids=["broadcast", "shuffled", "hot"]
)
def test_version_valid_from_its_time_inclusive_until_next_version(spark, tuning) -> None:
    events = [("EUR", 1, 10, "+I"), ("EUR", 2, 20, "+U"), ("USD", 3, 15, "+I")]
    orders = [(1, "EUR", 5), (2, "EUR", 10), (3, "EUR", 19), (4, "EUR", 20), (5, "EUR", 99)]
    orders += [(6, "USD", 14), (7, "USD", 15), (8, "GBP", 20)]
    result = _check(spark, events, orders, how="left", tuning=tuning)
    assert _matches(result) == {1: None, 2: 1, 3: 1, 4: 2, 5: 2, 6: None, 7: 3, 8: None}


def test_inner_drops_unmatched_probe_rows(spark) -> None:
    events = [("EUR", 1, 10, "+I")]
    result = _check(spark, events, [(1, "EUR", 5), (2, "EUR", 12), (3, "GBP", 12)])
    assert _matches(result) == {2: 1}


def test_same_version_time_later_arrival_wins_not_row_order(spark) -> None:
    events = [("EUR", 1, 10, "+I"), ("EUR", 2, 10, "+U"), ("EUR", 3, 10, "+U")]
    result = _check(spark, events, [(1, "EUR", 10)], arrival=[5, 9, 7])
    assert _matches(result) == {1: 2}


def test_update_before_events_are_ignored(spark) -> None:
    events = [("EUR", 1, 10, "+I"), ("EUR", 2, 15, "-U"), ("EUR", 3, 15, "+U")]
    events += [("EUR", 4, 30, "-U")]
    result = _check(spark, events, [(1, "EUR", 12), (2, "EUR", 16), (3, "EUR", 31)])
    assert _matches(result) == {1: 1, 2: 3, 3: 3}


def test_delete_ends_validity_at_its_own_version_time(spark) -> None:
    events = [("EUR", 1, 10, "+I"), ("EUR", 2, 20, "-D"), ("EUR", 3, 30, "+I")]
    orders = [(1, "EUR", 19), (2, "EUR", 20), (3, "EUR", 25), (4, "EUR", 30)]
    result = _check(spark, events, orders, how="left")
    assert _matches(result) == {1: 1, 2: None, 3: None, 4: 3}


def test_delete_stamped_with_its_inserts_time_erases_that_version(spark) -> None:
    events = [("EUR", 0, 5, "+I"), ("EUR", 1, 10, "+U"), ("EUR", 2, 10, "-D")]
    result = _check(spark, events, [(1, "EUR", 7), (2, "EUR", 12)], how="left")
    assert _matches(result) == {1: 0, 2: None}


def test_delete_arriving_before_its_same_time_insert_does_not_erase_it(spark) -> None:
    events = [("EUR", 1, 10, "+I"), ("EUR", 2, 10, "-D")]
    result = _check(spark, events, [(1, "EUR", 12)], arrival=[2, 1])
    assert _matches(result) == {1: 1}


def test_null_probe_key_or_time_matches_nothing(spark) -> None:
    events = [("EUR", 1, 10, "+I"), (None, 2, 10, "+I"), ("EUR", 3, None, "+U")]
    orders = [(1, None, 12), (2, "EUR", None), (3, "EUR", 12)]
    assert _matches(_check(spark, events, orders, how="left")) == {1: None, 2: None, 3: 1}
    assert _matches(_check(spark, events, orders, how="inner")) == {3: 1}


def test_empty_build_side_leaves_left_rows_unmatched(spark) -> None:
    result = _check(spark, [], [(1, "EUR", 12)], how="left", tuning=SHUFFLED)
    assert _matches(result) == {1: None}


def test_probe_columns_and_row_kind_are_kept_and_system_columns_not_copied(spark) -> None:
    probe = _orders(spark, [(1, "EUR", 12)]).withColumn("_row_kind", F.lit("-U"))
    build = _changelog(spark, [("EUR", 7, 10, "+I")])
    result = join_valid_versions(
        probe,
        build,
        probe_keys=["currency"],
        build_keys=["currency"],
        probe_time="order_time",
        build_time="currency_time",
        build_prefix="r_",
    )
    assert result.columns == [*probe.columns, "r_currency", "r_version_id", "r_currency_time"]
    row = result.first()
    assert (row._row_kind, row.r_version_id, row.r_currency_time) == ("-U", 7, _at(10))


# --- extra ON conditions ----------------------------------------------------------------------


def test_condition_failing_on_the_valid_version_nulls_left_and_drops_inner(spark) -> None:
    probe = _orders(spark, [(1, "EUR", 12), (2, "EUR", 25)]).withColumn("limit", F.lit(1))
    build = _changelog(spark, [("EUR", 1, 10, "+I"), ("EUR", 2, 20, "+U")])

    def run(how: str) -> dict[int, int | None]:
        return _matches(
            join_valid_versions(
                probe,
                build,
                probe_keys=["currency"],
                build_keys=["currency"],
                probe_time="order_time",
                build_time="currency_time",
                how=how,
                build_columns=["version_id"],
                condition=F.col("version_id") <= F.col("limit"),
            )
        )

    # Order 2's valid version (2) fails the condition; the older version 1 must not step in.
    assert run("left") == {1: 1, 2: None}
    assert run("inner") == {1: 1}


# --- keys and time types ----------------------------------------------------------------------


def test_composite_keys_with_widened_integer_types(spark) -> None:
    build = spark.createDataFrame(
        [(1, "a", 10, _at(10), 0), (1, "b", 11, _at(10), 1), (2, "a", 12, _at(10), 2)],
        "k1 long, k2 string, vid long, t timestamp_ntz, _commit_version long",
    ).withColumn("_position", F.lit(0).cast("long"))
    probe = spark.createDataFrame(
        [(1, 1, "b", _at(11)), (2, 2, "a", _at(11)), (3, 2, "b", _at(11))],
        StructType(
            [
                StructField("order_id", LongType()),
                StructField("k1", IntegerType()),
                StructField("k2", StringType()),
                StructField("t", TimestampNTZType()),
            ]
        ),
    )
    result = join_valid_versions(
        probe,
        build,
        probe_keys=["k1", "k2"],
        build_keys=["k1", "k2"],
        probe_time="t",
        build_time="t",
        how="left",
        build_row_kind=None,
        build_columns={"vid": "version_id"},
        tuning=SHUFFLED,
    )
    assert _matches(result) == {1: 11, 2: 12, 3: None}


@pytest.fixture
def new_york_session(spark) -> Iterator[SparkSession]:
    before = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "America/New_York")
    yield spark
    spark.conf.set("spark.sql.session.timeZone", before)


def test_wall_clock_times_across_a_dst_gap_in_a_non_utc_session(new_york_session) -> None:
    # 2024-03-10 02:00-03:00 does not exist in New York; TIMESTAMP_NTZ values in it still
    # order by wall clock, so 02:30 is before 03:10 whatever the session zone.
    gap = datetime(2024, 3, 10, 2, 30)
    build = new_york_session.createDataFrame(
        [
            ("EUR", 1, gap, "+I", 0, None, 0),
            ("EUR", 2, gap + timedelta(minutes=40), "+U", 1, None, 0),
        ],
        BUILD_SCHEMA,
    )
    probe = new_york_session.createDataFrame(
        [(i, "EUR", gap + timedelta(minutes=m), "+I") for i, m in enumerate([-1, 29, 30, 40, 60])],
        PROBE_SCHEMA,
    )
    assert _matches(_join(probe, build, how="left", tuning=ALL_HOT)) == {
        0: None,
        1: 1,
        2: 1,
        3: 2,
        4: 2,
    }


def test_local_time_zone_timestamps_join_on_the_instant(spark) -> None:
    as_ltz = {"currency_time": F.col("currency_time").cast("timestamp")}
    build = _changelog(spark, [("EUR", 1, 10, "+I"), ("EUR", 2, 20, "+U")]).withColumns(as_ltz)
    probe = _orders(spark, [(1, "EUR", 19), (2, "EUR", 20)])
    probe = probe.withColumn("order_time", F.col("order_time").cast("timestamp"))
    assert _matches(_join(probe, build)) == {1: 1, 2: 2}


# --- errors a user can hit, all before any Spark job --------------------------------------------


@pytest.fixture(scope="module")
def sides(spark) -> tuple[DataFrame, DataFrame]:
    return _orders(spark, [(1, "EUR", 1)]), _changelog(spark, [("EUR", 1, 1, "+I")])


def _call(sides: tuple[DataFrame, DataFrame], **overrides: object) -> DataFrame:
    probe, build = sides
    options: dict[str, object] = {
        "probe_keys": ["currency"],
        "build_keys": ["currency"],
        "probe_time": "order_time",
        "build_time": "currency_time",
        "build_columns": ["version_id"],
    }
    options.update(overrides)
    probe = options.pop("probe", probe)
    build = options.pop("build", build)
    return join_valid_versions(probe, build, **options)


def test_rejects_unknown_join_type(sides) -> None:
    with pytest.raises(DefinitionError, match=r"how='full' is not .* expected 'inner' or 'left'"):
        _call(sides, how="full")


def test_rejects_missing_column(sides) -> None:
    with pytest.raises(DefinitionError, match=r"probe side has no column 'order_ts'.*top-level"):
        _call(sides, probe_time="order_ts")
    with pytest.raises(DefinitionError, match=r"build side has no column 'op'"):
        _call(sides, build_row_kind="op")


def test_rejects_unpaired_keys(sides) -> None:
    with pytest.raises(DefinitionError, match=r"must pair up.*primary key"):
        _call(sides, probe_keys=["currency", "order_id"])
    with pytest.raises(DefinitionError, match=r"must pair up"):
        _call(sides, probe_keys=[], build_keys=[])


def test_rejects_empty_arrival_order(sides) -> None:
    with pytest.raises(DefinitionError, match=r"build_order is empty: expected .*_commit_version"):
        _call(sides, build_order=[])


def test_rejects_mixed_time_types(sides) -> None:
    probe, _ = sides
    ltz = probe.withColumn("order_time", F.col("order_time").cast("timestamp"))
    with pytest.raises(DefinitionError, match=r"probe time 'order_time' is timestamp but .*same"):
        _call(sides, probe=ltz)
    with pytest.raises(DefinitionError, match=r"'order_id' is bigint: expected TIMESTAMP"):
        _call(sides, probe_time="order_id")


def test_rejects_incompatible_key_types(sides) -> None:
    with pytest.raises(DefinitionError, match=r"'order_id' is bigint but 'currency' is string"):
        _call(sides, probe_keys=["order_id"])


def test_rejects_output_names_clashing_with_probe_columns(sides) -> None:
    with pytest.raises(DefinitionError, match=r"'currency' is ambiguous.*build_prefix"):
        _call(sides, build_columns=["currency"])
    with pytest.raises(DefinitionError, match=r"'__cl_x' is ambiguous.*not starting with"):
        _call(sides, build_columns={"version_id": "__cl_x"})


def test_join_type_enum_is_accepted(sides) -> None:
    assert _matches(_call(sides, how=JoinKind.LEFT)) == {1: 1}


# --- property: every plan agrees with the brute-force model -----------------------------------

KEYS = st.sampled_from(["a", "b", "c", None])
HOT_KEYS = st.sampled_from(["hot"] * 6 + ["a", "b"])
TIMES = st.one_of(st.integers(0, 12), st.none())
KINDS = st.sampled_from(["+I", "+U", "+U", "-U", "-D"])


@st.composite
def _cases(draw: st.DrawFn) -> tuple[list[Event], list[Order], list[int]]:
    keys = draw(st.sampled_from([KEYS, HOT_KEYS]))
    events = draw(st.lists(st.tuples(keys, TIMES, KINDS), max_size=14))
    orders = draw(st.lists(st.tuples(keys, TIMES), min_size=1, max_size=14))
    arrival = draw(st.permutations(range(len(events))))
    return (
        [(key, vid, t, kind) for vid, (key, t, kind) in enumerate(events)],
        [(oid, key, t) for oid, (key, t) in enumerate(orders)],
        list(arrival),
    )


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    case=_cases(),
    how=st.sampled_from(["inner", "left"]),
    tuning=st.sampled_from([BROADCAST, SHUFFLED, ALL_HOT, AsOfTuning(hot_key_min_rows=2)]),
)
def test_matches_brute_force_model(spark, case, how, tuning) -> None:
    events, orders, arrival = case
    _check(spark, events, orders, how=how, tuning=tuning, arrival=arrival)
