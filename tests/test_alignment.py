"""Watermark alignment: Flink's SourceCoordinatorAlignmentTest and
SourceOperatorSplitWatermarkAlignmentTest ported, then chronolake's own rules."""

from __future__ import annotations

import doctest
import logging
from types import ModuleType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import chronolake.alignment.aligner as aligner_module
import chronolake.alignment.coordinator as coordinator_module
import chronolake.alignment.schedule as schedule_module
from chronolake.alignment import (
    ALLOW_UNALIGNED_SOURCE_SPLITS,
    AlignmentCoordinator,
    SplitAligner,
)
from chronolake.alignment.schedule import SourceBacklog, TickSchedule, schedule_ticks
from chronolake.alignment.settings import AlignmentSettings, can_pause_splits
from chronolake.errors import DefinitionError, RunError
from chronolake.schema import TableSpec
from chronolake.sql.ddl import parse_table
from chronolake.watermarks import LONG_MAX, LONG_MIN, Watermark, WatermarkStatus, WatermarkValve

# --- Flink's SourceCoordinatorAlignmentTest ---------------------------------------------------


def _coordinator(*sources: tuple[str, str, int]) -> AlignmentCoordinator:
    coordinator = AlignmentCoordinator()
    for source, group, drift in sources:
        coordinator.register(source, group, drift)
    return coordinator


def test_watermark_alignment() -> None:
    c = _coordinator(("src", "group1", 1_000))
    c.report("src", "subtask0", 42)
    assert c.max_desired("src") == 1_042
    c.report("src", "subtask1", 44)
    assert c.max_desired("src") == 1_042
    c.report("src", "subtask0", 5_000)
    assert c.max_desired("src") == 1_044


def test_watermark_alignment_with_idleness() -> None:
    c = _coordinator(("src", "group1", 1_000))
    c.report("src", "subtask0", 42)
    assert c.max_desired("src") == 1_042
    c.report("src", "subtask1", 44)
    assert c.max_desired("src") == 1_042
    c.report("src", "subtask0", None)  # idle
    assert c.max_desired("src") == 1_044
    c.report("src", "subtask0", 42)  # active again: max desired goes down
    assert c.max_desired("src") == 1_042
    c.report("src", "subtask0", None)
    c.report("src", "subtask1", None)  # everyone idle: no bound (no overflow either)
    assert c.max_desired("src") == LONG_MAX
    c.report("src", "subtask0", 42)
    assert c.max_desired("src") == 1_042
    c.report("src", "subtask1", 46)
    assert c.max_desired("src") == 1_042


def test_watermark_alignment_with_two_groups() -> None:
    c = _coordinator(("src1", "group1", 1_000), ("src2", "group2", 1_000))
    c.report("src1", "subtask0", 42)
    assert c.max_desired("src1") == 1_042
    c.report("src2", "subtask1", 44)
    assert (c.max_desired("src1"), c.max_desired("src2")) == (1_042, 1_044)
    c.report("src1", "subtask0", 5_000)
    assert (c.max_desired("src1"), c.max_desired("src2")) == (6_000, 1_044)


def test_watermark_aggregator() -> None:
    c = _coordinator(("src", "g", 0))
    steps = [
        (0, 10, 10),
        (1, 12, 10),
        (2, 13, 10),
        (1, 9, 9),
        (1, LONG_MAX, 10),  # an idle reader
        (1, 8, 8),
        (1, 20, 10),
        (0, 23, 13),
        (2, 22, 20),
    ]
    for reader, watermark, expected in steps:
        c.report("src", str(reader), watermark)
        assert c.group_watermark("g") == expected


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 9),
            st.one_of(st.none(), st.just(LONG_MIN), st.integers(0, 10**13)),
        ),
        min_size=1,
        max_size=60,
    )
)
def test_watermark_aggregator_randomly(reports: list[tuple[int, int | None]]) -> None:
    c = _coordinator(("src", "g", 250))
    latest: dict[int, int] = {}
    for reader, watermark in reports:
        c.report("src", f"r{reader}", watermark)
        latest[reader] = LONG_MAX if watermark is None else watermark
        expected = min(latest.values())
        assert c.group_watermark("g") == expected
        assert c.max_desired("src") == min(expected + 250, LONG_MAX)


