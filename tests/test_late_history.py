"""Late probe rows meet only the slice of the version history they can need (issue 4, item 5).

A late probe row joins the version of its key valid at its rowtime among all build events so
far. A row not older than its key's latest version in state meets it there and reads no
history (`mark_rows_needing_history`); for the others `history_for_late_rows` cuts the history
to the events that decide them before the join, and the scan reads only the pages of the history
table that hold those rows' keys (`history_lookup`). None may change a single match: ties at the
probe's time go to the later arrival, a `-D` ends (or, at the same time, erases) a version,
`-U` rows are never versions."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable
from deltatables import table_rows, write_commits
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from chronolake import Catalog
from chronolake.joins.history import (
    LOOKUP_KEYS,
    ONE_FILE_MAX_ROWS,
    history_for_late_rows,
    history_lookup,
    mark_rows_needing_history,
    sorted_for_lookups,
    split_marked_rows,
)
from chronolake.joins.temporal import matched_versions
from chronolake.joins.versions import retained_versions
from chronolake.lake.layout import history_path, late_path
from chronolake.runtime.derived import DerivedTable
from chronolake.runtime.stored import from_stored
from chronolake.sql.temporal import TemporalJoinPlan, plan_temporal_join

pytestmark = pytest.mark.spark

BASE = datetime(2026, 11, 2, 9, 0)
_ORDERS = pa.schema([("id", pa.int64()), ("currency", pa.string()),
                     ("order_time", pa.timestamp("us"))])
_RATES = pa.schema([("currency", pa.string()), ("rate", pa.int64()),
                    ("currency_time", pa.timestamp("us")), ("op", pa.string())])
_DDL = """
CREATE TABLE orders (
  id BIGINT, currency STRING, order_time TIMESTAMP(3),
  WATERMARK FOR order_time AS order_time - INTERVAL '5' MINUTE
) WITH ('path' = 'orders', 'changelog' = 'append');
CREATE TABLE rates (
  currency STRING, rate BIGINT, currency_time TIMESTAMP(3),
  WATERMARK FOR currency_time AS currency_time,
  PRIMARY KEY (currency) NOT ENFORCED
) WITH ('path' = 'rates', 'changelog' = 'op-column', 'changelog.op-column' = 'op');
CREATE VIEW enriched AS
SELECT o.id, r.rate FROM orders AS o LEFT JOIN rates FOR SYSTEM_TIME AS OF o.order_time AS r
ON o.currency = r.currency;
"""
_OTHER_KEYS = [f"K{i}" for i in range(8)]


def _at(minute: int) -> datetime:
    return BASE + timedelta(minutes=minute)


def _rate(currency: str, rate: int, minute: int, op: str = "+U") -> dict:
    return {"currency": currency, "rate": rate, "currency_time": _at(minute), "op": op}


def _order(order_id: int, currency: str, minute: int) -> dict:
    return {"id": order_id, "currency": currency, "order_time": _at(minute)}


def _catalog(lake: Path, spark: SparkSession) -> Catalog:
    write_commits(lake / "orders", [[]], schema=_ORDERS, cdf=False)
    write_commits(lake / "rates", [[]], schema=_RATES, cdf=False)
    catalog = Catalog(lake, spark)
    list(catalog.run_script(_DDL))
    return catalog


def _plan(catalog: Catalog) -> TemporalJoinPlan:
    return plan_temporal_join(catalog.spec("enriched").query, catalog.specs())


def _history_commits() -> list[list[dict]]:
    """Many versions of EUR, USD, GBP and of other keys; each list is one commit, in order."""
    others = [_rate(k, 1000 * i + m, m, "+I" if m == 0 else "+U")
              for m in range(0, 120, 10) for i, k in enumerate(_OTHER_KEYS)]
    return [
        [_rate("EUR", 100, 0, "+I"), _rate("USD", 200, 0, "+I"), _rate("GBP", 300, 30, "+I")],
        [_rate("EUR", 101, 10), _rate("EUR", 102, 20), _rate("USD", 201, 15),
         _rate("GBP", 301, 30)],
        # a -U keeps its old time (20); USD is deleted at 25; GBP's -D at 30 arrives last
        # among GBP's three events at 30, so it erases the version from 30
        [_rate("EUR", 102, 20, "-U"), _rate("EUR", 103, 30), _rate("USD", 201, 25, "-D"),
         _rate("GBP", 301, 30, "-D")],
        # 104 ties with 103 at 30 and arrives later: it wins; the -U at 35 is no version
        [_rate("EUR", 104, 30), _rate("EUR", 104, 35, "-U"),
         *[_rate("EUR", 100 + m, m) for m in range(40, 120, 10)],
         _rate("USD", 202, 60, "+I"), *others],
    ]


def _emitted(lake: Path) -> dict[int, int | None]:
    rows = table_rows(str(lake / "_chronolake" / "views" / "enriched"))
    emitted = [(row["id"], row["rate"]) for row in rows.to_pylist()]
    assert len(emitted) == len(dict(emitted)), "a probe row came out twice"
    return dict(emitted)


# The late orders of the second run and the version each must meet.
_LATE = {
    10: ("EUR", 30, 104),   # at the tie's time: the later arrival
    11: ("EUR", 37, 104),   # the -U at 35 changes nothing
    12: ("EUR", 5, 100),    # the key's first version
    13: ("USD", 27, None),  # after the delete at 25
    14: ("USD", 20, 201),   # before it
    15: ("USD", 60, 202),   # re-inserted
    16: ("GBP", 35, None),  # the -D at 30 erased 301
    17: ("EUR", 105, 200),  # one of many later versions
    18: ("XXX", 50, None),  # a key with no version
    19: ("K3", 55, 3050),   # another key with many versions
}


def _count_history_loads(table: DerivedTable, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How often the table's runs load the history table from here on (a one-item list)."""
    loads, load = [0], table.history

    def counted() -> DataFrame | None:
        loads[0] += 1
        return load()

    monkeypatch.setattr(table, "history", counted)
    return loads


