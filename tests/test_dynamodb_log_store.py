"""Several writers on S3 under delta-spark: Delta's DynamoDB log store (issue #39).

Delta's default S3 log store makes a commit exclusive only inside one JVM. With
`CHRONOLAKE_DELTA_DYNAMODB_TABLE` set, the sessions chronolake starts on an `s3://` lake commit
through `io.delta.storage.S3DynamoDBLogStore` (`chronolake.stack`), which claims each version
with a conditional put in a DynamoDB table first. Here two JVMs (two Python processes, each
with the local session chronolake starts) append to one table on moto's S3 at the same time,
and every commit lands once, in its own version, with the DynamoDB table holding one entry
per version.

The emulator: Delta 4.4.0's store builds its DynamoDB client (AWS SDK v1) from a region alone,
over HTTPS, with no endpoint setting. So DynamoDB is a second moto server with TLS, reached
through the SDK v1's own overrides in the writers' JVM options: a regions file that maps
DynamoDB in the region to that server, and certificate checks off (SDK v1 clients only; S3A
is SDK v2 and talks to the plain-HTTP S3 server).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from _s3 import BUCKET, moto_s3, moto_server
from botocore.config import Config
from deltatables import table_rows

from chronolake.errors import DefinitionError
from chronolake.jars import JarFetchError, JarSet, jar_paths
from chronolake.lake.storage import Storage
from chronolake.spark_session import LOCAL_JAVA_OPTIONS
from chronolake.stack import DYNAMODB_TABLE_ENV, dynamodb_log_store_settings, stack_settings

WRITERS = 2
APPENDS = 10
"""Appends per writer, all after the table's creating commit (version 0)."""
LOG_TABLE = "chronolake_delta_log"
WRITER_TIMEOUT_S = 600

_WRITER = """
import sys, time
from pathlib import Path
from chronolake.spark_session import local_spark_session
table, writer, appends, folder = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), Path(sys.argv[4])
spark = local_spark_session(f"writer-{writer}", lake=table, backend="delta-spark")
schema = "writer INT, seq INT"
if writer == 0:  # the table's creating commit, before the race
    spark.createDataFrame([], schema).write.format("delta").save(table)
else:
    spark.range(1).count()  # the JVM warmed as the other's
(folder / f"ready-{writer}").touch()
while not (folder / "go").exists():
    time.sleep(0.05)
for seq in range(appends):
    spark.createDataFrame([(writer, seq)], schema).write.format("delta").mode("append").save(table)
    print(f"writer {writer} appended {seq}", flush=True)
spark.stop()
"""


def test_the_dynamodb_log_store_is_asked_for_by_naming_its_table() -> None:
    environment = {DYNAMODB_TABLE_ENV: "delta_log", "AWS_REGION": "eu-west-1"}

    settings = dynamodb_log_store_settings(environment)

    assert settings == {
        "spark.delta.logStore.s3a.impl": "io.delta.storage.S3DynamoDBLogStore",
        "spark.delta.logStore.s3.impl": "io.delta.storage.S3DynamoDBLogStore",
        "spark.io.delta.storage.S3DynamoDBLogStore.ddb.tableName": "delta_log",
        "spark.io.delta.storage.S3DynamoDBLogStore.ddb.region": "eu-west-1",
    }
    assert dynamodb_log_store_settings({"AWS_REGION": "eu-west-1"}) == {}
    assert dynamodb_log_store_settings({DYNAMODB_TABLE_ENV: " "}) == {}
    without_region = dynamodb_log_store_settings({DYNAMODB_TABLE_ENV: "delta_log"})
    assert "spark.io.delta.storage.S3DynamoDBLogStore.ddb.region" not in without_region
    with pytest.raises(DefinitionError, match=DYNAMODB_TABLE_ENV):
        dynamodb_log_store_settings({DYNAMODB_TABLE_ENV: "s3://lake/log"})


