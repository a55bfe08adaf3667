"""The repository's shape: `platform/` is a source root, never the `platform` module."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StringType

ROOT = Path(__file__).resolve().parent.parent


def test_platform_folder_is_not_a_package() -> None:
    assert not (ROOT / "platform" / "__init__.py").exists()
    assert (ROOT / "platform" / "chronolake" / "__init__.py").exists()


def test_import_platform_from_repository_root_gives_the_standard_library() -> None:
    probe = "import platform, uuid; print(platform.__file__); print(platform.system())"
    for command in ([sys.executable, "-c", probe], [sys.executable, "-m", "platform"]):
        result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=True)
        assert result.returncode == 0
    first = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True
    )
    module_file, system = first.stdout.split()
    assert Path(module_file).parent == Path(sysconfig.get_paths()["stdlib"])
    assert system == "Linux"


def test_spark_python_workers_run_the_project_interpreter(spark: SparkSession) -> None:
    executable = F.udf(lambda _: sys.executable, StringType())
    workers = spark.range(1).select(executable("id").alias("python")).first()
    assert workers is not None and workers.python == sys.executable
