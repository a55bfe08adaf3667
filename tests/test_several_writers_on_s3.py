"""Several writers on S3 under delta-spark: the log stores that make a commit exclusive across
JVMs (issue #39).

Delta's default S3 log store makes a commit exclusive only inside one JVM. The sessions
chronolake starts on an `s3://` lake commit through chronolake's conditional-put store
(`jvm/log_store`: each version put only if absent), or through Delta's
`io.delta.storage.S3DynamoDBLogStore` when `CHRONOLAKE_DELTA_DYNAMODB_TABLE` names its table
(`chronolake.spark.stack`). Here two JVMs (two Python processes, each with the local session
chronolake starts) append to one table on moto's S3 at the same time, through either store,
and every commit lands once, in its own version.

The DynamoDB emulator: Delta 4.4.0's store builds its DynamoDB client (AWS SDK v1) from a
region alone, over HTTPS, with no endpoint setting. So DynamoDB is a second moto server with
TLS, reached through the SDK v1's own overrides in the writers' JVM options: a regions file
that maps DynamoDB in the region to that server, and certificate checks off (SDK v1 clients
only; S3A is SDK v2 and talks to the plain-HTTP S3 server).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path

import boto3
import pytest
from _s3 import BUCKET, moto_s3, moto_server
from botocore.config import Config
from deltatables import table_rows

from chronolake.errors import DefinitionError
from chronolake.lake.storage import Storage
from chronolake.spark.jars import JarFetchError, JarSet, jar_paths
from chronolake.spark.jars import cache_dir as jar_cache_dir
from chronolake.spark.session import LOCAL_JAVA_OPTIONS
from chronolake.spark.stack import (
    BACKEND_ENV,
    CONDITIONAL_PUT_LOG_STORE,
    DYNAMODB_TABLE_ENV,
    dynamodb_log_store_settings,
    log_store_settings,
    stack_settings,
)

WRITERS = 2
APPENDS = 10
"""Appends per writer, all after the table's creating commit (version 0)."""
LOG_TABLE = "chronolake_delta_log"
WRITER_TIMEOUT_S = 600

CONTRACT_MARKS = (
    pytest.mark.spark, pytest.mark.slow, pytest.mark.lake_contract,
    pytest.mark.skipif(os.environ.get(BACKEND_ENV) != "delta-spark",
                       reason="runs in the delta-spark contract beside the suite (./dev test), "
                              f"or with {BACKEND_ENV}=delta-spark: JVMs of Delta's own stack"),
)
"""The races' marks: their writers are JVMs of their own, so they run once, where Delta's
contract runs."""


def _in_the_contract(test: Callable[..., None]) -> Callable[..., None]:
    for mark in CONTRACT_MARKS:
        test = mark(test)
    return test


_WRITER = """
import json, sys, time
from pathlib import Path
from chronolake.spark.session import local_spark_session
table, writer, appends, folder = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), Path(sys.argv[4])
writers = int(sys.argv[5])
spark = local_spark_session(f"writer-{writer}", lake=table, backend="delta-spark")
print("log store", spark.conf.get("spark.delta.logStore.s3a.impl", "Delta's default"), flush=True)
schema = "writer INT, seq INT"
if writer == 0:  # the table's creating commit, before the race
    spark.createDataFrame([], schema).write.format("delta").save(table)
else:
    spark.range(1).count()  # the JVM warmed as the other's
(folder / f"ready-{writer}").touch()
while not (folder / "go").exists():
    time.sleep(0.05)
for seq in range(appends):
    # In step with the others (a loaded machine would otherwise let one finish first).
    while seq and not all((folder / f"done-{w}-{seq - 1}").exists() for w in range(writers)):
        time.sleep(0.05)
    spark.createDataFrame([(writer, seq)], schema).write.format("delta").mode("append").save(table)
    (folder / f"done-{writer}-{seq}").touch()
    print(f"writer {writer} appended {seq}", flush=True)
spark.stop()
"""

