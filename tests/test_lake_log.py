"""The Delta log parser and small helpers: pure Python, no Spark."""

from __future__ import annotations

import json

from chronolake.lake.backend import version_spans
from chronolake.lake.delta_log import ActionKind, log_file_name, parse_commit
from chronolake.lake.files import TaggedFile, file_uri


def _lines(*entries: dict) -> list[str]:
    return [json.dumps(entry) for entry in entries]


def test_parse_commit_keeps_log_order_and_data_change() -> None:
    commit = parse_commit(
        3,
        _lines(
            {"commitInfo": {"timestamp": 1700, "operation": "MERGE"}},
            {"add": {"path": "b.parquet", "dataChange": True, "partitionValues": {"d": "1"}}},
            {"remove": {"path": "a.parquet", "dataChange": True}},
            {"add": {"path": "c.parquet", "dataChange": False}},
            {"cdc": {"path": "_change_data/x.parquet", "dataChange": False}},
            {"add": {"path": "e.parquet", "dataChange": True, "deletionVector": {"x": 1}}},
        ),
        fallback_timestamp_ms=5,
    )
    assert (commit.version, commit.timestamp_ms, commit.operation) == (3, 1700, "MERGE")
    assert [a.path for a in commit.files(ActionKind.ADD)] == ["b.parquet", "e.parquet"]
    assert [a.path for a in commit.files(ActionKind.CDC)] == ["_change_data/x.parquet"]
    assert commit.files(ActionKind.ADD)[0].partition_values == {"d": "1"}
    assert [a.has_deletion_vector for a in commit.files(ActionKind.ADD)] == [False, True]
    assert commit.is_data_change
    assert commit.configuration is None


def test_compaction_only_commit_changes_no_data() -> None:
    commit = parse_commit(
        1,
        _lines(
            {"commitInfo": {"timestamp": 10, "operation": "OPTIMIZE"}},
            {"add": {"path": "big.parquet", "dataChange": False}},
            {"remove": {"path": "small.parquet", "dataChange": False}},
        ),
        fallback_timestamp_ms=0,
    )
    assert not commit.is_data_change
    assert commit.files(ActionKind.ADD) == commit.files(ActionKind.REMOVE) == []


def test_in_commit_timestamp_wins_then_commit_info_then_file_time() -> None:
    with_ict = _lines({"commitInfo": {"timestamp": 10, "inCommitTimestamp": 20}})
    assert parse_commit(0, with_ict, fallback_timestamp_ms=30).timestamp_ms == 20
    info_only = _lines({"commitInfo": {"timestamp": 10}})
    assert parse_commit(0, info_only, fallback_timestamp_ms=30).timestamp_ms == 10
    assert parse_commit(0, [""], fallback_timestamp_ms=30).timestamp_ms == 30


def test_metadata_action_carries_configuration() -> None:
    commit = parse_commit(
        2,
        _lines({"metaData": {"configuration": {"delta.enableChangeDataFeed": "true"}}}),
        fallback_timestamp_ms=0,
    )
    assert commit.configuration == {"delta.enableChangeDataFeed": "true"}
    assert not commit.is_data_change


def test_log_file_name_is_twenty_digits() -> None:
    assert log_file_name(12) == "00000000000000000012.json"


def test_file_uri_decodes_logged_paths() -> None:
    assert file_uri("/lake/t/", "d=a%2520b/part-1.parquet") == "/lake/t/d=a%20b/part-1.parquet"
    assert file_uri("/lake/t", "s3://bucket/x.parquet") == "s3://bucket/x.parquet"
    tagged = TaggedFile("/lake/t/d=1/part-1.parquet", 0, 0, 0, None, {})
    assert tagged.name == "part-1.parquet"


def test_spans_keep_version_lists_short() -> None:
    assert version_spans([1, 2, 3, 7, 9, 10]) == "1..3, 7, 9..10"
