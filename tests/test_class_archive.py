"""The local driver's JVM: its options, and Spark's class archive mapped when built,
harmless when stale, never required."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from chronolake.spark.class_archive import ARCHIVE_ENV, archive_path, driver_java_options
from chronolake.spark.session import (
    JAVA_OPTIONS_ENV,
    LOCAL_JAVA_OPTIONS,
    LOCAL_SPARK_CONF,
    local_spark_conf,
    logging_java_options,
)


def test_built_archive_is_mapped_by_local_sessions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    archive = tmp_path / "classes.jsa"
    monkeypatch.setenv(ARCHIVE_ENV, str(archive))
    assert driver_java_options() is None, "no archive built yet: nothing to map"
    assert "SharedArchiveFile" not in local_spark_conf()["spark.driver.extraJavaOptions"]

    archive.write_bytes(b"built")
    options = local_spark_conf()["spark.driver.extraJavaOptions"]
    assert f"-XX:SharedArchiveFile={archive}" in options


def test_empty_settings_leave_the_jvm_as_java_starts_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ARCHIVE_ENV, "")
    assert archive_path() is None
    logging = logging_java_options()  # not the JVM's tuning: its log4j configuration
    conf = local_spark_conf(backend="delta-rs")  # no jars: the JVM's own settings only
    assert conf["spark.driver.extraJavaOptions"] == f"{LOCAL_JAVA_OPTIONS} {logging}"
    monkeypatch.setenv(JAVA_OPTIONS_ENV, "")
    conf = local_spark_conf(backend="delta-rs")
    assert conf == LOCAL_SPARK_CONF | {"spark.driver.extraJavaOptions": logging}


def test_the_driver_jvm_runs_with_the_local_options(spark: SparkSession) -> None:
    runtime = spark.sparkContext._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
    arguments = set(runtime.getInputArguments())
    assert set(LOCAL_JAVA_OPTIONS.split()) <= arguments, arguments


def test_the_jit_directives_load_and_keep_stdout_clean() -> None:
    """The JVM skips directive patterns it cannot parse (with a message) or refuses the file;
    this one it installs whole, and says so on stderr (stdout belongs to the CLI's output)."""
    java = subprocess.run(
        ["java", *LOCAL_JAVA_OPTIONS.split(), "-version"], capture_output=True, text=True,
        check=False,
    )
    assert java.returncode == 0, java.stderr
    assert "error" not in java.stderr.lower(), java.stderr
    assert "2 compiler directives added" in java.stderr
    assert java.stdout == ""


def test_a_foreign_archive_neither_stops_nor_bothers_the_jvm(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    archive = tmp_path / "foreign.jsa"
    archive.write_bytes(bytes(range(256)) * 64)  # not an archive of this JDK
    monkeypatch.setenv(ARCHIVE_ENV, str(archive))
    options = driver_java_options()
    assert options is not None
    java = subprocess.run(
        ["java", *options.split(), "-version"], capture_output=True, text=True, check=False
    )
    assert java.returncode == 0, java.stderr
    assert "cds" not in java.stderr.lower() and "shared" not in java.stderr.lower()


def test_the_test_session_maps_the_archive_the_setup_built(spark: SparkSession) -> None:
    conf = spark.sparkContext.getConf()
    path = archive_path(conf.get("spark.jars"))  # the archive of the session's set of jars
    if path is None or not path.is_file():
        pytest.skip("no class archive built (./dev builds it into .venv/)")
    options = conf.get("spark.driver.extraJavaOptions") or ""
    assert f"-XX:SharedArchiveFile={path}" in options
