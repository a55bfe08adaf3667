"""Resources: where the lake is, and the Spark session (through dagster-pyspark)."""

from __future__ import annotations

from typing import Literal

from dagster import ConfigurableResource, InitResourceContext
from dagster_pyspark import PySparkResource
from dagster_pyspark.resources import spark_session_from_config
from dagster_spark.utils import flatten_dict
from pydantic import Field
from pyspark.sql import SparkSession

from chronolake.catalog import Catalog
from chronolake.errors import UnknownNameError
from chronolake.location import Location, LocationLike, as_location
from chronolake.spark.session import local_spark_conf, start_spark_driver

DECLARE_JOB = "declare_platform"
"""The job that declares a code location's DDL (`chronolake.dagster.declaring.declare_job`)."""


class LakeResource(ConfigurableResource):
    """The lake: a root folder or object store URI holding Delta tables and chronolake's
    `_chronolake/` state.

    Example:
        >>> Definitions(assets=chronolake_assets("demo-lake"),
        ...             resources={"lake": LakeResource(root="demo-lake"),
        ...                        "pyspark": local_pyspark_resource()})
    """

    root: str = Field(
        description="Lake root: a folder or a URI (s3://bucket/lake); table paths in DDL are "
        "relative to it."
    )
    backend: Literal["auto", "delta-rs", "delta-spark"] = Field(
        "auto",
        description="Delta backend: delta-rs (embedded default) or delta-spark (when Delta's "
        "JVM classes are on the Spark classpath); auto picks delta-spark when available.",
    )

    late_row_rate_threshold: float = Field(
        0.05, description="Share of late rows above which the late_row_rate check warns."
    )
    max_pending_age_seconds: float = Field(
        3600.0, description="How long a probe row may wait before the pending_rows_age check warns."
    )

    @property
    def location(self) -> Location:
        """The lake root: an absolute `Path` for a folder, else the URI."""
        return as_location(self.root)

    def catalog(self, spark: SparkSession | None, *, serving: str | None = None) -> Catalog:
        """The lake's catalog on the run's Spark session (none: declaring needs no JVM).

        `serving`: the table or view an asset runs, which the lake must declare: loading a
        code location declares nothing (`chronolake.dagster.declaring`)."""
        catalog = Catalog(self.location, spark, backend=self.backend)
        if serving is not None and serving.lower() not in catalog.names():
            msg = (f"{serving!r} is an asset of this code location, but the lake at "
                   f"{self.location} does not declare it; declare the code location's DDL "
                   f"first: run its declare job ('{DECLARE_JOB}' in the reference platform), "
                   f"or 'chronolake sql --lake {self.location} -f FILE.sql'")
            raise UnknownNameError(msg)
        return catalog


class ChronolakePySparkResource(PySparkResource):
    """dagster-pyspark's resource, its Spark driver started as chronolake starts its own
    (`chronolake.spark.session.start_spark_driver`: a quiet console, on loopback for a local
    master), or a Spark Connect session at `spark_remote`.

    Example:
        >>> Definitions(assets=chronolake_assets("demo-lake"),
        ...             resources={"lake": LakeResource(root="demo-lake"),
        ...                        "pyspark": ChronolakePySparkResource(
        ...                            spark_config={}, spark_remote=EnvVar("SPARK_URL"))})
    """

    spark_remote: str | None = Field(
        None,
        description="A Spark Connect URL (sc://localhost:15002/;token=...) to run on instead of "
        "spark.master. Give it as EnvVar(...): Dagster then shows and stores the variable's "
        "name, not the token.",
    )

    def setup_for_execution(self, context: InitResourceContext) -> None:
        # The resource takes nested settings too, as dagster-pyspark reads them.
        conf = dict(flatten_dict(self.spark_config))
        if self.spark_remote:
            conf.pop("spark.master", None)
            conf["spark.remote"] = self.spark_remote
        start_spark_driver(conf)
        self._spark_session = spark_session_from_config(conf)


def local_pyspark_resource(
    extra_conf: dict[str, str] | None = None,
    *,
    remote: str | None = None,
    lake: LocationLike | None = None,
) -> PySparkResource:
    """dagster-pyspark's resource configured for local Spark; point it at a cluster by config.

    `spark.master` (e.g. `spark://host:7077`) in `extra_conf`, or `remote` (a Spark Connect
    URL, `sc://host:15002/;token=...`), is all it takes to leave the local machine. Give
    `remote` as `EnvVar("CHRONOLAKE_SPARK_REMOTE")`: as `spark.remote` in `extra_conf` (which
    works too), its token would be in the configuration Dagster shows in its UI and stores
    with every run. The session loads what the chosen backend and a `lake` on a bucket need
    (`chronolake.spark.stack`: `CHRONOLAKE_BACKEND=delta-spark` loads Delta's jars).
    """
    conf = {"spark.master": "local[*]", "spark.app.name": "chronolake", **local_spark_conf(lake)}
    if extra_conf:
        conf |= extra_conf
    if "spark.remote" in conf:
        conf.pop("spark.master", None)
    return ChronolakePySparkResource(spark_config=conf, spark_remote=remote)
