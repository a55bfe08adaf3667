"""Split watermark alignment through real runs: ticks, pauses and resumes, the same output.

The lake: `orders` split by `region` with `us` 30 minutes ahead of `eu`, and
`rates`, both in alignment group `g` with a max drift of 15 minutes and at most
3 rows per split and tick; an event-time temporal join of the two. Watermarks
are `rowtime - 1 ms`, so every chunk's watermark is 1 ms below its last row:

| tick | eu (orders) | us (orders)        | rates              |
|------|-------------|--------------------|--------------------|
| 0    | 0-10 min    | 30-40 min          | 0-20 min           |
| 1    | 15-25       | paused (40 > 25)   | 30-50              |
| 2    | 30-40       | resumed (40 = 40)  | paused (50 > 40)   |
| 3    | 45-55       |                    | resumed, 60        |
| 4    | 2 (late)    |                    |                    |

The last order to arrive (eu, minute 2) is late: the ticked run joins it against
the history of the ticks before. The same lake without `'scan.max-rows-per-tick'`
runs in one tick; both give the same rows.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from _crash import SIGKILL_RETURNCODE, delta_rows, run_in_subprocess, same_rows
from deltatables import write_commits
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from chronolake import Catalog, RunResult
from chronolake.alignment import ALLOW_UNALIGNED_SOURCE_SPLITS
from chronolake.errors import RunError
from chronolake.faults import FaultPoint
from chronolake.lake.layout import output_path
from chronolake.runtime.derived import DerivedTable
from chronolake.runtime.ticks import commit_chunks
from chronolake.watermarks.progress import SplitTick

T0 = datetime(2026, 1, 1, 9, 0)
VIEW = "enriched"
ALIGNED = {
    "scan.max-rows-per-tick": "3",
    "scan.watermark.alignment.group": "g",
    "scan.watermark.alignment.max-drift": "15 min",
    "scan.watermark.alignment.update-interval": "200 ms",
}


def _with(options: Mapping[str, str]) -> str:
    return ", ".join(f"'{key}' = '{value}'" for key, value in options.items())


def _ddl(orders: Mapping[str, str], rates: Mapping[str, str], *, changelog: str) -> str:
    key = ", PRIMARY KEY (order_id) NOT ENFORCED" if changelog == "cdf" else ""
    orders_with = {"path": "orders", "changelog": changelog, "scan.split-by": "region", **orders}
    rates_with = {"path": "rates", "changelog": "cdf", **rates}
    return f"""
    CREATE TABLE orders (order_id BIGINT, region STRING, currency STRING, order_time TIMESTAMP(3),
      WATERMARK FOR order_time AS order_time - INTERVAL '0.001' SECOND{key})
      WITH ({_with(orders_with)});
    CREATE TABLE rates (currency STRING, rate DOUBLE, currency_time TIMESTAMP(3),
      WATERMARK FOR currency_time AS currency_time - INTERVAL '0.001' SECOND,
      PRIMARY KEY (currency) NOT ENFORCED)
      WITH ({_with(rates_with)});
    CREATE VIEW {VIEW} AS
    SELECT o.order_id, o.region, o.order_time, r.rate, r.currency_time AS rate_time
    FROM orders AS o
    LEFT JOIN rates FOR SYSTEM_TIME AS OF o.order_time AS r ON o.currency = r.currency;
    """


def _lake(
    root: Path,
    spark: SparkSession,
    orders: Mapping[str, str] = ALIGNED,
    rates: Mapping[str, str] = ALIGNED,
    *,
    changelog: str = "append",
) -> Catalog:
    """The skewed backlog of the module docstring, in two commits per table."""
    eu = [_order(i, "eu", 5 * i) for i in range(12)]
    us = [_order(100 + i, "us", 30 + 5 * i) for i in range(6)]
    arrival = [row for pair in zip(eu, us, strict=False) for row in pair] + eu[6:]
    arrival.append(_order(99, "eu", 2))  # late
    write_commits(root / "orders", [arrival[:9], arrival[9:]], cdf=changelog == "cdf")
    rates_rows = [
        {"currency": "EUR", "rate": 1 + k / 10, "currency_time": T0 + timedelta(minutes=10 * k)}
        for k in range(7)
    ]
    write_commits(root / "rates", [rates_rows[:4], rates_rows[4:]])
    catalog = Catalog(root, spark)
    list(catalog.run_script(_ddl(orders, rates, changelog=changelog)))
    return catalog


def _order(order_id: int, region: str, minute: int) -> dict[str, object]:
    return {
        "order_id": order_id, "region": region, "currency": "EUR",
        "order_time": T0 + timedelta(minutes=minute),
    }


@dataclass(frozen=True)
class Runs:
    """The aligned run, a copy of its lake from before it, and the one-tick run."""

    aligned: RunResult
    aligned_lake: Path
    template: Path
    plain: RunResult
    plain_lake: Path

    def output(self, spark: SparkSession, lake: Path) -> DataFrame:
        return delta_rows(spark, output_path(lake, VIEW))


@pytest.fixture(scope="module")
def runs(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Runs:
    root = tmp_path_factory.mktemp("alignment-runs")
    aligned = _lake(root / "aligned", spark)
    shutil.copytree(root / "aligned", root / "template")
    plain = _lake(root / "plain", spark, {}, {})
    return Runs(
        aligned=DerivedTable(aligned, VIEW).run(),
        aligned_lake=root / "aligned",
        template=root / "template",
        plain=DerivedTable(plain, VIEW).run(),
        plain_lake=root / "plain",
    )


def test_the_split_ahead_is_paused_and_resumed_at_equality(runs: Runs) -> None:
    ticks = runs.aligned.ticks
    assert ticks is not None and ticks.ticks == 5
    assert ticks.decisions[0].startswith("tick 1: orders") and "paused us" in ticks.decisions[0]
    assert [d.split(":")[0] for d in ticks.decisions] == ["tick 1", "tick 2", "tick 2", "tick 3"]
    assert "resumed us" in ticks.decisions[1]
    minute = 60_000
    eu_at_25 = int((T0 + timedelta(minutes=25)).timestamp() * 1000) - 1
    assert f"max desired {eu_at_25 + 15 * minute}, resumed us" in ticks.decisions[1]
    assert ticks.paused_splits == {"orders": ["us"], "rates": ["<all>"]}
    assert ticks.pauses == {"orders": 1, "rates": 1}
    assert ticks.resumes == {"orders": 1, "rates": 1}
    assert ticks.unaligned == []


def test_a_single_split_source_pauses_as_a_whole_across_tables(runs: Runs) -> None:
    ticks = runs.aligned.ticks
    assert ticks is not None
    assert "tick 2: rates" in ticks.decisions[2] and "paused <all>" in ticks.decisions[2]
    assert "tick 3: rates" in ticks.decisions[3] and "resumed <all>" in ticks.decisions[3]


def test_split_watermarks_and_counts_are_in_the_figures(runs: Runs) -> None:
    figures, ticks = runs.aligned.figures, runs.aligned.ticks
    assert ticks is not None
    last = {
        "eu": int((T0 + timedelta(minutes=55)).timestamp() * 1000) - 1,
        "us": int((T0 + timedelta(minutes=55)).timestamp() * 1000) - 1,
    }
    assert ticks.split_watermarks["orders"] == last
    assert len(ticks.buffered_rows) == 5
    assert figures["peak_buffered_rows"] == max(ticks.buffered_rows)
    assert (figures["ticks"], figures["split_pauses"], figures["split_resumes"]) == (5, 2, 2)
    assert (figures["paused_splits"], figures["unaligned_sources"]) == (2, 0)
    # flows are summed over the ticks, what is held is the last tick's
    assert figures["rows_in"] == runs.plain.figures["rows_in"] == 19 + 7
    assert figures["late_probe_rows"] == runs.plain.figures["late_probe_rows"] == 1
    assert figures["pending_rows"] == runs.plain.figures["pending_rows"]


def test_aligned_ticks_give_the_same_output_as_one_tick(spark: SparkSession, runs: Runs) -> None:
    assert runs.plain.ticks is None and "ticks" not in runs.plain.figures
    aligned = runs.output(spark, runs.aligned_lake)
    assert aligned.count() == runs.aligned.figures["rows_out"] > 0
    assert same_rows(aligned, runs.output(spark, runs.plain_lake))
    assert runs.aligned.watermark_ms == runs.plain.watermark_ms


def test_a_reader_that_cannot_pause_splits_stops_the_run_naming_the_option(
    spark: SparkSession, tmp_path: Path
) -> None:
    # a changelog split by a column outside its key cannot pause one split
    catalog = _lake(tmp_path, spark, changelog="cdf")
    expected = f"must pause splits \\['us'\\].*'{ALLOW_UNALIGNED_SOURCE_SPLITS}' = 'true'"
    with pytest.raises(RunError, match=expected):
        DerivedTable(catalog, VIEW).run()
    assert not output_path(tmp_path, VIEW).path.exists()


def test_unaligned_splits_allowed_run_on_unaligned_and_say_so(
    spark: SparkSession, tmp_path: Path, runs: Runs
) -> None:
    options = {**ALIGNED, ALLOW_UNALIGNED_SOURCE_SPLITS: "true"}
    catalog = _lake(tmp_path, spark, options, changelog="cdf")
    result = DerivedTable(catalog, VIEW).run()
    assert result.ticks is not None and result.ticks.unaligned == ["orders"]
    assert result.figures["unaligned_sources"] == 1
    assert "orders" not in result.ticks.paused_splits  # eu, the slowest, keeps it below
    output = delta_rows(spark, output_path(tmp_path, VIEW))
    assert same_rows(output, runs.output(spark, runs.plain_lake))


def test_a_catch_up_run_killed_half_way_is_redone_identically(
    spark: SparkSession, tmp_path: Path, runs: Runs
) -> None:
    lake = tmp_path / "lake"
    shutil.copytree(runs.template, lake)
    killed = run_in_subprocess(lake, VIEW, fault=FaultPoint.AFTER_OUTPUT.value)
    assert killed.returncode == SIGKILL_RETURNCODE, killed.stderr[-2_000:]
    redone = DerivedTable(Catalog(lake, spark), VIEW).run()
    assert redone.run == 1 and redone.ticks == runs.aligned.ticks
    output = delta_rows(spark, output_path(lake, VIEW))
    assert same_rows(output, runs.output(spark, runs.aligned_lake))
    assert output.groupBy("order_id").count().where(F.col("count") > 1).isEmpty()


def test_a_backlog_within_the_bound_is_one_tick_with_the_same_rows(
    spark: SparkSession, tmp_path: Path, runs: Runs
) -> None:
    # every split fits one chunk: the ticks follow from the read's own per-commit counts
    roomy = {**ALIGNED, "scan.max-rows-per-tick": "1000"}
    result = DerivedTable(_lake(tmp_path, spark, roomy, roomy), VIEW).run()
    assert result.ticks is not None and result.ticks.ticks == 1
    assert result.ticks.pauses == {"orders": 0, "rates": 0}
    assert result.figures["rows_in"] == runs.plain.figures["rows_in"]
    output = delta_rows(spark, output_path(tmp_path, VIEW))
    assert same_rows(output, runs.output(spark, runs.plain_lake))


@pytest.mark.parametrize(
    ("sizes", "bound", "chunks", "straddled"),
    [
        ([3, 3, 2], 3, [0, 1, 2], False),  # commits end where chunks end
        ([2, 1, 3], 3, [0, 0, 1], False),
        ([4, 2], 3, [0, 1], True),  # the first commit is cut inside
        ([5, 5], None, [0, 1], False),  # no bound: a chunk per commit
    ],
)
def test_commits_fall_into_chunks_by_arrival_rank(
    sizes: list[int], bound: int | None, chunks: list[int], straddled: bool
) -> None:
    facts = [SplitTick("s", version, None, 0, rows) for version, rows in enumerate(sizes)]
    found, cut_inside = commit_chunks(facts, bound)
    assert [found[("s", version)] for version in range(len(sizes))] == chunks
    assert cut_inside is straddled
