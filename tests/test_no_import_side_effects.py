"""Importing chronolake changes nothing in the process; starting its Spark session sets what
Spark needs (the Python its workers run) then."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest
from sqlglot import exp

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
    """Each of `chronolake.runtime`'s names is its module's own object."""
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
        "SourceError", "SourceRewrittenError", "UnknownNameError", "VersionGoneError"]


def test_import_chronolake_and_declaring_a_table_import_no_pyspark() -> None:
    """A notebook or a Dagster definitions file that only declares specs pays for no Spark."""
    loaded = _python(
        "import sys, chronolake\n"
        "chronolake.TableSpec(name='t', columns=[chronolake.PhysicalColumn(name='a', "
        "type='BIGINT')], options=chronolake.DeltaOptions(path='t'))\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pyspark', 'py4j')))\n"
    )
    assert loaded == "[]"


def test_every_type_a_declaration_may_use_has_a_spark_type() -> None:
    """The dialect owns the declarable types, `chronolake.spark.types` their Spark types."""
    from chronolake.schema.dialect import SUPPORTED_KINDS, Flink
    from chronolake.spark.types import spark_type

    element = {exp.DType.ARRAY: "<INT>", exp.DType.MAP: "<STRING, INT>"}
    for kind in SUPPORTED_KINDS:
        spark_type(exp.DataType.build(kind).sql(dialect=Flink) + element.get(kind, ""))
    assert spark_type("ARRAY<MAP<STRING, DECIMAL(10, 2)>>").simpleString() == (
        "array<map<string,decimal(10,2)>>")


@pytest.mark.parametrize("written", ["ARRAY", "MAP", "MAP<STRING>"])
def test_a_collection_type_without_its_element_types_is_refused(written: str) -> None:
    from chronolake import DefinitionError
    from chronolake.schema.dialect import parse_type

    with pytest.raises(DefinitionError, match=f"'{written}'.* needs its element type"):
        parse_type(written)


def test_an_unknown_name_is_a_definition_error_of_its_own_kind(tmp_path: Path) -> None:
    from chronolake import Catalog, DefinitionError, UnknownNameError

    with pytest.raises(UnknownNameError) as error:
        Catalog(tmp_path).spec("nowhere")
    assert isinstance(error.value, DefinitionError)
    assert str(error.value) == "unknown table or view 'nowhere'; registered: none"
