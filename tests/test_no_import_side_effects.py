"""Importing chronolake changes nothing in the process; starting its Spark session sets what
Spark needs (the Python its workers run) then."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

_CLEAN = {k: v for k, v in os.environ.items()
          if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}


def _python(code: str) -> str:
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env=_CLEAN, timeout=300)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_importing_every_chronolake_module_leaves_the_environment_as_it_was() -> None:
    changed = _python(
        "import importlib, os, pkgutil\n"
        "before = dict(os.environ)\n"
        "import chronolake\n"
        "for module in pkgutil.walk_packages(chronolake.__path__, 'chronolake.'):\n"
        "    importlib.import_module(module.name)\n"
        "print(sorted(k for k in {*before, *os.environ} if before.get(k) != os.environ.get(k)))\n"
    )
    assert changed == "[]"


@pytest.mark.slow
def test_the_local_session_runs_python_workers_on_this_interpreter(tmp_path: Path) -> None:
    """Without PYSPARK_PYTHON, pyspark would start workers with whatever `python3` is on PATH,
    which lacks the project's packages."""
    executable = _python(
        "from pyspark.sql import functions as F\n"
        "from chronolake import Catalog\n"
        f"spark = Catalog({str(tmp_path)!r}).spark\n"
        "where = F.udf(lambda _: __import__('sys').executable, 'string')\n"
        "print(spark.range(1).select(where('id')).first()[0])\n"
    )
    assert executable.splitlines()[-1] == sys.executable


def test_the_runtime_package_exports_its_public_names() -> None:
    """`chronolake.runtime` loads each on first use; each is its module's own object."""
    exported = _python(
        "import chronolake.runtime as runtime\n"
        "print(sorted(name for name in runtime.__all__\n"
        "             if getattr(runtime, name).__module__.startswith('chronolake.runtime.')))\n"
    )
    import chronolake.runtime as runtime
    from chronolake.runtime.derived import DerivedTable

    assert exported == str(sorted(runtime.__all__))
    assert runtime.DerivedTable is DerivedTable
    with pytest.raises(AttributeError, match="no attribute 'Missing'"):
        _ = runtime.Missing


def test_import_chronolake_gives_a_notebook_user_its_faces_without_starting_spark() -> None:
    """`Catalog`, `materialize_view`, `full_refresh`, `RunResult`, the typed errors and the
    installed version, from the package itself; none of them starts a JVM."""
    shown = _python(
        "import importlib.metadata, chronolake\n"
        "from pyspark import SparkContext\n"
        "faces = {name: getattr(chronolake, name) for name in chronolake.__all__}\n"
        "print(sorted(faces))\n"
        "print(chronolake.__version__ == importlib.metadata.version('chronolake'))\n"
        "print(SparkContext._active_spark_context is None)\n"
        "print(sorted(name for name, face in faces.items() if isinstance(face, type)\n"
        "             and issubclass(face, chronolake.ChronolakeError)))\n"
    )
    names, same_version, no_spark, errors = shown.splitlines()
    assert {"Catalog", "materialize_view", "full_refresh", "RunResult", "__version__"} <= set(
        ast.literal_eval(names))
    assert same_version == "True" and no_spark == "True"
    assert ast.literal_eval(errors) == [
        "ChronolakeError", "DefinitionError", "NameTakenError", "RunError", "RunLockedError",
        "SourceError", "SourceRewrittenError", "UnknownNameError"]


def test_an_unknown_name_is_a_definition_error_of_its_own_kind(tmp_path: Path) -> None:
    from chronolake import Catalog, DefinitionError, UnknownNameError

    with pytest.raises(UnknownNameError) as error:
        Catalog(tmp_path).spec("nowhere")
    assert isinstance(error.value, DefinitionError)
    assert str(error.value) == "unknown table or view 'nowhere'; registered: none"