# --- chronolake's coordinator rules ----------------------------------------------------------


def test_max_desired_is_none_before_anyone_in_the_group_reported() -> None:
    c = _coordinator(("orders", "g", 100), ("rates", "g", 100), ("other", "h", 100))
    assert c.max_desired("orders") is None
    c.report("other", "r", 5)  # another group does not count
    assert c.max_desired("orders") is None
    c.report("rates", "r", 5)
    assert c.max_desired("orders") == 105


def test_sources_that_have_not_reported_are_left_out_of_the_minimum() -> None:
    c = _coordinator(("fast", "g", 10), ("slow", "g", 10))
    c.report("fast", "r", 1_000)
    assert c.max_desired("fast") == 1_010
    c.report("slow", "r", 50)
    assert c.max_desired("fast") == 60


def test_each_source_adds_its_own_drift_to_the_group_minimum() -> None:
    c = _coordinator(("a", "g", 10), ("b", "g", 500))
    c.report("a", "r", 100)
    c.report("b", "r", 400)
    assert (c.max_desired("a"), c.max_desired("b")) == (110, 600)


def test_forgotten_readers_no_longer_hold_the_group_back() -> None:
    c = _coordinator(("src", "g", 5))
    c.report("src", "done", 1)
    c.report("src", "busy", 50)
    assert c.max_desired("src") == 6
    c.forget("src", "done")
    assert c.max_desired("src") == 55
    c.forget("src", "never-reported")  # harmless
    c.forget("src", "busy")
    assert c.max_desired("src") is None


def test_max_desired_saturates_at_long_max() -> None:
    c = _coordinator(("src", "g", 1_000))
    c.report("src", "r", LONG_MAX - 10)
    assert c.max_desired("src") == LONG_MAX


def test_registering_twice_the_same_way_is_a_no_op() -> None:
    c = _coordinator(("src", "g", 5))
    c.report("src", "r", 1)
    c.register("src", "g", 5)
    assert c.max_desired("src") == 6


def test_registering_a_source_in_two_ways_is_an_error() -> None:
    c = _coordinator(("src", "g", 5))
    with pytest.raises(
        DefinitionError, match=r"'src' is already registered in alignment group 'g'"
    ):
        c.register("src", "h", 5)


@pytest.mark.parametrize(
    ("group", "drift", "problem"),
    [("g", -1, r"max_drift_ms: Input should be greater than or equal to 0"), ("", 5, r"group")],
)
def test_invalid_alignment_is_a_definition_error(group: str, drift: int, problem: str) -> None:
    with pytest.raises(
        DefinitionError, match=rf"alignment of source 'src' is invalid \(.*{problem}"
    ):
        AlignmentCoordinator().register("src", group, drift)


def test_unregistered_source_is_an_error() -> None:
    c = AlignmentCoordinator()
    with pytest.raises(RunError, match=r"source 'x' is not registered .* call register"):
        c.report("x", "r", 1)
    with pytest.raises(RunError, match=r"source 'x' is not registered"):
        c.max_desired("x")


@pytest.mark.parametrize("bad", [1.5, "7", True, LONG_MAX + 1])
def test_report_must_be_an_int_or_none(bad: object) -> None:
    c = _coordinator(("src", "g", 5))
    with pytest.raises(RunError, match=r"reader 'r' of source 'src' reported watermark"):
        c.report("src", "r", bad)  # type: ignore[arg-type]


# --- Flink's SourceOperatorSplitWatermarkAlignmentTest -----------------------------------------


def test_split_watermark_alignment() -> None:
    aligner = SplitAligner()
    # split 0 emitted 5, split 1 nothing yet
    assert aligner.update(4, {"0": 5, "1": LONG_MIN}) == ({"0"}, set())
    assert aligner.paused == {"0"}
    assert aligner.update(5, {"0": 5, "1": LONG_MIN}) == (set(), {"0"})
    assert aligner.paused == set()
    # split 0 emits 11, split 1 emits 3
    assert aligner.update(5, {"0": 11, "1": 3}) == ({"0"}, set())
    # split 1 emits 12
    assert aligner.update(5, {"0": 11, "1": 12}) == ({"1"}, set())
    assert aligner.paused == {"0", "1"}
    assert (aligner.pauses, aligner.resumes) == (3, 1)


