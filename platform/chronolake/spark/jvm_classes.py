"""chronolake's own JVM classes, shipped as Java source and compiled once per set of jars.

A class compiled against one Delta or Hadoop may not link against another, so each jar is
built by `javac` on first use and cached under the SHA-256 of its sources and of the jars it
was compiled against (`<jar cache>/built/<sha256>/chronolake-<name>.jar`, beside the pinned
jars of `chronolake.spark.jars`). A second session, or a fresh clone on the same machine, compiles
nothing. Only the first build needs a JDK.

`python -m chronolake.spark.jvm_classes NAME` prints the jar's path (building it if need be), for a
session the user brings.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path

import pyspark

from chronolake.errors import ChronolakeError
from chronolake.spark.jars import SPARK_HOME, JarSet, cache_dir, jar_paths

SOURCES = Path(__file__).with_name("jvm")
"""One folder of Java sources per jar (`jvm/<name>/<package path>/<Class>.java`)."""
LINKS_AGAINST: Mapping[str, tuple[JarSet, ...]] = {
    # Delta's LogStore API (delta-storage) and Hadoop's S3A, which the store commits through.
    "log_store": (JarSet.DELTA_SPARK, JarSet.S3A),
}
"""The pinned jar sets each jar is compiled against, besides pyspark's own jars."""
JAVA_RELEASE = "17"
COMPILE_TIMEOUT_SECONDS = 300


class JvmBuildError(ChronolakeError):
    """chronolake's own JVM classes could not be compiled."""


def built_jar(name: str) -> Path:
    """The jar of the sources in `jvm/<name>`, compiled against pyspark's jars and the jar
    sets it links against (fetched, built and cached on first use)."""
    classpath = jar_paths(LINKS_AGAINST[name])
    sources = sorted((SOURCES / name).rglob("*.java"))
    target = cache_dir() / "built" / _fingerprint(sources, classpath) / f"chronolake-{name}.jar"
    if not target.is_file():
        _build(name, sources, classpath, target)
    return target


def _fingerprint(sources: Sequence[Path], classpath: Sequence[Path]) -> str:
    digest = hashlib.sha256(f"pyspark {pyspark.__version__} java {JAVA_RELEASE}".encode())
    for source in sources:
        digest.update(source.relative_to(SOURCES).as_posix().encode())
        digest.update(source.read_bytes())
    for jar in classpath:  # cached under their checksums: the folder names them
        digest.update(jar.as_posix().encode())
    return digest.hexdigest()


def _build(name: str, sources: Sequence[Path], classpath: Sequence[Path], target: Path) -> None:
    javac = shutil.which("javac", path=_java_bin_path())
    if javac is None:
        msg = (f"chronolake's {name} classes are compiled on first use, and no `javac` was "
               "found on PATH or in JAVA_HOME; install a JDK 17 or newer once (the jar is "
               f"then cached in {target.parent.parent})")
        raise JvmBuildError(msg)
    print(f"chronolake: compiling its {name} classes once into {target.parent} ...",
          file=sys.stderr, flush=True)
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as scratch:
        classes = Path(scratch) / "classes"
        compiled = subprocess.run(
            [javac, "--release", JAVA_RELEASE, "-nowarn", "-proc:none", "-d", str(classes),
             "-cp", os.pathsep.join([str(SPARK_HOME / "jars" / "*"), *map(str, classpath)]),
             *map(str, sources)],
            capture_output=True, text=True, timeout=COMPILE_TIMEOUT_SECONDS, check=False)
        if compiled.returncode != 0:
            msg = (f"compiling chronolake's {name} classes failed (javac exit "
                   f"{compiled.returncode}):\n{compiled.stderr.strip()[-2000:]}\nnothing was "
                   "cached; check that the JDK is 17 or newer")
            raise JvmBuildError(msg)
        jar = Path(scratch) / target.name
        with zipfile.ZipFile(jar, "w", zipfile.ZIP_DEFLATED) as archive:
            archive.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\n")
            for compiled_class in sorted(classes.rglob("*.class")):
                archive.write(compiled_class, compiled_class.relative_to(classes).as_posix())
        os.replace(jar, target)  # whole or not at all, as a concurrent build may race


def _java_bin_path() -> str:
    folders = [str(Path(home) / "bin")] if (home := os.environ.get("JAVA_HOME")) else []
    return os.pathsep.join([*folders, os.environ.get("PATH", os.defpath)])


if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in LINKS_AGAINST:
        sys.exit(f"usage: python -m chronolake.spark.jvm_classes {{{' | '.join(LINKS_AGAINST)}}}")
    try:
        print(built_jar(sys.argv[1]))
    except ChronolakeError as error:
        sys.exit(f"chronolake: {error}")
