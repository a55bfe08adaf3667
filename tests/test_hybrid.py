"""The hybrid source (snapshot at v, then the change data feed from v + 1) and the
processing-time temporal join that waits for it: the seed's FLINK-19830 story on Delta."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest
from _crash import SIGKILL_RETURNCODE, run_in_subprocess
from deltalake import DeltaTable
from deltatables import delete_rows, table_rows, update_rows, write_commits
from pyspark.sql import SparkSession

from chronolake import Catalog
from chronolake.catalog.checkpoint import ReadPhase, RunIntent
from chronolake.faults import FaultPoint
from chronolake.lake.changelog import ARRIVAL_ORDER, COMMIT_VERSION, ROW_KIND
from chronolake.location import LocationLike
from chronolake.runtime.derived import DerivedTable
from chronolake.runtime.inputs import (
    assign_watermarks,
    initial_position,
    read_input,
)
from chronolake.schema import TableSpec
from chronolake.watermarks import Watermark
from chronolake.watermarks.assigner import WATERMARK_COLUMN

pytestmark = pytest.mark.spark

_DDL = """
CREATE TABLE orders (id BIGINT, currency STRING, proc_time AS PROCTIME())
WITH ('path' = 'orders', 'changelog' = 'append');
CREATE TABLE rates_hybrid (
  currency STRING, rate DECIMAL(38, 10), PRIMARY KEY (currency) NOT ENFORCED
) WITH ('path' = 'rates', 'changelog' = 'cdf', 'scan.startup.mode' = 'snapshot-then-changelog');
CREATE TABLE rates_versioned (
  currency STRING, rate DECIMAL(38, 10), currency_time TIMESTAMP(3),
  WATERMARK FOR currency_time AS currency_time, PRIMARY KEY (currency) NOT ENFORCED
) WITH ('path' = 'rates', 'changelog' = 'cdf');
CREATE TABLE cdc_hybrid (
  currency STRING, rate DECIMAL(38, 10), PRIMARY KEY (currency) NOT ENFORCED
) WITH ('path' = 'cdc', 'changelog' = 'op-column', 'changelog.op-column' = 'op',
        'scan.startup.mode' = 'snapshot-then-changelog');