def test_single_split_watermark_alignment_and_idleness() -> None:
    aligner = SplitAligner(can_pause_splits=False)  # pausing the source needs no split support
    assert aligner.update(4, {"0": 5}) == ({"0"}, set())
    assert aligner.source_paused
    # blocked by alignment, the split is quiet: it must not be marked idle
    assert aligner.idle_candidates({"0"}) == set()
    assert aligner.update(5, {"0": 5}) == (set(), {"0"})
    assert not aligner.source_paused
    assert aligner.idle_candidates({"0"}) == {"0"}


def test_multi_split_watermark_alignment_and_idleness() -> None:
    """Split 0 is blocked at 5; split 1 keeps emitting; the source watermark stays <= 5."""
    max_allowed = 4
    aligner = SplitAligner()
    valve = WatermarkValve(2)
    split_watermarks = {"0": max_allowed + 1, "1": LONG_MIN}
    valve.input_watermark(Watermark(max_allowed + 1), 0)
    assert aligner.update(max_allowed, split_watermarks) == ({"0"}, set())
    for watermark in [3, 3, 3, 3, 3, 3, 3, max_allowed + 101]:
        if "1" not in aligner.paused:
            split_watermarks["1"] = watermark
            valve.input_watermark(Watermark(watermark), 1)
        # split 0 produced nothing this tick: only idle if it is not paused
        for split in aligner.idle_candidates({"0"}):
            valve.input_status(WatermarkStatus.IDLE, int(split))
        aligner.update(max_allowed, split_watermarks)
    assert aligner.paused == {"0", "1"}
    assert valve.last_watermark <= Watermark(max_allowed + 1)
    assert valve.channel_status(0) is WatermarkStatus.ACTIVE


def test_split_watermark_alignment_with_finished_split() -> None:
    aligner = SplitAligner()
    # split 0 emitted its only record (5) and finished: it is gone from the mapping
    assert aligner.update(4, {"1": 3}) == (set(), set())
    assert aligner.paused == set()


# --- chronolake's split alignment rules ------------------------------------------------------


def test_a_paused_split_that_finishes_is_forgotten_not_resumed() -> None:
    aligner = SplitAligner()
    aligner.update(10, {"a": 20, "b": 5})
    assert aligner.update(10, {"b": 5}) == (set(), set())
    assert aligner.paused == set()
    assert aligner.resumes == 0


def test_split_exactly_at_max_desired_keeps_reading() -> None:
    aligner = SplitAligner()
    assert aligner.update(10, {"a": 10, "b": 11}) == ({"b"}, set())


def test_max_desired_may_go_down_and_pause_again() -> None:
    aligner = SplitAligner()
    aligner.update(100, {"a": 50, "b": 60})
    assert aligner.update(55, {"a": 50, "b": 60}) == ({"b"}, set())
    assert aligner.update(70, {"a": 50, "b": 60}) == (set(), {"b"})
    assert aligner.update(40, {"a": 50, "b": 60}) == ({"a", "b"}, set())
    assert aligner.source_paused


def test_no_max_desired_yet_means_nothing_is_paused() -> None:
    aligner = SplitAligner()
    aligner.update(1, {"a": 5, "b": 7})
    assert aligner.update(None, {"a": 5, "b": 7}) == (set(), {"a", "b"})


def test_reader_that_cannot_pause_splits_is_an_error_naming_the_option() -> None:
    aligner = SplitAligner(can_pause_splits=False, source="orders")
    assert aligner.update(100, {"a": 50, "b": 60}) == (set(), set())  # nothing to pause yet
    with pytest.raises(
        RunError,
        match=r"source 'orders' must pause splits \['b'\] .* cannot pause individual splits; "
        r"set 'pipeline\.watermark-alignment\.allow-unaligned-source-splits' = 'true'",
    ):
        aligner.update(55, {"a": 50, "b": 60})
    assert (
        ALLOW_UNALIGNED_SOURCE_SPLITS
        == "pipeline.watermark-alignment.allow-unaligned-source-splits"
    )