def _run_with_late_orders(
    lake: Path, spark: SparkSession, monkeypatch: pytest.MonkeyPatch,
    rates: list[dict], late: dict[int, tuple[str, int, int | None]],
) -> tuple[Catalog, DerivedTable, list[int]]:
    """A first run over the history, then a second with `rates` and the orders `late` (id:
    key, minute, the rate it must meet), all at or below the first run's horizon; checks
    what the second run emits against `late` and the bounded query. Returns the history
    loads of the second run."""
    catalog = _catalog(lake, spark)
    write_commits(lake / "rates", _history_commits(), schema=_RATES, cdf=False)
    write_commits(lake / "orders", [[_order(1, "EUR", 125), _order(2, "K0", 130)]],
                  schema=_ORDERS, cdf=False)
    table = DerivedTable(catalog, "enriched")
    first = table.run()  # watermark min(130 - 5, 110) = 110: state keeps one version per key
    assert first.figures["pending_rows"] == 2, first.figures

    write_commits(lake / "rates", [rates], schema=_RATES, cdf=False)
    write_commits(lake / "orders", [[_order(i, key, minute)
                                     for i, (key, minute, _) in late.items()]],
                  schema=_ORDERS, cdf=False)
    loads = _count_history_loads(table, monkeypatch)
    second = table.run()  # watermark 120; every new order is at or below the horizon 110
    assert second.figures["late_probe_rows"] == len(late)
    assert _emitted(lake) == {i: rate for i, (_, _, rate) in late.items()}

    # The bounded query sees every event; it agrees on each late order.
    bounded = catalog.sql(
        "SELECT o.id, r.rate FROM orders AS o LEFT JOIN rates FOR SYSTEM_TIME AS OF "
        "o.order_time AS r ON o.currency = r.currency"
    ).collect()
    assert {r.id: r.rate for r in bounded if r.id in late} == _emitted(lake)
    return catalog, table, loads