CREATE VIEW enriched AS
SELECT o.id, r.rate FROM orders AS o
LEFT JOIN rates_hybrid FOR SYSTEM_TIME AS OF o.proc_time AS r ON o.currency = r.currency;
CREATE VIEW enriched_waiting AS
SELECT o.id, r.rate FROM orders AS o
LEFT JOIN rates_versioned FOR SYSTEM_TIME AS OF o.proc_time AS r ON o.currency = r.currency;
"""

_RATE = pa.schema([("currency", pa.string()), ("rate", pa.decimal128(38, 10)),
                   ("currency_time", pa.timestamp("us"))])
_ORDER = pa.schema([("id", pa.int64()), ("currency", pa.string())])


def _null_last(row: tuple) -> tuple:
    """Sort key for (id, value-or-None) rows, so a doubled row fails an assert, not sorted()."""
    return tuple((value is None, 0 if value is None else value) for value in row)


def _rates(*rows: tuple[str, str]) -> list[dict[str, object]]:
    return [{"currency": c, "rate": Decimal(r), "currency_time": None} for c, r in rows]


def _set_rate(path: LocationLike, currency: str, rate: str) -> int:
    return update_rows(path, f"currency = '{currency}'",
                       {"rate": f"CAST('{rate}' AS DECIMAL(38, 10))"})


def _orders(path: LocationLike, *rows: tuple[int, str]) -> int:
    return write_commits(path, [[{"id": i, "currency": c}] for i, c in rows], schema=_ORDER,
                         cdf=False)


def _d(value: str) -> Decimal:
    return Decimal(value).quantize(Decimal("1e-10"))


def _emitted(catalog: Catalog, view: str) -> list[tuple[int, Decimal | None]]:
    path = catalog.root / "_chronolake" / "views" / view
    if not DeltaTable.is_deltatable(str(path)):
        return []
    rows = table_rows(str(path)).to_pylist()
    return sorted(((r["id"], r["rate"]) for r in rows), key=_null_last)


@pytest.fixture
def lake(tmp_path: Path, spark: SparkSession) -> Catalog:
    """rates v0: EUR 1.10, USD 1.00; v1: EUR 1.12. An empty orders table."""
    write_commits(tmp_path / "rates", [_rates(("EUR", "1.10"), ("USD", "1.00"))], schema=_RATE)
    _set_rate(tmp_path / "rates", "EUR", "1.12")
    write_commits(tmp_path / "orders", [[]], schema=_ORDER, cdf=False)
    catalog = Catalog(tmp_path, spark)
    list(catalog.run_script(_DDL))
    return catalog


def _spec(catalog: Catalog, name: str) -> TableSpec:
    spec = catalog.spec(name)
    assert isinstance(spec, TableSpec)
    return spec


def test_snapshot_then_changelog_loses_nothing_and_doubles_nothing(lake: Catalog) -> None:
    spec = _spec(lake, "rates_hybrid")
    rates = lake.root / "rates"
    read = read_input(lake, spec, initial_position(spec), 1, derived="t")
    assert WATERMARK_COLUMN not in read.rows.columns  # reading assigns nothing
    snapshot = assign_watermarks(read)
    assert initial_position(spec).phase == ReadPhase.SNAPSHOT
    assert snapshot.switched_at == 1 and snapshot.phase == ReadPhase.CHANGELOG
    assert snapshot.watermark.use_processing_time
    rows = snapshot.rows.orderBy("currency").collect()
    assert [(r.currency, r.rate, r[ROW_KIND], r[COMMIT_VERSION]) for r in rows] == [
        ("EUR", _d("1.12"), "+I", 1), ("USD", _d("1.00"), "+I", 1)]  # v1's state, no -U/+U

    delete_rows(rates, "currency = 'USD'")
    _set_rate(rates, "EUR", "1.15")
    changes = assign_watermarks(read_input(lake, spec, snapshot.position, 3, derived="t"))
    assert changes.switched_at is None and changes.watermark.use_processing_time
    rows = changes.rows.orderBy(*ARRIVAL_ORDER).collect()
    assert [(r.currency, r[ROW_KIND], r[COMMIT_VERSION]) for r in rows] == [
        ("USD", "-D", 2), ("EUR", "-U", 3), ("EUR", "+U", 3)]  # from v2 on: nothing twice


def test_source_without_watermark_follows_processing_time(lake: Catalog) -> None:
    spec = _spec(lake, "orders")
    read = assign_watermarks(read_input(lake, spec, initial_position(spec), 0, derived="t"))
    assert read.watermark == Watermark.PROCESSING_TIME and read.switched_at is None


def test_op_column_hybrid_snapshot_is_the_changes_applied(lake: Catalog) -> None:
    cdc = pa.schema([("currency", pa.string()), ("rate", pa.decimal128(38, 10)),
                     ("op", pa.string())])
    write_commits(lake.root / "cdc", [
        [{"currency": "EUR", "rate": Decimal("1.10"), "op": "+I"},
         {"currency": "USD", "rate": Decimal("1.00"), "op": "+I"}],
        [{"currency": "USD", "rate": Decimal("1.00"), "op": "-D"},
         {"currency": "EUR", "rate": Decimal("1.10"), "op": "-U"},
         {"currency": "EUR", "rate": Decimal("1.12"), "op": "+U"}],
    ], schema=cdc, cdf=False)
    spec = _spec(lake, "cdc_hybrid")
    snapshot = read_input(lake, spec, initial_position(spec), 1, derived="t")
    rows = snapshot.rows.collect()
    assert [(r.currency, r.rate, r[ROW_KIND]) for r in rows] == [("EUR", _d("1.12"), "+I")]
    assert "op" not in snapshot.rows.columns


def test_probe_rows_before_and_during_the_snapshot_all_meet_it(lake: Catalog) -> None:
    """The seed's failure, on purpose: orders land before the build side's snapshot is read
    and while it is (after the run fixed v). None comes out unmatched."""
    rates, orders = lake.root / "rates", lake.root / "orders"
    before = _orders(orders, (1, "EUR"), (2, "USD"))
    table = DerivedTable(lake, "enriched")
    # What a run killed after fixing its intent leaves: v = 1 for rates. Commits that land
    # now belong to the next run, the snapshot is read at v = 1 whatever lands meanwhile.
    table.store.write_intent(RunIntent(run=1, end_versions={"orders": before, "rates_hybrid": 1}))
    _set_rate(rates, "EUR", "1.15")
    write_commits(rates, [_rates(("GBP", "0.80"))], schema=_RATE)
    _orders(orders, (3, "EUR"), (4, "GBP"))

    first = table.run()
    assert (first.source_phases["rates_hybrid"], first.switch_versions) == (
        ReadPhase.CHANGELOG, {"rates_hybrid": 1})
    assert first.processing_time and first.waiting_reason is None
    assert _emitted(lake, "enriched") == [(1, _d("1.12")), (2, _d("1.00"))]

    second = table.run()  # the change data feed from v + 1 = 2: EUR 1.15, GBP
    assert second.input_versions["rates_hybrid"] == (2, 3) and second.switch_versions == {}
    assert _emitted(lake, "enriched") == [
        (1, _d("1.12")), (2, _d("1.00")), (3, _d("1.15")), (4, _d("0.80"))]
    assert second.figures["unmatched_rows"] == 0


@pytest.mark.slow
def test_a_run_killed_between_the_phases_reads_the_same_snapshot_again(lake: Catalog) -> None:
    """Killed after writing its output, before its checkpoint: the input is still in its
    snapshot phase; the rerun reads the snapshot at the same v and writes nothing twice."""
    rates, orders = lake.root / "rates", lake.root / "orders"
    _orders(orders, (1, "EUR"), (2, "USD"))
    crashed = run_in_subprocess(lake.root, "enriched", fault=FaultPoint.AFTER_OUTPUT.value)
    assert crashed.returncode == SIGKILL_RETURNCODE, crashed.stderr[-3000:]
    table = DerivedTable(lake, "enriched")
    assert table.store.latest().run == 0
    assert _emitted(lake, "enriched") == [(1, _d("1.12")), (2, _d("1.00"))]

    _set_rate(rates, "EUR", "1.15")  # lands between the crash and the rerun: version 2
    _orders(orders, (3, "EUR"))
    rerun = table.run()
    assert rerun.run == 1 and rerun.switch_versions == {"rates_hybrid": 1}
    assert _emitted(lake, "enriched") == [(1, _d("1.12")), (2, _d("1.00"))]
    table.run()
    assert _emitted(lake, "enriched") == [(1, _d("1.12")), (2, _d("1.00")), (3, _d("1.15"))]


def test_build_side_that_never_switches_holds_the_probe(lake: Catalog) -> None:
    """A versioned build side (WATERMARK FOR, not hybrid) follows event time forever: probe
    rows stay pending rather than come out unmatched, and the run says why."""
    _orders(lake.root / "orders", (1, "EUR"), (2, "USD"))
    table = DerivedTable(lake, "enriched_waiting")
    first = table.run()
    assert first.figures["pending_rows"] == 2 and first.figures["rows_out"] == 0
    assert first.waiting_reason is not None
    assert "the build side 'rates_versioned' has not switched to processing time" in (
        first.waiting_reason)
    assert "'scan.startup.mode' = 'snapshot-then-changelog'" in first.waiting_reason
    _set_rate(lake.root / "rates", "EUR", "1.15")
    second = table.run()
    assert second.figures["pending_rows"] == 2 and second.waiting_reason == first.waiting_reason
    assert _emitted(lake, "enriched_waiting") == []
