"""What a Spark session that chronolake starts loads besides Spark: the one owner of the
backend switch, Delta's JVM settings and the S3A settings.

`CHRONOLAKE_BACKEND` (`auto` | `delta-rs` | `delta-spark`) is read here and nowhere else. With
`delta-spark`, the sessions chronolake starts (local, the Dagster resource's, its Connect
server) load Delta's pinned jars (`chronolake.spark.jars`) and its extension and catalog, so Delta's
JVM writer commits what chronolake writes through Spark. With a lake on `s3://`, they load
S3A and translate the standard AWS environment that obstore and delta-rs read
(`AWS_ENDPOINT_URL`, `AWS_REGION`, `AWS_ALLOW_HTTP`) into `spark.hadoop.fs.s3a.*`, since S3A
reads none of it. With delta-spark on `s3://`, they commit through a log store that several
writing JVMs can share: chronolake's conditional-put store (`log_store_settings`), or Delta's
DynamoDB store when `CHRONOLAKE_DELTA_DYNAMODB_TABLE` names its table. A session the user
brings keeps its own settings.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Literal, get_args
from urllib.parse import urlparse

from chronolake.errors import DefinitionError
from chronolake.location import LocationLike
from chronolake.spark.jars import JarFetchError, JarSet, jar_paths
from chronolake.spark.jvm_classes import built_jar

BackendChoice = Literal["auto", "delta-rs", "delta-spark"]
BACKEND_ENV = "CHRONOLAKE_BACKEND"

DELTA_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"
DELTA_SETTINGS: Mapping[str, str] = {
    "spark.sql.extensions": DELTA_EXTENSION,
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    # Delta rebuilds a new version's state (file list, sizes) in 50 tasks by default, each
    # generating its code: on a 2-core local session an append and a read of a small table
    # took 4-5 s, with 2 tasks 1.7 s (benchmarks/README.md, delta-spark).
    "spark.databricks.delta.snapshotPartitions": "2",
}
"""What Delta Lake's documentation sets on a session, besides its jars, and the size of its
state reconstruction for a local session."""

S3_SCHEMES = ("s3", "s3a")
S3A_FILESYSTEM = "org.apache.hadoop.fs.s3a.S3AFileSystem"

CONDITIONAL_PUT_LOG_STORE = "chronolake.delta.ConditionalPutLogStore"
"""chronolake's own log store for S3 (`jvm/log_store`): each version is put only if absent."""
DYNAMODB_TABLE_ENV = "CHRONOLAKE_DELTA_DYNAMODB_TABLE"
"""The DynamoDB table through which Delta's JVM writer commits to `s3://` lakes instead (unset:
chronolake's conditional-put log store)."""
DYNAMODB_LOG_STORE = "io.delta.storage.S3DynamoDBLogStore"
DYNAMODB_LOG_STORE_PREFIX = f"spark.{DYNAMODB_LOG_STORE}"


def chosen_backend(explicit: str | None = None) -> BackendChoice:
    """The backend asked for: `explicit` when given, else `CHRONOLAKE_BACKEND`, else `auto`."""
    choice = explicit if explicit is not None else os.environ.get(BACKEND_ENV) or "auto"
    if choice not in get_args(BackendChoice):
        where = "the backend" if explicit is not None else BACKEND_ENV
        msg = (f"{where} is {choice!r}; expected one of auto, delta-rs, delta-spark; "
               "auto takes delta-spark when the session has Delta's extension")
        raise DefinitionError(msg)
    return choice  # type: ignore[return-value]  # checked against the Literal above


def backend_in_use() -> str:
    """The backend of the sessions that chronolake starts, for people: under `auto` that is
    delta-rs, since such a session loads Delta's jars only when delta-spark is chosen."""
    choice = chosen_backend()
    if choice == "auto":
        return f"delta-rs (auto; {BACKEND_ENV}=delta-spark runs Delta's own)"
    return f"{choice} ({BACKEND_ENV})"


def on_object_store(lake: LocationLike | None) -> bool:
    """Whether `lake` is an S3 URI, which Spark reads through S3A."""
    return lake is not None and urlparse(str(lake)).scheme in S3_SCHEMES


def stack_settings(
    lake: LocationLike | None = None, *, backend: str | None = None
) -> dict[str, str]:
    """The Spark settings a session that chronolake starts needs for `backend` (see
    `chosen_backend`) and a lake at `lake`: pinned jars (fetched once), Delta's extension,
    S3A's translation of the AWS environment, and on a bucket a log store that several
    writing JVMs can share (`log_store_settings`)."""
    delta_spark = chosen_backend(backend) == "delta-spark"
    sets = [JarSet.DELTA_SPARK] if delta_spark else []
    settings: dict[str, str] = {}
    if sets:
        settings |= DELTA_SETTINGS
    if on_object_store(lake):
        sets.append(JarSet.S3A)
        settings |= s3a_settings(os.environ)
    if not sets:
        return settings
    paths = jar_paths(sets)
    if delta_spark and on_object_store(lake):
        log_store = log_store_settings(os.environ)
        settings |= log_store
        paths += [path for path in _log_store_jars(log_store) if path not in paths]
    settings["spark.jars"] = ",".join(str(path) for path in paths)
    return settings