def test_only_delta_spark_on_a_bucket_commits_through_dynamodb(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """delta-rs commits with put-if-absent, and a local lake has no S3 log store to replace."""
    monkeypatch.setenv(DYNAMODB_TABLE_ENV, LOG_TABLE)
    try:
        on_delta_rs = stack_settings(f"s3://{BUCKET}/lake", backend="delta-rs")
        on_a_disk = stack_settings(tmp_path, backend="delta-spark")
    except JarFetchError as error:
        pytest.skip(f"Delta's or S3A's pinned jars could not be had: {error}")

    assert "spark.delta.logStore.s3.impl" not in on_delta_rs
    assert "spark.delta.logStore.s3.impl" not in on_a_disk


@pytest.fixture(scope="module")
def log_store_jars() -> None:
    try:
        jar_paths([JarSet.DELTA_SPARK, JarSet.S3A, JarSet.S3_DYNAMODB])
    except JarFetchError as error:
        pytest.skip(f"Delta's DynamoDB log store jars could not be had: {error}")


@pytest.fixture(scope="module")
def emulators(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """moto's S3 (plain HTTP, `_s3.moto_s3`) and DynamoDB (TLS) servers; yields both
    endpoints."""
    tls = tmp_path_factory.mktemp("tls")
    with moto_s3() as s3_endpoint, moto_server(tls=True, folder=tls) as dynamodb:
        yield s3_endpoint, dynamodb


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::urllib3.exceptions.InsecureRequestWarning")
def test_two_jvms_appending_at_once_each_commit_once_through_the_dynamodb_log_store(
    log_store_jars: None, emulators: tuple[str, str], tmp_path: Path
) -> None:
    _, dynamodb_endpoint = emulators
    table = f"s3://{BUCKET}/two-writers/events"

    outputs = _race(table, dynamodb_endpoint, tmp_path)

    for writer, output in enumerate(outputs):
        assert output.count(f"writer {writer} appended") == APPENDS, output
    log = Storage(table)
    versions = sorted(int(name.removesuffix(".json")) for name in log.names("_delta_log")
                      if name.endswith(".json") and "/" not in name)
    assert versions == list(range(WRITERS * APPENDS + 1))  # contiguous, one per commit
    added = [action["add"] for version in versions[1:]
             for action in map(json.loads, (log.read_text(f"_delta_log/{version:020}.json")
                                            or "").splitlines())
             if "add" in action]
    assert len(added) == WRITERS * APPENDS  # each append's file in a version of its own
    by_writer = [json.loads(add["stats"])["minValues"]["writer"] for add in added]
    firsts = [by_writer.index(writer) for writer in range(WRITERS)]
    lasts = [len(by_writer) - 1 - by_writer[::-1].index(writer) for writer in range(WRITERS)]
    assert max(firsts) < min(lasts), f"the writers did not commit at the same time: {by_writer}"
    rows = table_rows(table).to_pylist()
    assert sorted((row["writer"], row["seq"]) for row in rows) == [
        (writer, seq) for writer in range(WRITERS) for seq in range(APPENDS)]
    entries = _log_entries(dynamodb_endpoint)
    assert {entry["tablePath"]["S"] for entry in entries} == {table}
    assert sorted(entry["fileName"]["S"] for entry in entries) == [
        f"{version:020}.json" for version in versions]
    assert all(entry["complete"]["S"] == "true" for entry in entries)


def _race(table: str, dynamodb_endpoint: str, folder: Path) -> list[str]:
    """`WRITERS` processes, each with its own JVM, appending `APPENDS` rows to `table` once
    all are ready, through the DynamoDB log store; the output of each."""
    regions = folder / "regions.xml"
    host = dynamodb_endpoint.removeprefix("https://")
    regions.write_text(
        "<XmlRegionEndpoints><Regions><Region><Name>us-east-1</Name><Endpoint>"
        f"<ServiceName>dynamodb</ServiceName><Http>false</Http><Https>true</Https>"
        f"<Hostname>{host}</Hostname></Endpoint></Region></Regions></XmlRegionEndpoints>")
    env = {name: value for name, value in os.environ.items()
           if name not in ("CHRONOLAKE_SPARK_REMOTE", "PYSPARK_SUBMIT_ARGS")}
    env |= {
        "CHRONOLAKE_BACKEND": "delta-spark",
        "CHRONOLAKE_SPARK_MASTER": "local[1]",
        DYNAMODB_TABLE_ENV: LOG_TABLE,
        "CHRONOLAKE_SPARK_JAVA_OPTIONS": (
            f"{os.environ.get('CHRONOLAKE_SPARK_JAVA_OPTIONS', LOCAL_JAVA_OPTIONS)} "
            f"-Dcom.amazonaws.regions.RegionUtils.fileOverride={regions} "
            "-Dcom.amazonaws.sdk.disableCertChecking=true"),
    }
    writers = [
        subprocess.Popen([sys.executable, "-c", _WRITER, table, str(writer), str(APPENDS),
                          str(folder)], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
        for writer in range(WRITERS)
    ]
    try:
        deadline = time.monotonic() + WRITER_TIMEOUT_S
        while not all((folder / f"ready-{writer}").exists() for writer in range(WRITERS)):
            failed = [w for w in writers if w.poll() is not None]
            assert not failed, failed[0].communicate()
            assert time.monotonic() < deadline, "the writers' sessions did not start in time"
            time.sleep(0.1)
        (folder / "go").touch()
        outputs = []
        for writer in writers:
            out, err = writer.communicate(timeout=max(1, deadline - time.monotonic()))
            assert writer.returncode == 0, f"{out}\n{err[-5000:]}"
            outputs.append(out)
        return outputs
    finally:
        for writer in writers:
            if writer.poll() is None:
                writer.kill()
                writer.wait()


def _log_entries(endpoint: str) -> list[dict]:
    """Every item of the DynamoDB table Delta's log store commits through."""
    client = boto3.client("dynamodb", endpoint_url=endpoint, region_name="us-east-1",
                          verify=False, config=Config(retries={"max_attempts": 2}))
    pages = client.get_paginator("scan").paginate(TableName=LOG_TABLE, ConsistentRead=True)
    return [item for page in pages for item in page["Items"]]