def test_late_probe_rows_meet_the_version_valid_at_their_time(
    tmp_path: Path, spark: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    catalog, table, loads = _run_with_late_orders(
        tmp_path, spark, monkeypatch, [_rate("EUR", 120, 120), _rate("K1", 9999, 120)], _LATE
    )
    assert loads == [1]  # e.g. order 12 is older than EUR's version in state (at 110)

    # What the cut keeps of the stored history (the same rows the second run used).
    history = from_stored(catalog.backend.snapshot(table.history_path))
    late = spark.createDataFrame(
        [(key, _at(minute)) for key, minute, _ in _LATE.values()],
        "currency string, order_time timestamp_ntz",
    )
    kept = history_for_late_rows(history, late, _plan(catalog)).collect()
    minutes = sorted(
        (r.currency, int((r.currency_time - BASE).total_seconds() // 60), r.rate) for r in kept
    )
    eur = [("EUR", 0, 100), ("EUR", 10, 101), ("EUR", 20, 102), ("EUR", 30, 103),
           ("EUR", 30, 104), *[("EUR", m, 100 + m) for m in range(40, 110, 10)]]
    assert minutes == sorted([
        *eur,  # from 0 (at or below 5) to 105; no -U
        ("GBP", 30, 300), ("GBP", 30, 301), ("GBP", 30, 301),  # the tie at 30, -D included
        ("K3", 50, 3050),  # only the version valid at 55
        ("USD", 15, 201), ("USD", 25, 201), ("USD", 60, 202),  # from 15 (at or below 20)
    ])
    assert history.count() == 3 + 4 + 4 + 2 + 8 + 1 + len(_OTHER_KEYS) * 12 + 2


def test_late_rows_not_older_than_state_read_no_history(
    tmp_path: Path, spark: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    # State holds EUR at 110, USD at 60, GBP's -D at 30 and K3 at 110. EUR gets a late
    # version at 110 that arrives after the one in state: it wins the tie.
    late = {20: ("EUR", 110, 777), 21: ("USD", 70, 202), 22: ("GBP", 40, None),
            23: ("XXX", 50, None), 24: ("K3", 110, 3110)}
    _, _, loads = _run_with_late_orders(
        tmp_path, spark, monkeypatch, [_rate("EUR", 777, 110), _rate("K1", 9999, 120)], late
    )
    assert loads == [0]


def _random_history(
    spark: SparkSession, rng: random.Random, *, kinds: tuple[str | None, ...] = ("+I", "+U", "-U",
                                                                               "-D", None)
) -> DataFrame:
    """A changelog with ties, deletes (some at their version's time), `-U` rows and nulls."""
    weights = [{"+I": 3, "+U": 5, "-U": 2, "-D": 2, None: 1}[kind] for kind in kinds]
    rows = []
    for version in range(1, 41):
        for position in range(rng.randint(1, 12)):
            key = rng.choice([*"ABCDEFGH", None]) if rng.random() < 0.05 else rng.choice("ABCDEFGH")
            kind = rng.choices(kinds, weights=weights)[0]
            minute = None if rng.random() < 0.02 else rng.randint(0, 30)
            time = None if minute is None else _at(minute)
            rows.append((key, rng.randint(1, 10**6), time, kind, version, position))
    return spark.createDataFrame(
        rows,
        "currency string, rate long, currency_time timestamp_ntz, _row_kind string, "
        "_commit_version long, _position long",
    )


def _random_late(spark: SparkSession, rng: random.Random) -> DataFrame:
    rows = [(i, rng.choice([*"ABCDEFGHZ", None]), _at(rng.randint(12, 18)), 100, i)
            for i in range(60)]
    return spark.createDataFrame(
        rows, "id long, currency string, order_time timestamp_ntz, _commit_version long, "
        "_position long",
    )


def test_the_cut_history_gives_every_late_row_the_same_version(
    tmp_path: Path, spark: SparkSession
) -> None:
    plan = _plan(_catalog(tmp_path, spark))
    rng = random.Random(5)  # a seed where a floor that counts -U rows, or ties cut, fails
    history, late = _random_history(spark, rng), _random_late(spark, rng)
    cut = history_for_late_rows(history, late, plan)
    full = matched_versions(plan, late, history)
    kept = matched_versions(plan, late, cut)
    assert sorted(kept.collect()) == sorted(full.collect())
    assert len(full.collect()) > 20  # the case is not trivially empty
    assert cut.count() < history.count() / 2  # and the cut does cut

    # The scan's literal filter keeps every event the cut needs.
    lookup = history_lookup(late, plan, history.schema)
    assert lookup.needed and lookup.condition is not None
    looked_up = history.where(lookup.condition)
    from_lookup = matched_versions(plan, late, history_for_late_rows(looked_up, late, plan))
    assert sorted(from_lookup.collect()) == sorted(full.collect())
    assert looked_up.count() < history.count()


def _stages(spark: SparkSession) -> list:
    """Spark's status store's record of each stage so far (one record a stage)."""
    context = spark.sparkContext
    no_quantiles = context._gateway.new_array(context._jvm.double, 0)  # type: ignore[union-attr]
    stages = context._jsc.sc().statusStore().stageList(  # type: ignore[union-attr]
        None, False, False, no_quantiles, None
    )
    return [stages.apply(i) for i in range(stages.size())]


def test_a_late_run_reads_only_the_history_pages_of_its_keys(
    tmp_path: Path, spark: SparkSession
) -> None:
    catalog = _catalog(tmp_path, spark)
    keys = [f"C{i:03d}" for i in range(200)]
    history = [_rate(key, 1000 * i + m, m, "+I" if m == 0 else "+U")
               for m in range(60) for i, key in enumerate(keys)]
    write_commits(tmp_path / "rates", [history], schema=_RATES, cdf=False)
    write_commits(tmp_path / "orders", [[_order(1, "C000", 70)]], schema=_ORDERS, cdf=False)
    table = DerivedTable(catalog, "enriched")
    table.run()  # watermark 59: state keeps each key's version at 59

    # Orders older than their keys' versions in state: only the history answers them.
    write_commits(tmp_path / "rates", [[_rate("C000", 5, 61)]], schema=_RATES, cdf=False)
    write_commits(tmp_path / "orders", [[_order(10, "C007", 10), _order(11, "C123", 20),
                                         _order(12, "C199", 30)]], schema=_ORDERS, cdf=False)
    before = {stage.stageId() for stage in _stages(spark)}
    second = table.run()
    read = sum(stage.inputRecords() for stage in _stages(spark) if stage.stageId() not in before)

    assert second.figures["late_probe_rows"] == 3
    assert _emitted(tmp_path) == {10: 7_010, 11: 123_020, 12: 199_030}
    # A key's 60 events lie on a page or two of the history; the run reads those pages (and
    # state's 200 versions, a few times), not the history's 12,000 events.
    assert read < len(history) / 4, read


@pytest.mark.parametrize("rows", [1_000, ONE_FILE_MAX_ROWS + 1], ids=["one file", "ranges"])
def test_history_files_hold_disjoint_key_ranges_sorted_by_key_and_time(
    tmp_path: Path, spark: SparkSession, rows: int
) -> None:
    plan = _plan(_catalog(tmp_path, spark))
    events = _random_history(spark, random.Random(3)).where(F.col("currency").isNotNull())
    adaptive = spark.conf.get("spark.sql.adaptive.enabled")
    spark.conf.set("spark.sql.adaptive.enabled", "false")  # keep every range partition
    try:
        files = sorted_for_lookups(events.repartition(3), plan, rows).rdd.glom().collect()
    finally:
        spark.conf.set("spark.sql.adaptive.enabled", adaptive)
    files = [f for f in files if f]
    assert (len(files) == 1) == (rows <= ONE_FILE_MAX_ROWS)
    for rows_of_file in files:
        order = [(r.currency, r.currency_time is not None, r.currency_time) for r in rows_of_file]
        assert order == sorted(order)
    ranges = sorted((f[0].currency, f[-1].currency) for f in files)
    assert all(a[1] < b[0] for a, b in zip(ranges, ranges[1:], strict=False))
    assert sum(len(f) for f in files) == events.count()


def test_late_rows_of_many_keys_read_the_history_whole(tmp_path: Path, spark: SparkSession) -> None:
    plan = _plan(_catalog(tmp_path, spark))
    history = _random_history(spark, random.Random(1))
    many = spark.range(LOOKUP_KEYS + 1).select(
        F.format_string("K%d", "id").alias("currency"), F.lit(_at(1)).alias("order_time")
    )
    assert history_lookup(many, plan, history.schema) == (True, None)
    assert history_lookup(many.limit(0), plan, history.schema) == (False, None)


def test_late_rows_state_answers_meet_the_version_the_history_gives(
    tmp_path: Path, spark: SparkSession
) -> None:
    plan = _plan(_catalog(tmp_path, spark))
    rng = random.Random(11)
    # Changelogs carry a kind on every row; state never keeps a row without one.
    history = _random_history(spark, rng, kinds=("+I", "+U", "-U", "-D"))
    horizon = _at(15)
    horizon_ms = int(horizon.replace(tzinfo=UTC).timestamp() * 1000)
    state = retained_versions(history, plan.build_keys, "currency_time", horizon_ms)
    arriving = _random_history(spark, rng, kinds=("+I", "+U", "-U", "-D")).withColumn(
        "_commit_version", F.col("_commit_version") + 100
    )
    late = spark.createDataFrame(
        [(i, rng.choice([*"ABCDEFGHZ", None]), _at(rng.randint(11, 15)), 200, i)
         for i in range(80)],
        "id long, currency string, order_time timestamp_ntz, _commit_version long, "
        "_position long",
    )
    events = state.unionByName(arriving)
    answered, older = split_marked_rows(
        mark_rows_needing_history(late, events, plan, horizon_ms)
    )
    from_state = matched_versions(plan, answered, events).collect()
    from_history = matched_versions(plan, answered, history.unionByName(arriving)).collect()
    assert sorted(from_state) == sorted(from_history)
    counts = (answered.count(), len(from_state), older.count())
    assert counts[0] + counts[2] == late.count()
    assert counts[0] > 20 and counts[1] > 10 and counts[2] > 10, counts  # both kinds occur


def test_a_run_without_late_rows_or_new_build_events_appends_nothing_to_them(
    tmp_path: Path, spark: SparkSession
) -> None:
    """The figures prove the side table's and the history's appends empty: no job and no
    commit for them; the first run still creates the side table, so readers find it."""
    catalog = _catalog(tmp_path, spark)
    write_commits(tmp_path / "rates", _history_commits(), schema=_RATES, cdf=False)
    write_commits(tmp_path / "orders", [[_order(1, "EUR", 125)]], schema=_ORDERS, cdf=False)
    table = DerivedTable(catalog, "enriched")
    table.run()
    late = DeltaTable(str(late_path(tmp_path, "enriched")))
    history = DeltaTable(str(history_path(tmp_path, "enriched")))
    assert table_rows(late_path(tmp_path, "enriched")).num_rows == 0
    versions = late.version(), history.version()

    write_commits(tmp_path / "orders", [[_order(2, "EUR", 126)]], schema=_ORDERS, cdf=False)
    second = table.run()
    assert (second.figures["late_rows"], second.figures["build_rows_in"]) == (0, 0)
    late.update_incremental()
    history.update_incremental()
    assert (late.version(), history.version()) == versions

    write_commits(tmp_path / "rates", [[_rate("EUR", 300, 130)]], schema=_RATES, cdf=False)
    write_commits(tmp_path / "orders", [[_order(3, "EUR", 140)]], schema=_ORDERS, cdf=False)
    third = table.run()  # watermark min(140 - 5, 130): orders 1 and 2 are emitted
    history.update_incremental()
    assert third.figures["build_rows_in"] == 1 and history.version() == versions[1] + 1
    assert _emitted(tmp_path) == {1: 210, 2: 210}  # EUR's version from 110


def test_a_run_reads_its_inputs_files_once(tmp_path: Path, spark: SparkSession) -> None:
    """The watermark job reads the inputs' new files and the run holds their rows from then
    on: joining, state, output and figures never open those files again (on an object store
    each read of a file is a request). With the files moved away once the watermarks are
    assigned, the run still commits every order with its version."""
    catalog = _catalog(tmp_path, spark)
    write_commits(tmp_path / "rates", _history_commits(), schema=_RATES, cdf=False)
    orders = [_order(order, key, minute) for order, (key, minute, _) in _LATE.items()]
    held = _order(99, "EUR", 200)  # above the watermark (the rates' 110): stays in state
    write_commits(tmp_path / "orders", [[*orders, held]], schema=_ORDERS, cdf=False)
    table = DerivedTable(catalog, "enriched")
    plan = table.prepare()
    assert plan is not None
    reads = table.assign(table.read(plan))
    files = [path for table_name in ("orders", "rates")
             for path in (tmp_path / table_name).rglob("*.parquet")
             if "_delta_log" not in path.parts]
    aside = tmp_path / "aside"
    aside.mkdir()
    moved = {path: aside / f"{number}.parquet" for number, path in enumerate(files)}
    for path, away in moved.items():
        path.rename(away)
    try:
        result = table.commit(plan, reads, table.operate(plan, reads))
    finally:
        for path, away in moved.items():
            away.rename(path)
    assert _emitted(tmp_path) == {order: version for order, (_, _, version) in _LATE.items()}
    assert result.figures["pending_rows"] == 1