_PROBE = """
import json, sys
from py4j.protocol import Py4JJavaError
from chronolake.spark.session import local_spark_session
from chronolake.spark.stack import CONDITIONAL_PUT_LOG_STORE
log = sys.argv[1]
spark = local_spark_session("probe", lake=log, backend="delta-spark")
jvm, conf = spark._jvm, spark._jsc.hadoopConfiguration()
store = jvm.chronolake.delta.ConditionalPutLogStore(conf)
version = jvm.org.apache.hadoop.fs.Path(f"{log}/00000000000000000000.json")

def put(*lines, overwrite=False, into=version, on=conf):
    actions = jvm.java.util.ArrayList()
    for line in lines:
        actions.add(line)
    try:
        store.write(into, actions.iterator(), overwrite, on)
        return "written"
    except Py4JJavaError as error:
        return error.java_exception.getClass().getName()

unconditional = jvm.org.apache.hadoop.conf.Configuration(conf)
unconditional.set("fs.s3a.create.conditional.enabled", "false")
unconditional.set("fs.s3a.impl.disable.cache", "true")
try:
    store.write(jvm.org.apache.hadoop.fs.Path(f"{log}/00000000000000000001.json"),
                jvm.java.util.ArrayList().iterator(), False, unconditional)
    without_conditional_puts = "written"
except Py4JJavaError as error:
    without_conditional_puts = str(error.java_exception.getMessage())

def read():
    return list(store.read(version, conf))

print(json.dumps({
    "first": put('{"commitInfo":{"txnId":"a"}}'),
    "its own again": put('{"commitInfo":{"txnId":"a"}}'),
    "another": put('{"commitInfo":{"txnId":"b"}}'),
    "kept": read(),
    "overwritten": put('{"checkpoint":1}', overwrite=True),
    "after overwrite": read(),
    "partial writes visible": store.isPartialWriteVisible(version, conf),
    "refused without conditional puts": "fs.s3a.create.conditional.enabled is false"
        in without_conditional_puts,
}))
spark.stop()
"""


