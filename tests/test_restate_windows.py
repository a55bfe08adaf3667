"""Restating a range of a source through a window aggregate: only the windows that overlap the
range are recomputed, only their differences are committed (-U/+U, -D, +I), and the view then
equals a full refresh over the rewritten source.

A real lake: raw orders (an append table without the change data feed) at 09:05 (EUR 10),
09:15 (EUR 20), 09:25 (EUR 30), 09:35 (USD 40) and 09:45 (EUR 50), counted per currency in
10-minute windows; the first run's watermark (09:45) fired the windows up to 09:30, and the
09:40 one is open. The upstream system re-exports [09:10, 09:30) with a predicate overwrite.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from _crash import REPO, SUBPROCESS_TIMEOUT_S
from _demo import CHRONOLAKE
from _orders_and_rates import ORDERS_AND_RATES, RAW_ORDERS, at, between, ms, order_row
from _restated_lake import run_once
from click.testing import CliRunner
from dagster import AssetKey, DagsterInstance
from deltalake import DeltaTable, write_deltalake
from deltatables import as_table, table_rows, write_commits
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from chronolake import Catalog
from chronolake.cli.app import main
from chronolake.dagster import LakeResource, local_pyspark_resource, restate_job
from chronolake.errors import DefinitionError, RestateRangeError
from chronolake.faults import FAULT_ENV, FaultPoint
from chronolake.lake.layout import late_path, output_path
from chronolake.lake.stamps import RESTATED_KEY
from chronolake.runtime.derived import DerivedTable
from chronolake.runtime.restate_plan import run_restatement
from chronolake.watermarks.watermark import LONG_MIN

DDL = ORDERS_AND_RATES + RAW_ORDERS + """
CREATE VIEW per_currency AS
SELECT window_start, window_end, currency, SUM(amount) AS amount, COUNT(*) AS orders
FROM TABLE(TUMBLE(TABLE raw_orders, DESCRIPTOR(order_time), INTERVAL '10' MINUTES))
GROUP BY window_start, window_end, currency;
"""
ORDERS = [order_row(1, 10, 5), order_row(2, 20, 15), order_row(3, 30, 25),
          order_row(4, 40, 35, "USD"), order_row(5, 50, 45)]
SCHEMA = as_table(ORDERS).schema


@pytest.fixture
def lake(tmp_path: Path, spark: SparkSession) -> Catalog:
    """The orders in one commit, and `per_currency` run once over them."""
    return run_once(tmp_path, spark, DDL, ["per_currency"], {"raw_orders": ORDERS})


def rows(catalog: Catalog) -> set[tuple[Any, ...]]:
    """`per_currency`'s rows: (window start minute, currency, amount, orders)."""
    table = table_rows(output_path(catalog.root, "per_currency")).to_pylist()
    return {(_minute(r["window_start"]), r["currency"], r["amount"], r["orders"]) for r in table}


def changes(catalog: Catalog, version: int) -> set[tuple[Any, ...]]:
    """What the commit at `version` of `per_currency` changed, by its change data feed."""
    feed = pa.table(DeltaTable(str(output_path(catalog.root, "per_currency"))).load_cdf(
        starting_version=version, ending_version=version).read_all()).to_pylist()
    return {(r["_change_type"], _minute(r["window_start"]), r["currency"], r["amount"],
             r["orders"]) for r in feed}


def late_orders(catalog: Catalog) -> set[int]:
    """The order ids in `per_currency`'s side table of late rows."""
    return {row["order_id"] for row in
            table_rows(late_path(catalog.root, "per_currency")).to_pylist()}


def re_export(catalog: Catalog, start: float, end: float, orders: list[dict[str, Any]]) -> None:
    """The upstream system replaces the orders of [start, end) with `orders`."""
    write_deltalake(str(Path(str(catalog.root)) / "raw_orders"), as_table(orders),
                    mode="overwrite", predicate=between(start, end))


def refreshed(catalog: Catalog) -> set[tuple[Any, ...]]:
    """`per_currency` rebuilt from scratch over the source as it is now."""
    DerivedTable(catalog, "per_currency").run(full_refresh=True)
    return rows(catalog)