def log_store_settings(environment: Mapping[str, str]) -> dict[str, str]:
    """The log store through which Delta's JVM writer commits to `s3://` and `s3a://` tables:
    Delta's DynamoDB store when `environment` names its table, else chronolake's own.

    Delta's default S3 log store makes a commit exclusive only within one JVM: two sessions
    that commit the same version of a table can both write it, and one commit is lost.
    chronolake's store (`jvm/log_store`) puts each version only if absent (S3's
    `If-None-Match: *`, through S3A's conditional create), so exactly one writer gets it and
    Delta retries the others on the next version, with no second service.
    """
    if dynamodb := dynamodb_log_store_settings(environment):
        return dynamodb
    return {f"spark.delta.logStore.{scheme}.impl": CONDITIONAL_PUT_LOG_STORE
            for scheme in S3_SCHEMES}


def _log_store_jars(log_store: Mapping[str, str]) -> list[Path]:
    if log_store["spark.delta.logStore.s3.impl"] == CONDITIONAL_PUT_LOG_STORE:
        return [built_jar("log_store")]
    try:
        return jar_paths([JarSet.S3_DYNAMODB])
    except JarFetchError as error:
        msg = (f"{DYNAMODB_TABLE_ENV} asks for Delta's DynamoDB log store, whose jars are "
               f"missing: {error}; or unset {DYNAMODB_TABLE_ENV} to commit through "
               "chronolake's conditional-put log store")
        raise JarFetchError(msg) from error


def s3a_settings(environment: Mapping[str, str]) -> dict[str, str]:
    """S3A configured as obstore and delta-rs are by `environment`: `s3://` served by S3A too,
    the endpoint, path-style requests unless virtual-hosted ones are asked for, plain HTTP
    where allowed, and the region. Credentials stay in the environment, where S3A's default
    provider chain reads them (settings would show in Spark's UI)."""
    settings = {
        "spark.hadoop.fs.s3.impl": S3A_FILESYSTEM,
        "spark.hadoop.fs.AbstractFileSystem.s3.impl": "org.apache.hadoop.fs.s3a.S3A",
    }
    endpoint = environment.get("AWS_ENDPOINT_URL_S3") or environment.get("AWS_ENDPOINT_URL")
    if endpoint:
        settings["spark.hadoop.fs.s3a.endpoint"] = endpoint
        virtual_hosted = environment.get("AWS_VIRTUAL_HOSTED_STYLE_REQUEST", "").lower()
        settings["spark.hadoop.fs.s3a.path.style.access"] = str(
            virtual_hosted != "true").lower()
        if environment.get("AWS_ALLOW_HTTP", "").lower() == "true" or endpoint.startswith(
            "http://"
        ):
            settings["spark.hadoop.fs.s3a.connection.ssl.enabled"] = "false"
    if region := environment.get("AWS_REGION") or environment.get("AWS_DEFAULT_REGION"):
        settings["spark.hadoop.fs.s3a.endpoint.region"] = region
    return settings


def dynamodb_log_store_settings(environment: Mapping[str, str]) -> dict[str, str]:
    """Delta's S3DynamoDBLogStore for `s3://` and `s3a://` tables when `environment` names its
    table (`CHRONOLAKE_DELTA_DYNAMODB_TABLE`), else nothing.

    This store first claims the version with a conditional put in the DynamoDB table, so exactly
    one writer gets it and the others retry on the next version. The table is created by
    Delta on first use if missing (key `tablePath`, `fileName`; 5 read and write capacity
    units unless `...S3DynamoDBLogStore.provisionedThroughput.rcu`/`.wcu` say otherwise).

    The region is `AWS_REGION` (or `AWS_DEFAULT_REGION`; Delta's default is us-east-1). The
    credentials are the AWS SDK v1's default chain, which reads the same environment as S3A.
    Delta 4.4.0 has no endpoint setting: the store reaches AWS's DynamoDB in that region and
    ignores `AWS_ENDPOINT_URL`; an emulator needs the JVM's own override (see
    tests/test_dynamodb_log_store.py).
    """
    table = environment.get(DYNAMODB_TABLE_ENV, "").strip()
    if not table:
        return {}
    if not re.fullmatch(r"[A-Za-z0-9_.-]{3,255}", table):
        msg = (f"{DYNAMODB_TABLE_ENV} is {table!r}; expected a DynamoDB table name (3 to 255 "
               "letters, digits, '_', '-' or '.'); unset it to keep Delta's default log store")
        raise DefinitionError(msg)
    settings = {
        "spark.delta.logStore.s3a.impl": DYNAMODB_LOG_STORE,
        "spark.delta.logStore.s3.impl": DYNAMODB_LOG_STORE,
        f"{DYNAMODB_LOG_STORE_PREFIX}.ddb.tableName": table,
    }
    if region := environment.get("AWS_REGION") or environment.get("AWS_DEFAULT_REGION"):
        settings[f"{DYNAMODB_LOG_STORE_PREFIX}.ddb.region"] = region
    return settings