def test_allowed_unaligned_splits_run_on_and_only_the_whole_source_pauses() -> None:
    aligner = SplitAligner(can_pause_splits=False, allow_unaligned_splits=True)
    assert aligner.update(55, {"a": 50, "b": 60}) == (set(), set())
    assert aligner.unaligned
    # the source's watermark (min over splits) runs ahead: every split waits
    assert aligner.update(45, {"a": 50, "b": 60}) == ({"a", "b"}, set())
    assert aligner.source_paused
    assert aligner.update(50, {"a": 50, "b": 60}) == (set(), {"a", "b"})
    # down to one split: the source pauses by itself, which is always possible
    assert aligner.update(50, {"b": 60}) == ({"b"}, set())
    assert not aligner.unaligned


def test_every_decision_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    aligner = SplitAligner(source="orders")
    with caplog.at_level(logging.INFO, logger="chronolake.alignment"):
        aligner.update(10, {"a": 5, "b": 20})
        aligner.update(30, {"a": 25, "b": 20})
        aligner.update(30, {"a": 25})
    messages = [r.getMessage() for r in caplog.records]
    assert messages == [
        "source 'orders': pausing split 'b', watermark 20 is above max desired 10",
        "source 'orders': resuming split 'b', watermark 20 is at or below max desired 30",
    ]
    aligner.update(10, {"a": 25})
    with caplog.at_level(logging.INFO, logger="chronolake.alignment"):
        aligner.update(10, {})
    assert caplog.records[-1].getMessage() == (
        "source 'orders': split 'a' finished while paused, forgotten"
    )


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.one_of(st.none(), st.integers(0, 100)),
            st.dictionaries(st.sampled_from("abcd"), st.integers(0, 100), max_size=4),
        ),
        max_size=25,
    )
)
def test_paused_is_exactly_the_splits_above_max_desired(
    updates: list[tuple[int | None, dict[str, int]]],
) -> None:
    aligner = SplitAligner()
    previous: set[str] = set()
    for bound, watermarks in updates:
        pause, resume = aligner.update(bound, watermarks)
        limit = LONG_MAX if bound is None else bound
        expected = {s for s, w in watermarks.items() if w > limit}
        assert aligner.paused == expected
        live = previous & watermarks.keys()
        assert pause == expected - live
        assert resume == live - expected
        previous = expected


# --- coordinator and aligner together: bounded skew during catch-up ---------------------------


def test_alignment_bounds_the_skew_between_splits_during_catch_up() -> None:
    """Two splits of a skewed backlog: one moves 100 ms of event time per tick, one 10 ms."""
    drift, speeds = 50, {"fast": 100, "slow": 10}
    coordinator = _coordinator(("src", "g", drift))
    aligner = SplitAligner(source="src")
    watermarks = {"fast": 0, "slow": 0}
    widest = 0
    for _ in range(200):
        for split, speed in speeds.items():
            if split not in aligner.paused:
                watermarks[split] += speed
            coordinator.report("src", split, watermarks[split])
        aligner.update(coordinator.max_desired("src"), watermarks)
        widest = max(widest, watermarks["fast"] - watermarks["slow"])
    assert widest <= drift + speeds["fast"]
    assert watermarks["slow"] == 2_000
    assert aligner.pauses > 0 and aligner.resumes > 0


# --- ticks of a catch-up run: the policy replayed over a backlog -----------------------------


def _aligned(drift: int = 100, *, every: int = 1, **options: bool) -> AlignmentSettings:
    return AlignmentSettings(group="g", max_drift_ms=drift, update_every_ticks=every, **options)


def _tick_lists(schedule: TickSchedule, source: str) -> dict[str, list[int]]:
    """Per split, the tick of each of its chunks, in chunk order."""
    ticks: dict[str, list[int]] = {}
    for (split, _chunk), tick in sorted(schedule.sources[source].ticks.items()):
        ticks.setdefault(split, []).append(tick)
    return ticks