def _minute(moment: Any) -> int:
    return int((moment - at(0)).total_seconds() // 60)


def test_a_range_at_window_boundaries_restates_its_windows_and_commits_only_differences(
    lake: Catalog,
) -> None:
    assert rows(lake) == {(0, "EUR", 10, 1), (10, "EUR", 20, 1), (20, "EUR", 30, 1),
                          (30, "USD", 40, 1)}
    # order 2 corrected, order 3 gone, a GBP order the first export missed
    re_export(lake, 10, 30, [order_row(2, 21, 15), order_row(6, 5, 12, "GBP")])

    [result] = run_restatement(lake, "raw_orders", start_ms=ms(10), end_ms=ms(30))

    assert result.figures["rows_out"] == 4
    assert (result.figures["update_befores_out"], result.figures["update_afters_out"],
            result.figures["deletes_out"], result.figures["inserts_out"]) == (1, 1, 1, 1)
    assert changes(lake, result.output_version) == {
        ("update_preimage", 10, "EUR", 20, 1), ("update_postimage", 10, "EUR", 21, 1),
        ("insert", 10, "GBP", 5, 1), ("delete", 20, "EUR", 30, 1),
    }  # the 09:00 and 09:30 windows are not touched
    info = DeltaTable(str(output_path(lake.root, "per_currency"))).history(1)[0]
    assert json.loads(info[RESTATED_KEY]) == {  # the next hop's range: the windows' times
        "source": "raw_orders", "fromMillis": ms(20) - 1, "toMillis": ms(30)}
    restated = rows(lake)
    assert restated == {(0, "EUR", 10, 1), (10, "EUR", 21, 1), (10, "GBP", 5, 1),
                        (30, "USD", 40, 1)}
    assert refreshed(lake) == restated


def test_an_open_windows_rows_are_replaced_in_state_and_fire_rewritten(lake: Catalog) -> None:
    raw_orders = Path(str(lake.root)) / "raw_orders"
    re_export(lake, 40, 50, [order_row(5, 55, 45), order_row(7, 1, 48, "USD")])

    [result] = run_restatement(lake, "raw_orders", start_ms=ms(40), end_ms=ms(50))

    assert result.figures["rows_out"] == 0  # the 09:40 window has not fired
    assert result.figures["pending_rows"] == 2
    write_commits(raw_orders, [[order_row(8, 80, 61)]], cdf=False)  # the watermark to 10:01
    DerivedTable(lake, "per_currency").run()
    assert {row for row in rows(lake) if row[0] == 40} == {(40, "EUR", 55, 1),
                                                            (40, "USD", 1, 1)}
    assert refreshed(lake) == rows(lake)


def test_late_rows_of_the_region_leave_the_side_table_and_are_counted(lake: Catalog) -> None:
    raw_orders = Path(str(lake.root)) / "raw_orders"
    late_order = order_row(10, 3, 16)  # 09:16, behind the watermark (09:45): late
    write_commits(raw_orders, [[late_order, order_row(11, 4, 47)]], cdf=False)
    DerivedTable(lake, "per_currency").run()
    assert late_orders(lake) == {10}
    re_export(lake, 10, 20, [order_row(2, 20, 15), late_order])  # the same rows, re-exported

    [result] = run_restatement(lake, "raw_orders", start_ms=ms(10), end_ms=ms(20))

    assert changes(lake, result.output_version) == {
        ("update_preimage", 10, "EUR", 20, 1), ("update_postimage", 10, "EUR", 23, 2),
    }
    assert late_orders(lake) == set()  # on time in the restatement, as in a refresh
    assert result.figures["pending_rows"] == 2  # orders 5 and 11, in the open 09:40 window
    assert refreshed(lake) == rows(lake)
    assert late_orders(lake) == set()


def test_a_range_restated_twice_and_again_with_nothing_new(lake: Catalog) -> None:
    re_export(lake, 10, 20, [order_row(2, 22, 15)])
    run_restatement(lake, "raw_orders", start_ms=ms(10), end_ms=ms(20))
    re_export(lake, 10, 20, [order_row(2, 23, 15), order_row(9, 7, 11)])

    [second] = run_restatement(lake, "raw_orders", start_ms=ms(10), end_ms=ms(20))
    assert changes(lake, second.output_version) == {
        ("update_preimage", 10, "EUR", 22, 1), ("update_postimage", 10, "EUR", 30, 2),
    }
    again = CliRunner().invoke(main, ["restate", "raw_orders", "--lake", str(lake.root),
                                      "--from", "2026-11-02 09:10", "--to", "2026-11-02 09:20"])
    assert again.exit_code == 0
    assert " ".join(again.output.split()).startswith(
        "per_currency: nothing to restate: 'raw_orders' has no commit after version 2, which "
        "its last run consumed watermark: 2026-11-02 09:45:00.000 (event time)")
    assert refreshed(lake) == rows(lake)


def test_a_restatement_killed_after_its_output_commit_is_finished_by_running_it_again(
    lake: Catalog,
) -> None:
    re_export(lake, 10, 30, [order_row(2, 21, 15)])
    killed = subprocess.run(
        [str(CHRONOLAKE), "restate", "raw_orders", "--lake",
         str(lake.root), "--from", "2026-11-02T09:10", "--to", "2026-11-02T09:30"],
        env={**os.environ, FAULT_ENV: FaultPoint.AFTER_OUTPUT.value}, cwd=REPO,
        capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT_S, check=False,
    )
    assert killed.returncode == -9, killed.stderr
    output = DeltaTable(str(output_path(lake.root, "per_currency")))
    committed = output.version()  # the output's commit is in; state and checkpoint are not

    [finished] = run_restatement(lake, "raw_orders", start_ms=ms(10), end_ms=ms(30))

    assert finished.run == 2
    assert DeltaTable(str(output_path(lake.root, "per_currency"))).version() == committed
    assert changes(lake, committed) == {
        ("update_preimage", 10, "EUR", 20, 1), ("update_postimage", 10, "EUR", 21, 1),
        ("delete", 20, "EUR", 30, 1),
    }  # written once
    assert rows(lake) == refreshed(lake)


def test_the_dagster_job_records_the_restated_views_and_changed_partitions_again(
    lake: Catalog,
) -> None:
    lake.declare("""
    CREATE VIEW per_hour WITH ('partition.time.schedule' = 'hourly',
                               'partition.time.start' = '2026-11-02') AS
    SELECT window_start, window_end, window_time, SUM(amount) AS amount
    FROM TABLE(TUMBLE(TABLE raw_orders, DESCRIPTOR(order_time), INTERVAL '10' MINUTES))
    GROUP BY window_start, window_end, window_time;
    """)
    write_commits(Path(str(lake.root)) / "raw_orders", [[order_row(12, 1, 75)]], cdf=False)
    for view in ("per_currency", "per_hour"):  # the watermark (10:15) completes the 09:00 hour
        DerivedTable(lake, view).run()
    re_export(lake, 10, 30, [order_row(2, 21, 15)])
    instance = DagsterInstance.ephemeral()
    config = {"table": "raw_orders", "start": "2026-11-02T09:10", "end": "2026-11-02T09:30"}

    done = restate_job().execute_in_process(
        run_config={"ops": {"restate_range": {"config": config}}}, instance=instance,
        resources={"lake": LakeResource(root=str(lake.root)), "pyspark": local_pyspark_resource()},
    )

    assert done.success
    recorded = {(event.asset_key.to_user_string(), event.partition): _values(event)
                for event in done.get_asset_materialization_events()}
    assert set(recorded) == {("per_currency", None), ("per_hour", "2026-11-02-09:00")}
    assert recorded["per_currency", None]["rows_out"] == 3
    hour = recorded["per_hour", "2026-11-02-09:00"]
    assert hour["chronolake/partition"] == "changed"
    assert (hour["-U"], hour["+U"], hour["-D"]) == (1, 1, 1)  # 09:10 corrected, 09:20 gone
    assert instance.get_materialized_partitions(AssetKey("per_hour")) == {"2026-11-02-09:00"}


def _values(event: Any) -> dict[str, Any]:
    metadata = event.materialization.metadata
    return {key: getattr(value, "value", value) for key, value in metadata.items()}


def test_a_rewrite_outside_the_range_is_refused_and_nothing_is_written(lake: Catalog) -> None:
    version = DeltaTable(str(output_path(lake.root, "per_currency"))).version()
    re_export(lake, 10, 40, [order_row(4, 41, 35, "USD")])  # 09:35 is outside [09:10, 09:30)
    with pytest.raises(RestateRangeError, match=r"2026-11-02T09:35:00\.000Z"):
        run_restatement(lake, "raw_orders", start_ms=ms(10), end_ms=ms(30))
    assert DeltaTable(str(output_path(lake.root, "per_currency"))).version() == version


def test_a_hop_that_cannot_be_restated_yet_is_named_before_anything_is_written(
    lake: Catalog,
) -> None:
    lake.declare("""
    CREATE VIEW reordered AS
    SELECT r.order_id, o.order_id AS earlier_id FROM raw_orders AS r JOIN orders AS o
    ON r.currency = o.currency
    AND r.order_time BETWEEN o.order_time AND o.order_time + INTERVAL '10' MINUTES;
    """)
    write_commits(Path(str(lake.root)) / "orders", [ORDERS[:2]])
    DerivedTable(lake, "reordered").run()
    version = DeltaTable(str(output_path(lake.root, "per_currency"))).version()
    re_export(lake, 10, 20, [order_row(2, 21, 15)])
    with pytest.raises(DefinitionError, match=(
        r"cannot restate through view 'reordered': it is an interval join"
    )):
        run_restatement(lake, "raw_orders", start_ms=ms(10), end_ms=ms(20))
    assert DeltaTable(str(output_path(lake.root, "per_currency"))).version() == version


WINDOWS = {  # each view restated, each compared with its own refresh
    "per_currency": "TUMBLE(TABLE raw_orders, DESCRIPTOR(order_time), INTERVAL '10' MINUTES)",
    "hopping": "HOP(TABLE raw_orders, DESCRIPTOR(order_time), INTERVAL '5' MINUTES, "
               "INTERVAL '15' MINUTES)",
    "cumulating": "CUMULATE(TABLE raw_orders, DESCRIPTOR(order_time), INTERVAL '10' MINUTES, "
                  "INTERVAL '30' MINUTES)",
}


def _windows_of(view: str, minute: int) -> list[tuple[int, int]]:
    """The windows (start, end minutes) of `view` holding an order at `minute`."""
    if view == "per_currency":
        return [(minute // 10 * 10, minute // 10 * 10 + 10)]
    if view == "hopping":
        return [(s, s + 15) for s in range(minute // 5 * 5 - 10, minute + 1, 5)]
    cycle = minute // 30 * 30
    return [(cycle, end) for end in range(cycle + 10, cycle + 31, 10) if end > minute]


_ORDER = st.tuples(st.integers(0, 89), st.sampled_from(["EUR", "USD", "GBP"]),
                   st.integers(1, 9))
"""An order: its minute after 09:00, its currency, its amount."""


def _orders(first_id: int, drawn: list[tuple[int, str, int]]) -> list[dict[str, Any]]:
    return [order_row(first_id + i, amount, minute, currency)
            for i, (minute, currency, amount) in enumerate(drawn)]


@settings(max_examples=1, deadline=None, phases=[Phase.explicit, Phase.generate],
          suppress_health_check=list(HealthCheck))
@example(  # the rewrite adds the latest row: it moves the watermark past two windows
    first=[(27, "USD", 6)],
    later=[(69, "GBP", 3), (76, "EUR", 6), (70, "GBP", 6), (71, "EUR", 7), (11, "USD", 5)],
    bounds=(74, 21), replacement=[(61, "EUR", 6), (65, "GBP", 7), (28, "GBP", 5)],
)
@given(
    first=st.lists(_ORDER, min_size=1, max_size=12),
    later=st.lists(_ORDER, max_size=6),  # a second commit: late rows among them
    bounds=st.tuples(st.integers(0, 80), st.integers(1, 40)),
    replacement=st.lists(_ORDER, max_size=6),
)
def test_a_restatement_equals_a_refresh_inside_its_region_and_changes_nothing_outside(
    spark: SparkSession, first: list[tuple[int, str, int]], later: list[tuple[int, str, int]],
    bounds: tuple[int, int], replacement: list[tuple[int, str, int]],
) -> None:
    """docs/design.md, "Restatement": inside the region (the windows overlapping the range,
    and the late rows of their times) the view equals a refresh over the source rewritten by
    OVERWRITE; outside it, the incremental runs' results stay (late rows included)."""
    start, end = bounds[0], bounds[0] + bounds[1]
    inside = [(start + minute % (end - start), currency, amount)
              for minute, currency, amount in replacement]
    with tempfile.TemporaryDirectory() as folder:
        catalog = Catalog(Path(folder), spark)
        catalog.declare(RAW_ORDERS + "".join(
            f"CREATE VIEW {name} AS SELECT window_start, window_end, currency, "
            f"SUM(amount) AS amount, COUNT(*) AS orders FROM TABLE({call}) "
            "GROUP BY window_start, window_end, currency;\n"
            for name, call in WINDOWS.items()))
        raw_orders = Path(folder) / "raw_orders"
        for first_id, drawn in ((0, first), (100, later)):
            if drawn:
                write_commits(raw_orders, [_orders(first_id, drawn)], cdf=False, schema=SCHEMA)
                for name in WINDOWS:
                    DerivedTable(catalog, name).run()
        before = {name: (_view_rows(catalog, name), _watermark(catalog, name))
                  for name in WINDOWS}
        write_deltalake(str(raw_orders), as_table(_orders(200, inside), SCHEMA),
                        mode="overwrite", predicate=between(start, end))

        run_restatement(catalog, "raw_orders", start_ms=ms(start), end_ms=ms(end))

        for name in WINDOWS:
            restated, watermark = _view_rows(catalog, name), _watermark(catalog, name)
            DerivedTable(catalog, name).run(full_refresh=True)
            refreshed = _view_rows(catalog, name)
            # A watermark never goes back: over fewer rows (the latest one rewritten away),
            # a refresh may hold open windows the restatement had closed.
            closed = min(watermark, _watermark(catalog, name))
            assert {r for r in restated if _compared(name, r, start, end, closed)} == {
                r for r in refreshed if _compared(name, r, start, end, closed)}, name
            # outside, what was there stays; the rows the rewrite added may close more windows
            earlier, fired = before[name]
            assert {r for r in restated if not _in_region(name, r, start, end)
                    and not _beyond(r, fired)} == {
                r for r in earlier if not _in_region(name, r, start, end)}, name


def _in_region(view: str, row: tuple[Any, ...], start: int, end: int) -> bool:
    """Whether a row of `_view_rows` lies in the region of [start, end) (minutes): a window
    overlapping it, or a late row of such a window."""
    windows = [row[1:3]] if row[0] == "window" else _windows_of(view, row[2])
    return any(s < end and e > start for s, e in windows)


def _compared(view: str, row: tuple[Any, ...], start: int, end: int, closed: int) -> bool:
    """In the region, and not a window beyond the `closed` watermark (epoch ms)."""
    return _in_region(view, row, start, end) and not _beyond(row, closed)


def _beyond(row: tuple[Any, ...], watermark: int) -> bool:
    """Whether a row of `_view_rows` is a window that `watermark` (epoch ms) had not closed."""
    return row[0] == "window" and ms(row[2]) - 1 > watermark


def _watermark(catalog: Catalog, name: str) -> int:
    """The view's watermark after its last run (epoch ms; none: the smallest long)."""
    watermark = DerivedTable(catalog, name).store.latest().watermark
    return LONG_MIN if watermark is None else watermark


def _view_rows(catalog: Catalog, name: str) -> set[tuple[Any, ...]]:
    """A window view's rows (window minutes, currency, figures) and its late rows (order id,
    minute)."""
    table = table_rows(output_path(catalog.root, name)).to_pylist()
    late = table_rows(late_path(catalog.root, name)).to_pylist()
    return {("window", _minute(r["window_start"]), _minute(r["window_end"]), r["currency"],
             r["amount"], r["orders"]) for r in table} | {
        ("late", r["order_id"], _minute(r["order_time"])) for r in late}
