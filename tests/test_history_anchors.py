"""History as a table against its anchor (issue 41): the same change stream fed to
chronolake's history view (`FOR SYSTEM_TIME ALL`, run after each batch) and to the SCD Type 2
MERGE of Delta's documentation (`_scd2_merge`, one MERGE a batch, on delta-spark).

Keys whose changes arrive in event-time order (ties only within a batch) get the same history
from both, after every batch. A change arriving out of order (a late version or delete, a
correction at the same time) parts them, and so does a change repeating the rate, each in its
own way, worked out by hand below (README.md, "History against a MERGE-based SCD2").

These need Delta's JVM classes in the session: they run in the delta-spark process of
`./dev test` (`CHRONOLAKE_BACKEND=delta-spark pytest -m lake_contract`).
"""

from __future__ import annotations

import random
from datetime import datetime

import pytest
from _rates_history import HISTORY_VIEW_DDL, RATES_DDL, RATES_SCHEMA, at, rate
from _scd2_merge import CURRENT, EFFECTIVE, END, ChangeStream, apply_batch, create_scd2_table
from deltatables import write_commits
from pyspark.sql import SparkSession

from chronolake import Catalog
from chronolake.lake import delta_spark_available
from chronolake.runtime.derived import DerivedTable

pytestmark = [pytest.mark.spark, pytest.mark.lake_contract]

_STREAM = ChangeStream(key="currency", values=("rate",), time="currency_time")
Version = tuple[int, datetime, datetime | None]
"""A history row of one key: rate, valid from (inclusive), valid to (exclusive; None: current)."""


@pytest.fixture(autouse=True)
def _needs_delta(spark: SparkSession) -> None:
    if not delta_spark_available(spark):
        pytest.skip("Delta's JVM classes are not in this session: run with "
                    "CHRONOLAKE_BACKEND=delta-spark (./dev test runs it so)")


# -- keys whose histories part: two batches, worked out by hand --------------------------------

_PARTING = [
    [rate("LATE", 100, 0, "+I"), rate("LATE", 102, 20),
     rate("TIE", 300, 30, "+I"),
     rate("ERASE", 400, 0, "+I"), rate("ERASE", 401, 30),
     rate("LATE_DELETE", 500, 0, "+I"), rate("LATE_DELETE", 501, 20),
     rate("AFTER_DELETE", 600, 0, "+I"), rate("AFTER_DELETE", 600, 20, "-D"),
     rate("SAME_VALUE", 800, 0, "+I")],
    [rate("LATE", 101, 10),  # between 0 and 20
     rate("TIE", 301, 30),  # a correction of the version at 30
     rate("ERASE", 401, 30, "-D"),  # a delete at the version's own time
     rate("LATE_DELETE", 500, 10, "-D"),  # before the version at 20
     rate("AFTER_DELETE", 601, 10),  # before the delete at 20
     rate("SAME_VALUE", 800, 10)],  # in order, but the rate did not change
]
# The final history of each key: chronolake's (valid_from, valid_to) and the MERGE's
# (effective_date, end_date, current).
_CHRONOLAKE: dict[str, set[Version]] = {
    # the late version splits [0, 20)
    "LATE": {(100, at(0), at(10)), (101, at(10), at(20)), (102, at(20), None)},
    # the later arrival at the same time replaces the version
    "TIE": {(301, at(30), None)},
    # the delete at 30 erases the version from 30, and ends the one before
    "ERASE": {(400, at(0), at(30))},
    # the delete at 10 ends the version from 0; the one from 20 is still current
    "LATE_DELETE": {(500, at(0), at(10)), (501, at(20), None)},
    # the late version is valid until the delete at 20
    "AFTER_DELETE": {(600, at(0), at(10)), (601, at(10), at(20))},
    # every change is a version, even one repeating the rate
    "SAME_VALUE": {(800, at(0), at(10)), (800, at(10), None)},
}
_MERGE: dict[str, set[tuple[int, datetime, datetime | None, bool]]] = {
    # appended as the current row: it closes the real current one before its start
    "LATE": {(100, at(0), at(20), False), (102, at(20), at(10), False),
             (101, at(10), None, True)},
    # the corrected row stays, closed at its own start (an empty interval)
    "TIE": {(300, at(30), at(30), False), (301, at(30), None, True)},
    # the erased version stays, as an empty interval
    "ERASE": {(400, at(0), at(30), False), (401, at(30), at(30), False)},
    # the late delete closes the current row (before its start): the key reads as deleted
    "LATE_DELETE": {(500, at(0), at(20), False), (501, at(20), at(10), False)},
    # the deleted key comes back, overlapping the closed row
    "AFTER_DELETE": {(600, at(0), at(20), False), (601, at(10), None, True)},
    # the docs' "values differ" test: no new row
    "SAME_VALUE": {(800, at(0), None, True)},
}


# -- keys whose changes arrive in event-time order --------------------------------------------


