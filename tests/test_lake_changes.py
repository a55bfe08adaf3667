"""Change data feed, appends and snapshots read by the delta-rs backend from real Delta tables."""

from __future__ import annotations

import datetime as dt
import random
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from deltatables import (
    commit_files,
    delete_rows,
    enable_cdf,
    require_features,
    rewrite_files,
    update_rows,
    write_commits,
)
from pyspark.sql import Row, SparkSession

from chronolake.errors import SourceError
from chronolake.lake import ARRIVAL_ORDER, DeltaRsBackend, LakeBackend
from chronolake.spark import session as spark_session

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def backend(spark: SparkSession) -> LakeBackend:
    return DeltaRsBackend(spark)


@pytest.fixture(scope="module")
def rates(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """v0 two inserts, v1 insert, v2 update, v3 delete, v4 one commit of two files."""
    path = tmp_path_factory.mktemp("lake") / "rates"
    write_commits(path, [[{"currency": "EUR", "rate": 1.0}, {"currency": "USD", "rate": 2.0}]])
    write_commits(path, [[{"currency": "GBP", "rate": 3.0}]])
    update_rows(path, "currency = 'EUR'", {"rate": "rate + 10"})
    delete_rows(path, "currency = 'USD'")
    commit_files(
        path,
        [[{"currency": "JPY", "rate": 5.0}], [{"currency": "CHF", "rate": 4.0},
                                              {"currency": "AUD", "rate": 6.0}]],
    )
    return path


@pytest.fixture(scope="module")
def feed(backend: LakeBackend, rates: Path) -> list[Row]:
    return backend.changes(rates, 0).orderBy(*ARRIVAL_ORDER).collect()


def test_changes_map_change_types_to_row_kinds_in_arrival_order(feed: list[Row]) -> None:
    assert [(r.currency, r.rate, r._row_kind, r._commit_version) for r in feed] == [
        ("EUR", 1.0, "+I", 0),
        ("USD", 2.0, "+I", 0),
        ("GBP", 3.0, "+I", 1),
        ("EUR", 1.0, "-U", 2),
        ("EUR", 11.0, "+U", 2),
        ("USD", 2.0, "-D", 3),
        ("JPY", 5.0, "+I", 4),
        ("CHF", 4.0, "+I", 4),
        ("AUD", 6.0, "+I", 4),
    ]


def test_changes_carry_the_commit_timestamps_of_the_log(
    backend: LakeBackend, rates: Path, feed: list[Row]
) -> None:
    logged = {c.version: c.timestamp_ms for c in backend.commits(rates, 0)}
    read = {r._commit_version: r._commit_timestamp for r in feed}
    epoch = dt.datetime(1970, 1, 1)
    assert {v: round((t - epoch).total_seconds() * 1000) for v, t in read.items()} == logged


def test_a_commit_of_several_files_keeps_file_then_row_order(feed: list[Row]) -> None:
    last = [r for r in feed if r._commit_version == 4]
    assert [r._position for r in last] == [0, 1 << 32, (1 << 32) + 1]


def test_retractions_precede_additions_within_a_commit(feed: list[Row]) -> None:
    update = [r for r in feed if r._commit_version == 2]
    assert [r._row_kind for r in update] == ["-U", "+U"]
    assert update[0]._position < 0 <= update[1]._position


def test_changes_of_a_version_range(backend: LakeBackend, rates: Path) -> None:
    rows = backend.changes(rates, 2, 3).orderBy(*ARRIVAL_ORDER).collect()
    assert [(r.currency, r._row_kind, r._commit_version) for r in rows] == [
        ("EUR", "-U", 2),
        ("EUR", "+U", 2),
        ("USD", "-D", 3),
    ]


def test_commits_come_from_the_log(backend: LakeBackend, rates: Path) -> None:
    commits = backend.commits(rates, 1, 3)
    assert [(c.version, c.operation, c.is_data_change) for c in commits] == [
        (1, "WRITE", True),
        (2, "UPDATE", True),
        (3, "DELETE", True),
    ]
    assert commits[0].timestamp_ms <= commits[1].timestamp_ms <= commits[2].timestamp_ms
    assert backend.latest_version(rates) == 4


def test_snapshot_at_an_old_version_and_the_latest(backend: LakeBackend, rates: Path) -> None:
    old = backend.snapshot(rates, 1)
    assert old.columns == ["currency", "rate"]
    assert sorted(map(tuple, old.collect())) == [("EUR", 1.0), ("GBP", 3.0), ("USD", 2.0)]
    latest = sorted(map(tuple, backend.snapshot(rates).collect()))
    assert latest == [("AUD", 6.0), ("CHF", 4.0), ("EUR", 11.0), ("GBP", 3.0), ("JPY", 5.0)]


def test_appends_refuse_a_commit_that_removes_rows(backend: LakeBackend, rates: Path) -> None:
    with pytest.raises(SourceError, match=r"version 2 \(UPDATE\) removes rows from a 'changelog' "
                                          r"= 'append' table.*'changelog' = 'cdf'"):
        backend.appends(rates, 0)


def test_appends_read_added_rows_as_inserts(backend: LakeBackend, tmp_path: Path) -> None:
    path = tmp_path / "orders"
    write_commits(path, [[{"id": 1}, {"id": 2}], [{"id": 3}]], cdf=False)
    rows = backend.appends(path, 1).collect()
    assert [(r.id, r._row_kind, r._commit_version, r._position) for r in rows] == [(3, "+I", 1, 0)]


DAY = dt.date(2024, 1, 2)


def _partitioned_events(path: Path) -> None:
    """v0: two rows in two partitions (one with a null value); v1: an update in one."""
    write_commits(
        path,
        [[{"id": 1, "day": DAY, "shard": 7}, {"id": 2, "day": None, "shard": 8}]],
        partition_by=["day", "shard"],
    )
    update_rows(path, "id = 1", {"id": "10"})


def test_partitioned_table_restores_typed_partition_values(
    backend: LakeBackend, tmp_path: Path
) -> None:
    path = tmp_path / "events"
    _partitioned_events(path)
    snapshot = backend.snapshot(path)
    assert [(f.name, f.dataType.simpleString()) for f in snapshot.schema.fields] == [
        ("id", "bigint"), ("day", "date"), ("shard", "bigint")
    ]
    assert sorted(map(tuple, snapshot.collect()), key=str) == [(10, DAY, 7), (2, None, 8)]
    changes = backend.changes(path, 1).orderBy(*ARRIVAL_ORDER).collect()
    assert [(r.id, r.day, r.shard, r._row_kind) for r in changes] == [
        (1, DAY, 7, "-U"),
        (10, DAY, 7, "+U"),
    ]


def test_not_a_delta_table(backend: LakeBackend, tmp_path: Path) -> None:
    with pytest.raises(SourceError, match=r"nowhere: not a Delta table \(no _delta_log.*'path'"):
        backend.changes(tmp_path / "nowhere", 0)
    assert not backend.is_delta_table(tmp_path / "nowhere")


def test_start_version_beyond_the_latest(backend: LakeBackend, rates: Path) -> None:
    with pytest.raises(SourceError, match="start version 9 is beyond the latest version 4"):
        backend.changes(rates, 9)
    with pytest.raises(SourceError, match=r"version range 3\.\.2 is not within"):
        backend.commits(rates, 3, 2)
    with pytest.raises(SourceError, match=r"version 7 does not exist; expected a version in 0"):
        backend.snapshot(rates, 7)


def test_cdf_table_without_change_data_feed(backend: LakeBackend, tmp_path: Path) -> None:
    path = tmp_path / "plain"
    write_commits(path, [[{"id": 1}]], cdf=False)
    with pytest.raises(
        SourceError,
        match=r"change data feed is not enabled at version 0 .*delta\.enableChangeDataFeed "
        r"= true.*set_table_properties.*full refresh",
    ):
        backend.changes(path, 0)


def test_change_data_feed_enabled_later_covers_later_versions(
    backend: LakeBackend, tmp_path: Path
) -> None:
    path = tmp_path / "late_cdf"
    write_commits(path, [[{"id": 1}]], cdf=False)
    enabled = enable_cdf(path)
    write_commits(path, [[{"id": 2}]])
    with pytest.raises(SourceError, match="not enabled at version 0"):
        backend.changes(path, 0)
    rows = backend.changes(path, enabled).collect()
    assert [(r.id, r._row_kind) for r in rows] == [(2, "+I")]


def test_log_cleaned_versions(backend: LakeBackend, tmp_path: Path) -> None:
    path = tmp_path / "cleaned"
    write_commits(path, [[{"id": 1}], [{"id": 2}], [{"id": 3}]])
    DeltaTable(str(path)).create_checkpoint()
    for version in (0, 1):
        (path / "_delta_log" / f"{version:020d}.json").unlink()
    with pytest.raises(
        SourceError, match=r"version\(s\) 0\.\.1 are no longer in the Delta log.*full refresh"
    ):
        backend.changes(path, 0)
    with pytest.raises(SourceError, match="version 0 can no longer be loaded"):
        backend.snapshot(path, 0)


def test_vacuumed_versions(backend: LakeBackend, tmp_path: Path) -> None:
    path = tmp_path / "vacuumed"
    write_commits(path, [[{"id": 1}, {"id": 2}]])
    delete_rows(path, "id = 1")
    DeltaTable(str(path)).vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    with pytest.raises(
        SourceError, match=r"data files of version\(s\) 0 are missing \(removed by VACUUM\)"
    ):
        backend.changes(path, 0)
    with pytest.raises(SourceError, match=r"version\(s\) 0 are missing"):
        backend.snapshot(path, 0)


def _replay(feed: list[Row], upto: int) -> list[tuple[int, int]]:
    """Brute-force reference: apply the changelog to a multiset of rows."""
    state: list[tuple[int, int]] = []
    for r in feed:
        if r._commit_version > upto:
            break
        if r._row_kind in ("+I", "+U"):
            state.append((r.k, r.v))
        else:
            state.remove((r.k, r.v))
    return sorted(state)


def test_replaying_the_feed_rebuilds_the_snapshots(backend: LakeBackend, tmp_path: Path) -> None:
    """Seeded random inserts, single- and multi-row updates and deletes."""
    rng = random.Random(7)
    path = tmp_path / "random"
    write_commits(path, [[{"k": k, "v": 0} for k in range(6)]])
    next_key = 6
    for _ in range(8):
        action = rng.choice(["insert", "update", "update_many", "delete"])
        if action == "insert":
            write_commits(path, [[{"k": next_key, "v": 0}, {"k": next_key + 1, "v": 0}]])
            next_key += 2
        elif action == "update":
            update_rows(path, f"k = {rng.randrange(next_key)}", {"v": "v + 1"})
        elif action == "update_many":
            update_rows(path, f"k % 2 = {rng.randrange(2)}", {"v": "v + 10"})
        else:
            delete_rows(path, f"k = {rng.randrange(next_key)}")
    latest = backend.latest_version(path)
    feed = backend.changes(path, 0).orderBy(*ARRIVAL_ORDER).collect()
    for version in (latest // 2, latest):
        snapshot = sorted(map(tuple, backend.snapshot(path, version).collect()))
        assert _replay(feed, version) == snapshot
    kinds_per_key: dict[tuple[int, int], list[str]] = {}
    for r in feed:
        kinds_per_key.setdefault((r._commit_version, r.k), []).append(r._row_kind)
    assert set(map(tuple, kinds_per_key.values())) <= {("+I",), ("-D",), ("-U", "+U")}


def test_tables_mapping_columns_by_name_read_by_their_logical_names(
    backend: LakeBackend, tmp_path: Path
) -> None:
    path = tmp_path / "mapped"
    write_deltalake(str(path), pa.table({"k": [1], "v": ["a"]}),
                    configuration={"delta.columnMapping.mode": "name"})
    write_deltalake(str(path), pa.table({"k": [2], "v": ["b"]}), mode="append")
    assert sorted(map(tuple, backend.snapshot(path).collect())) == [(1, "a"), (2, "b")]
    appended = backend.appends(path, 0).orderBy(*ARRIVAL_ORDER)
    assert [(r.k, r.v, r._row_kind) for r in appended.collect()] == [
        (1, "a", "+I"), (2, "b", "+I")]
    assert appended.columns[:2] == ["k", "v"]


def test_a_table_feature_chronolake_cannot_read_is_refused_by_name(
    backend: LakeBackend, tmp_path: Path
) -> None:
    path = tmp_path / "widened"
    write_deltalake(str(path), pa.table({"k": [1]}))
    require_features(path, {"minReaderVersion": 3, "minWriterVersion": 7,
                    "readerFeatures": ["typeWidening"], "writerFeatures": ["typeWidening"]},
             {"delta.enableTypeWidening": "true"})
    for read in (lambda: backend.snapshot(path, 1), lambda: backend.appends(path, 0)):
        with pytest.raises(SourceError, match=r"Delta table feature\(s\) 'typeWidening'.*"
                           "cannot read; nothing was read or written"):
            read()


def test_column_mapping_by_id_is_refused_by_name(backend: LakeBackend, tmp_path: Path) -> None:
    path = tmp_path / "by_id"
    write_deltalake(str(path), pa.table({"k": [1]}))
    require_features(path, {"minReaderVersion": 2, "minWriterVersion": 5},
             {"delta.columnMapping.mode": "id"})
    with pytest.raises(SourceError, match="maps columns by 'id'.*cannot read"):
        backend.appends(path, 0)


def test_a_column_named_as_a_changelogs_own_is_refused_by_name(
    backend: LakeBackend, tmp_path: Path
) -> None:
    """A table written from Delta's change feed keeps its `_commit_version`: read as a
    changelog it would clash with the changelog's own column."""
    path = tmp_path / "from_a_feed"
    write_deltalake(str(path), pa.table({"k": [1], "_commit_version": [7]}))
    for read in (lambda: backend.appends(path, 0), lambda: backend.changes(path, 0)):
        with pytest.raises(SourceError, match="the column\\(s\\) '_commit_version', whose names "
                           "chronolake's changelogs use for themselves.*nothing was read; rename"):
            read()


def test_many_files_keep_their_order_and_the_session_conf(
    spark: SparkSession, backend: LakeBackend, tmp_path: Path
) -> None:
    path = tmp_path / "many"
    commit_files(path, [[{"id": i}] for i in range(40)])
    key = "spark.sql.sources.parallelPartitionDiscovery.threshold"
    before = spark.conf.get(key)
    rows = backend.appends(path, 0).orderBy(*ARRIVAL_ORDER).collect()
    assert [r.id for r in rows] == list(range(40))
    assert spark.conf.get(key) == before


def test_commit_without_change_data_reads_removed_then_added_files(
    backend: LakeBackend, tmp_path: Path
) -> None:
    path = tmp_path / "rewritten"
    write_commits(path, [[{"id": 1, "v": "a"}, {"id": 2, "v": "b"}]])
    version = rewrite_files(path, [{"id": 2, "v": "b"}, {"id": 3, "v": "c"}])
    log = (path / "_delta_log" / f"{version:020d}.json").read_text()
    assert '"cdc"' not in log and '"remove"' in log
    rows = backend.changes(path, version).orderBy(*ARRIVAL_ORDER).collect()
    assert [(r.id, r._row_kind) for r in rows] == [(1, "-D"), (2, "-D"), (2, "+I"), (3, "+I")]


@pytest.mark.parametrize("literal_max_files", [0, 64], ids=["broadcast-join", "literal-map"])
def test_file_tags_are_the_same_looked_up_or_joined(
    backend: LakeBackend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, literal_max_files: int
) -> None:
    """Few files find their tags in a literal map, many join a broadcast table: same rows."""
    monkeypatch.setattr(spark_session, "LITERAL_LOOKUP_MAX_ROWS", literal_max_files)
    path = tmp_path / "events"
    _partitioned_events(path)
    changes = backend.changes(path, 0).orderBy(*ARRIVAL_ORDER).collect()
    rows = [(r.id, r.day, r.shard, r._row_kind, r._commit_version) for r in changes]
    assert sorted(rows[:2], key=str) == [(1, DAY, 7, "+I", 0), (2, None, 8, "+I", 0)]
    assert rows[2:] == [(1, DAY, 7, "-U", 1), (10, DAY, 7, "+U", 1)]
    assert len({r._position for r in changes[:2]}) == 2, "each file its own positions"