def test_schedule_pauses_the_split_ahead_and_resumes_it_at_equality() -> None:
    # "us" is 1 000 ms ahead; "eu" reaches us's watermark - drift (900) exactly at chunk 9.
    eu = [100 * (i + 1) for i in range(12)]
    backlog = SourceBacklog("orders", {"eu": eu, "us": [1_000, 1_100]}, alignment=_aligned())
    schedule = schedule_ticks([backlog])
    ticks = _tick_lists(schedule, "orders")
    assert ticks["eu"] == list(range(12))
    # paused after tick 0 (1 000 > 100 + 100); eu's watermark is 900 after tick 8, so max
    # desired is 1 000 = us's watermark: resumed at equality, read in tick 9
    assert ticks["us"] == [0, 9]
    orders = schedule.sources["orders"]
    assert (orders.pauses, orders.resumes, orders.paused_splits) == (1, 1, ("us",))
    assert [(d.tick, d.paused, d.resumed) for d in schedule.decisions] == [
        (1, ("us",), ()), (9, (), ("us",)),
    ]
    assert orders.split_watermarks == {"eu": 1_200, "us": 1_100}


def test_schedule_pauses_a_single_split_source_across_tables() -> None:
    rates = SourceBacklog("rates", {"<all>": [5_000, 6_000, 7_000]}, alignment=_aligned())
    orders = SourceBacklog(
        "orders", {"<all>": [1_000 * (i + 1) for i in range(7)]}, alignment=_aligned()
    )
    schedule = schedule_ticks([rates, orders])
    assert _tick_lists(schedule, "rates")["<all>"] == [0, 5, 6]  # orders reach 5 000 in tick 4
    assert _tick_lists(schedule, "orders")["<all>"] == list(range(7))
    assert schedule.sources["rates"].paused_splits == ("<all>",)
    assert schedule.sources["orders"].pauses == 0


def test_schedule_without_alignment_reads_every_split_every_tick() -> None:
    backlog = SourceBacklog("orders", {"eu": [1, 2, 3], "us": [1_000, 2_000]})
    schedule = schedule_ticks([backlog])
    assert schedule.count == 3
    assert _tick_lists(schedule, "orders") == {"eu": [0, 1, 2], "us": [0, 1]}
    assert schedule.decisions == ()


def test_a_split_with_no_backlog_left_does_not_hold_the_others_back() -> None:
    # "eu" is read after one chunk; "us" far ahead must still be read in this run
    backlog = SourceBacklog("orders", {"eu": [10], "us": [5_000, 6_000, 7_000]},
                            alignment=_aligned())
    schedule = schedule_ticks([backlog])
    assert _tick_lists(schedule, "orders")["us"] == [0, 1, 2]
    assert schedule.sources["orders"].pauses == 0


def test_alignment_is_updated_every_update_interval_in_ticks() -> None:
    eu = [100 * (i + 1) for i in range(12)]
    backlog = SourceBacklog("orders", {"eu": eu, "us": [1_000 * (i + 1) for i in range(8)]},
                            alignment=_aligned(every=5))
    schedule = schedule_ticks([backlog])
    # paused at tick 5, not before; still paused at tick 10; resumed when eu is read up
    assert [(d.tick, d.paused, d.resumed) for d in schedule.decisions] == [
        (5, ("us",), ()), (12, (), ("us",)),
    ]
    assert _tick_lists(schedule, "orders")["us"] == [0, 1, 2, 3, 4, 12, 13, 14]


def test_schedule_starts_from_the_stored_watermarks() -> None:
    # "us" stopped at 5 000 last run: it is paused before its first chunk of this run
    backlog = SourceBacklog("orders", {"eu": [100, 200], "us": [5_100]},
                            start_splits={"eu": 0, "us": 5_000}, alignment=_aligned())
    schedule = schedule_ticks([backlog])
    assert _tick_lists(schedule, "orders")["us"] == [2]
    assert schedule.decisions[0].tick == 0


def test_schedule_of_a_reader_that_cannot_pause_splits_names_the_option() -> None:
    backlog = SourceBacklog("orders", {"eu": [100, 200], "us": [5_000, 6_000]},
                            alignment=_aligned(can_pause_splits=False))
    with pytest.raises(RunError, match=ALLOW_UNALIGNED_SOURCE_SPLITS):
        schedule_ticks([backlog])


