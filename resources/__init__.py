"""The reference platform's resources: the lake and the Spark session.

Each setting is an environment variable read through Dagster's `EnvVar`; the lake root and a
Connect server's URL are handed to the resources as `EnvVar`s, which Dagster resolves when a
run starts and shows by name in its UI. Unset, each takes the default beside it:

- `CHRONOLAKE_LAKE`: the lake root, a folder or a URI (default: `demo-lake/` in the
  repository). The asset graph is drawn from `assets/platform.sql`, not from the lake, but
  its pages show each table's location under this root.
- `CHRONOLAKE_BACKEND`: `auto`, `delta-rs` or `delta-spark` (`chronolake.spark.stack`),
  checked when the code location loads; the local session loads what it and the lake need.
- `CHRONOLAKE_SPARK_MASTER` (a cluster) or `CHRONOLAKE_SPARK_REMOTE` (a Spark Connect server,
  `sc://localhost:PORT/;token=...`, its token never part of the resource's configuration):
  where Spark runs, local by default.
"""

from __future__ import annotations

from pathlib import Path

from dagster import EnvVar

from chronolake.dagster import LakeResource, local_pyspark_resource
from chronolake.location import as_location
from chronolake.spark.connect_server import REMOTE_ENV
from chronolake.spark.stack import chosen_backend

REPOSITORY_ROOT = Path(__file__).resolve().parent.parent
LAKE_ENV, MASTER_ENV = "CHRONOLAKE_LAKE", "CHRONOLAKE_SPARK_MASTER"
LAKE_ROOT = as_location(EnvVar(LAKE_ENV).get_value(str(REPOSITORY_ROOT / "demo-lake")))
"""A folder, or an object store URI (`s3://bucket/lake`)."""


def _set(name: str) -> EnvVar | None:
    """`name` as an `EnvVar` when it is set: Dagster reads it as a run starts."""
    return EnvVar(name) if EnvVar(name).get_value() else None


def _spark_conf() -> dict[str, str]:
    master = EnvVar(MASTER_ENV).get_value()
    return {"spark.master": master} if master else {}


RESOURCES = {
    "lake": LakeResource(root=_set(LAKE_ENV) or str(LAKE_ROOT),
                         backend=chosen_backend()),
    "pyspark": local_pyspark_resource(_spark_conf(), remote=_set(REMOTE_ENV), lake=LAKE_ROOT),
}