def _in_order(keys: int, batches: int, seed: int) -> list[list[dict]]:
    """Each key's changes in event-time order across `batches` (a batch's first change of a
    key is later than its earlier ones), with ties inside a batch, deletes (some of no live
    row), re-inserts after a delete, `-U` rows, and a new rate every change."""
    rng = random.Random(seed)
    value = 10_000
    out: list[list[dict]] = []
    clock = dict.fromkeys((f"K{number}" for number in range(keys)), 0)
    alive = dict.fromkeys(clock, False)
    for _ in range(batches):
        batch = []
        for key in clock:
            clock[key] += 1  # no tie with an earlier batch
            for _ in range(rng.randint(0, 3)):
                roll = rng.random()
                op = "-D" if roll < 0.2 else "-U" if roll < 0.3 else "+U" if alive[key] else "+I"
                value += 1
                batch.append(rate(key, value, clock[key], op))
                if op != "-U":
                    alive[key] = op != "-D"
                clock[key] += rng.choice([0, 1, 1, 2])  # 0: the next change ties with this one
        out.append(batch)
    return out


_IN_ORDER = _in_order(keys=40, batches=2, seed=41)
_COMMITS = [ours + theirs for ours, theirs in zip(_IN_ORDER, _PARTING, strict=True)]


def test_the_in_order_stream_holds_ties_deletes_re_inserts_and_update_befores() -> None:
    """What the in-order keys cover, so that their agreement means something."""
    first, second = _IN_ORDER
    changes = first + second
    ties = [b for batch in _IN_ORDER for a, b in zip(batch, batch[1:], strict=False)
            if (a["currency"], a["currency_time"]) == (b["currency"], b["currency_time"])]
    last_kind = {c["currency"]: c["op"] for c in first if c["op"] != "-U"}
    assert len(ties) >= 5
    assert sum(c["op"] == "-D" for c in changes) >= 10
    assert sum(c["op"] == "-U" for c in changes) >= 5
    # deleted in the first batch, inserted again in the second
    assert any(last_kind.get(c["currency"]) == "-D" and c["op"] == "+I" for c in second)


Histories = dict[str, set[tuple]]


@pytest.fixture(scope="module")
def fed(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory
        ) -> list[tuple[Histories, Histories]]:
    """After each batch: chronolake's history view and the MERGE's SCD2 table, by key."""
    if not delta_spark_available(spark):
        pytest.skip("Delta's JVM classes are not in this session")
    lake = tmp_path_factory.mktemp("anchors")
    write_commits(lake / "rates", [[]], schema=RATES_SCHEMA, cdf=False)
    catalog = Catalog(lake, spark)
    list(catalog.run_script(RATES_DDL + HISTORY_VIEW_DDL))
    view = DerivedTable(catalog, "rates_history")
    scd2 = None
    after_each = []
    for commit in _COMMITS:
        version = write_commits(lake / "rates", [commit], schema=RATES_SCHEMA, cdf=False)
        view.run()
        batch = catalog.changelog("rates", version, version)
        if scd2 is None:
            scd2 = create_scd2_table(spark, str(lake / "scd2"), batch, _STREAM)
        apply_batch(scd2, batch, _STREAM)
        ours: Histories = {}
        for r in catalog.table("rates_history").collect():
            ours.setdefault(r["currency"], set()).add((r["rate"], r["valid_from"], r["valid_to"]))
        merged: Histories = {}  # read anew: `DeltaTable.toDF()` keeps the snapshot it first ran on
        for r in spark.read.format("delta").load(str(lake / "scd2")).collect():
            merged.setdefault(r["currency"], set()).add(
                (r["rate"], r[EFFECTIVE], r[END], r[CURRENT]))
        after_each.append((ours, merged))
    return after_each


def test_in_order_keys_get_the_same_history_after_every_batch(
    fed: list[tuple[Histories, Histories]]
) -> None:
    """Ties inside a batch, deletes, re-inserts and `-U` rows included; the MERGE's current
    row is the one without an end."""
    for ours, merged in fed:
        in_order = {key for key in ours | merged if key.startswith("K")}
        for key in in_order:
            assert all(current == (end is None) for *_, end, current in merged.get(key, ()))
            assert ours.get(key) == {row[:3] for row in merged.get(key, ())}, key
    assert len(in_order) >= 30  # keys with a history after the last batch


@pytest.mark.parametrize("key", sorted(_CHRONOLAKE))
def test_late_changes_ties_and_repeated_rates_part_chronolake_from_the_merge(
    fed: list[tuple[Histories, Histories]], key: str
) -> None:
    """After the first batch both agree; the second part them as worked out above."""
    (ours_first, merged_first), (ours, merged) = fed
    assert ours_first[key] == {row[:3] for row in merged_first[key]}
    assert ours[key] == _CHRONOLAKE[key]
    assert merged[key] == _MERGE[key]
