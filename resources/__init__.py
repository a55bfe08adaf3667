"""The reference platform's resources: the lake and the Spark session.

The lake root is `CHRONOLAKE_LAKE`, a folder or a URI (default: `demo-lake/` in the repository);
Spark is local unless `CHRONOLAKE_SPARK_MASTER` or `CHRONOLAKE_SPARK_REMOTE`
points at a cluster or a Spark Connect server (`sc://localhost:PORT/;token=...`, the token
read when a run starts, never part of the resource's configuration). The lake backend is
`CHRONOLAKE_BACKEND` (`chronolake.spark.stack`); the local session loads what it and the lake need.
"""

from __future__ import annotations

import os
from pathlib import Path

from dagster import EnvVar

from chronolake.dagster import LakeResource, local_pyspark_resource
from chronolake.location import as_location
from chronolake.spark.connect_server import REMOTE_ENV
from chronolake.spark.stack import chosen_backend

REPOSITORY_ROOT = Path(__file__).resolve().parent.parent
LAKE_ROOT = as_location(os.environ.get("CHRONOLAKE_LAKE", REPOSITORY_ROOT / "demo-lake"))
"""A folder, or an object store URI (`s3://bucket/lake`)."""


def _spark_conf() -> dict[str, str]:
    conf: dict[str, str] = {}
    if master := os.environ.get("CHRONOLAKE_SPARK_MASTER"):
        conf["spark.master"] = master
    return conf


def _remote() -> EnvVar | None:
    """`CHRONOLAKE_SPARK_REMOTE` by name, when set: Dagster reads it as a run starts, and shows
    and stores the name, not the URL's token."""
    return EnvVar(REMOTE_ENV) if os.environ.get(REMOTE_ENV) else None


RESOURCES = {
    "lake": LakeResource(root=str(LAKE_ROOT), backend=chosen_backend()),
    "pyspark": local_pyspark_resource(_spark_conf(), remote=_remote(), lake=LAKE_ROOT),
}