def test_a_bucket_under_delta_spark_commits_through_a_log_store_several_jvms_share(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """chronolake's conditional-put store by default, Delta's DynamoDB store when its table is
    named; delta-rs commits with put-if-absent itself, and a disk has no S3 log store."""
    monkeypatch.delenv(DYNAMODB_TABLE_ENV, raising=False)
    try:
        on_a_bucket = stack_settings(f"s3://{BUCKET}/lake", backend="delta-spark")
        on_delta_rs = stack_settings(f"s3://{BUCKET}/lake", backend="delta-rs")
        on_a_disk = stack_settings(tmp_path, backend="delta-spark")
    except JarFetchError as error:
        pytest.skip(f"Delta's or S3A's pinned jars could not be had: {error}")

    for scheme in ("s3", "s3a"):
        assert on_a_bucket[f"spark.delta.logStore.{scheme}.impl"] == CONDITIONAL_PUT_LOG_STORE
    store_jar = Path(on_a_bucket["spark.jars"].split(",")[-1])
    with zipfile.ZipFile(store_jar) as jar:
        assert "chronolake/delta/ConditionalPutLogStore.class" in jar.namelist()
    assert "spark.delta.logStore.s3.impl" not in on_delta_rs
    assert "spark.delta.logStore.s3.impl" not in on_a_disk
    assert log_store_settings({DYNAMODB_TABLE_ENV: LOG_TABLE})[
        "spark.delta.logStore.s3a.impl"] == "io.delta.storage.S3DynamoDBLogStore"


def test_a_session_one_brings_gets_the_log_store_jar_by_one_command() -> None:
    printed = subprocess.run([sys.executable, "-m", "chronolake.spark.jvm_classes", "log_store"],
                             capture_output=True, text=True, timeout=600, check=False)
    assert printed.returncode == 0, printed.stderr

    with zipfile.ZipFile(printed.stdout.strip()) as jar:
        assert "chronolake/delta/ConditionalPutLogStore.class" in jar.namelist()


def test_without_a_jdk_the_log_store_is_refused_in_one_line_that_says_what_to_install(
    delta_and_s3a_jars: None, tmp_path: Path
) -> None:
    """A cache with the pinned jars but no built log store, and a Java without `javac`."""
    cache = tmp_path / "jars"
    cache.mkdir()
    for pinned in jar_cache_dir().iterdir():
        if pinned.name != "built":
            (cache / pinned.name).symlink_to(pinned)
    java_only = tmp_path / "bin"
    java_only.mkdir()
    (java_only / "java").symlink_to(shutil.which("java") or "/usr/bin/java")
    env = {name: value for name, value in os.environ.items() if name != "JAVA_HOME"}
    env |= {"CHRONOLAKE_JAR_CACHE": str(cache), "PATH": str(java_only)}

    refused = subprocess.run([sys.executable, "-m", "chronolake.spark.jvm_classes", "log_store"],
                             env=env, capture_output=True, text=True, timeout=600, check=False)

    assert refused.returncode == 1
    assert refused.stderr.count("\n") == 1, refused.stderr
    assert "no `javac` was found" in refused.stderr
    assert "install a JDK 17 or newer" in refused.stderr
    assert not (cache / "built").exists() or not any((cache / "built").rglob("*.jar"))


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


@pytest.fixture(scope="module")
def delta_and_s3a_jars() -> None:
    try:
        jar_paths([JarSet.DELTA_SPARK, JarSet.S3A])
    except JarFetchError as error:
        pytest.skip(f"Delta's or S3A's pinned jars could not be had: {error}")


@_in_the_contract
def test_the_conditional_put_log_store_refuses_a_taken_version_and_accepts_its_own_retry(
    delta_and_s3a_jars: None, s3: str
) -> None:
    """Delta retries a commit on the next version only on `java.nio.file.
    FileAlreadyExistsException`; a put that S3A retried after its answer was lost finds its
    own bytes there, which is its commit, not a conflict."""
    probe = subprocess.run(
        [sys.executable, "-c", _PROBE, f"s3a://{BUCKET}/probe/_delta_log"],
        env=_writers_environment(), capture_output=True, text=True, timeout=WRITER_TIMEOUT_S,
        check=False)
    assert probe.returncode == 0, probe.stderr[-5000:]

    outcome = json.loads(probe.stdout.splitlines()[-1])

    assert outcome == {
        "first": "written",
        "its own again": "written",
        "another": "java.nio.file.FileAlreadyExistsException",
        "kept": ['{"commitInfo":{"txnId":"a"}}'],
        "overwritten": "written",
        "after overwrite": ['{"checkpoint":1}'],
        "partial writes visible": False,
        "refused without conditional puts": True,
    }


@_in_the_contract
def test_two_jvms_appending_at_once_each_commit_once_through_the_conditional_put_log_store(
    delta_and_s3a_jars: None, s3: str, tmp_path: Path
) -> None:
    table = f"s3://{BUCKET}/two-writers/orders"

    outputs = _race(table, _writers_environment(), tmp_path)

    assert all(f"log store {CONDITIONAL_PUT_LOG_STORE}" in output for output in outputs)
    versions = _assert_each_append_committed_once(table, outputs)
    commit_infos = [action["commitInfo"] for version in versions
                    for action in _log_actions(table, version) if "commitInfo" in action]
    assert all("Delta-Lake/4.4" in info["engineInfo"] for info in commit_infos)


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


@_in_the_contract
@pytest.mark.filterwarnings("ignore::urllib3.exceptions.InsecureRequestWarning")
def test_two_jvms_appending_at_once_each_commit_once_through_the_dynamodb_log_store(
    log_store_jars: None, emulators: tuple[str, str], tmp_path: Path
) -> None:
    _, dynamodb_endpoint = emulators
    table = f"s3://{BUCKET}/two-writers/events"

    outputs = _race(table, _dynamodb_environment(dynamodb_endpoint, tmp_path), tmp_path)

    versions = _assert_each_append_committed_once(table, outputs)
    entries = _log_entries(dynamodb_endpoint)
    assert {entry["tablePath"]["S"] for entry in entries} == {table}
    assert sorted(entry["fileName"]["S"] for entry in entries) == [
        f"{version:020}.json" for version in versions]
    assert all(entry["complete"]["S"] == "true" for entry in entries)


def _assert_each_append_committed_once(table: str, outputs: list[str]) -> list[int]:
    """Every writer's appends in versions of their own, contiguous, interleaved, every row once;
    returns the versions."""
    for writer, output in enumerate(outputs):
        assert output.count(f"writer {writer} appended") == APPENDS, output
    log = Storage(table)
    versions = sorted(int(name.removesuffix(".json")) for name in log.names("_delta_log")
                      if name.endswith(".json") and "/" not in name)
    assert versions == list(range(WRITERS * APPENDS + 1))  # contiguous, one per commit
    added = [action["add"] for version in versions[1:]
             for action in _log_actions(table, version) if "add" in action]
    assert len(added) == WRITERS * APPENDS  # each append's file in a version of its own
    by_writer = [json.loads(add["stats"])["minValues"]["writer"] for add in added]
    firsts = [by_writer.index(writer) for writer in range(WRITERS)]
    lasts = [len(by_writer) - 1 - by_writer[::-1].index(writer) for writer in range(WRITERS)]
    assert max(firsts) < min(lasts), f"the writers did not commit at the same time: {by_writer}"
    rows = table_rows(table).to_pylist()
    assert sorted((row["writer"], row["seq"]) for row in rows) == [
        (writer, seq) for writer in range(WRITERS) for seq in range(APPENDS)]
    return versions


def _log_actions(table: str, version: int) -> list[dict]:
    text = Storage(table).read_text(f"_delta_log/{version:020}.json") or ""
    return [json.loads(line) for line in text.splitlines()]


def _writers_environment() -> dict[str, str]:
    """The environment (moto's S3 included) with one core per writer and no Connect server."""
    env = {name: value for name, value in os.environ.items()
           if name not in ("CHRONOLAKE_SPARK_REMOTE", "PYSPARK_SUBMIT_ARGS", DYNAMODB_TABLE_ENV)}
    return env | {"CHRONOLAKE_BACKEND": "delta-spark", "CHRONOLAKE_SPARK_MASTER": "local[1]"}


def _dynamodb_environment(dynamodb_endpoint: str, folder: Path) -> dict[str, str]:
    """The writers' environment with DynamoDB's log store asked for and its SDK pointed at
    moto's DynamoDB."""
    regions = folder / "regions.xml"
    host = dynamodb_endpoint.removeprefix("https://")
    regions.write_text(
        "<XmlRegionEndpoints><Regions><Region><Name>us-east-1</Name><Endpoint>"
        f"<ServiceName>dynamodb</ServiceName><Http>false</Http><Https>true</Https>"
        f"<Hostname>{host}</Hostname></Endpoint></Region></Regions></XmlRegionEndpoints>")
    return _writers_environment() | {
        DYNAMODB_TABLE_ENV: LOG_TABLE,
        "CHRONOLAKE_SPARK_JAVA_OPTIONS": (
            f"{os.environ.get('CHRONOLAKE_SPARK_JAVA_OPTIONS', LOCAL_JAVA_OPTIONS)} "
            f"-Dcom.amazonaws.regions.RegionUtils.fileOverride={regions} "
            "-Dcom.amazonaws.sdk.disableCertChecking=true"),
    }


def _race(table: str, env: dict[str, str], folder: Path) -> list[str]:
    """`WRITERS` processes, each with its own JVM, appending `APPENDS` rows to `table` once
    all are ready; the output of each."""
    writers = [
        subprocess.Popen([sys.executable, "-c", _WRITER, table, str(writer), str(APPENDS),
                          str(folder), str(WRITERS)], env=env, stdout=subprocess.PIPE,
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