def test_schedule_with_unaligned_splits_allowed_runs_them_unaligned() -> None:
    backlog = SourceBacklog(
        "orders", {"eu": [100, 200], "us": [5_000, 6_000]},
        alignment=_aligned(can_pause_splits=False, allow_unaligned_splits=True),
    )
    schedule = schedule_ticks([backlog])
    assert _tick_lists(schedule, "orders") == {"eu": [0, 1], "us": [0, 1]}
    assert schedule.sources["orders"].unaligned


@settings(max_examples=150, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(["a", "b", "c"]),
        st.lists(st.one_of(st.none(), st.integers(0, 10_000)), min_size=1, max_size=8),
        min_size=1,
    ),
    st.lists(st.integers(0, 10_000), min_size=1, max_size=8),
    st.integers(0, 2_000),
    st.integers(1, 4),
)
def test_schedule_reads_every_chunk_once_in_order(
    splits: dict[str, list[int | None]], other: list[int], drift: int, every: int
) -> None:
    orders = SourceBacklog("orders", splits, alignment=_aligned(drift, every=every))
    rates = SourceBacklog("rates", {"<all>": sorted(other)}, alignment=_aligned(drift))
    schedule = schedule_ticks([orders, rates])
    for source, backlog in (("orders", orders), ("rates", rates)):
        ticks = _tick_lists(schedule, source)
        assert {split: len(t) for split, t in ticks.items()} == {
            split: len(chunks) for split, chunks in backlog.chunks.items()
        }
        assert all(t == sorted(set(t)) and t[-1] < schedule.count for t in ticks.values())


# --- alignment options of a table ------------------------------------------------------------


def _spec(**options: str) -> TableSpec:
    with_ = {"connector": "delta", "path": "t", "changelog": "cdf", **options}
    return parse_table(
        "CREATE TABLE t (id BIGINT, region STRING, PRIMARY KEY (id) NOT ENFORCED) WITH ("
        + ", ".join(f"'{key}' = '{value}'" for key, value in with_.items()) + ")"
    )


def test_a_bad_duration_names_the_option() -> None:
    expected = "'scan.watermark.alignment.max-drift': '5 parsecs' is not a duration"
    with pytest.raises(DefinitionError, match=expected):
        AlignmentSettings.for_table(_spec(**{
            "scan.watermark.alignment.group": "g",
            "scan.watermark.alignment.max-drift": "5 parsecs",
        }))


def test_alignment_settings_of_a_table() -> None:
    assert AlignmentSettings.for_table(_spec()) is None
    settings_ = AlignmentSettings.for_table(_spec(**{
        "scan.watermark.alignment.group": "g",
        "scan.watermark.alignment.max-drift": "1 min",
        "scan.watermark.alignment.update-interval": "500 ms",
        "pipeline.watermark-alignment.allow-unaligned-source-splits": "true",
    }))
    assert settings_ == AlignmentSettings(
        group="g", max_drift_ms=60_000, update_every_ticks=3, allow_unaligned_splits=True
    )
    default = AlignmentSettings.for_table(_spec(**{
        "scan.watermark.alignment.group": "g", "scan.watermark.alignment.max-drift": "1 s",
    }))
    assert default is not None and default.update_every_ticks == 5  # Flink's 1 s


@pytest.mark.parametrize(
    ("options", "problem"),
    [
        ({"scan.watermark.alignment.group": "g"}, "needs 'scan.watermark.alignment.max-drift'"),
        ({"scan.watermark.alignment.max-drift": "1 s"}, "'scan.watermark.alignment.group' is not"),
    ],
)
def test_half_declared_alignment_is_an_error(options: dict[str, str], problem: str) -> None:
    with pytest.raises(DefinitionError, match=problem):
        AlignmentSettings.for_table(_spec(**options))


def test_changelog_split_outside_the_key_cannot_pause_splits() -> None:
    assert not can_pause_splits(_spec(**{"scan.split-by": "region"}))
    assert can_pause_splits(_spec(**{"scan.split-by": "id"}))
    assert can_pause_splits(_spec(**{"scan.split-by": "region", "changelog": "append"}))
    assert can_pause_splits(_spec())


@pytest.mark.parametrize("module", [aligner_module, coordinator_module, schedule_module])
def test_docstring_examples_run(module: ModuleType) -> None:
    result = doctest.testmod(module)
    assert result.attempted > 0 and result.failed == 0
