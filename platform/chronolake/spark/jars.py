"""The JVM jars the real stack needs beyond pyspark's own: pinned, checksummed and cached.

pyspark ships Spark and Hadoop's client, not Delta Lake's JVM classes (delta-spark) nor
Hadoop's S3 filesystem (hadoop-aws and the AWS SDK modules S3A uses). `jars.lock.json`
beside this file pins every jar of those stacks that pyspark does not already ship, with its
SHA-256. They are fetched once into a user-level cache keyed by checksum
(`~/.cache/chronolake/jars/<sha256>/<file>`), so a second set-up, a fresh clone or a
pip-only install on the same machine downloads nothing.

Fetching uses Spark's own Maven resolver (`spark-submit --packages`, Ivy), the client every
pyspark install has, run once with an empty `~/.m2` view (Spark's resolver trusts a local
Maven cache that holds a POM without its jar). A jar whose checksum differs from the lock is
refused; nothing half-written ever lands in the cache.

`python -m chronolake.spark.jars fetch` fetches the sets every user may need, delta-spark and s3a
(`./dev` does); `fetch s3-dynamodb` the opt-in one. `python -m chronolake.spark.jars lock [SET ...]`
re-pins the sets named (all by default) after a version change in `ROOTS`, keeping the others.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

import pyspark

from chronolake.errors import ChronolakeError

LOCK_FILE = Path(__file__).with_name("jars.lock.json")
CACHE_ENV = "CHRONOLAKE_JAR_CACHE"
"""Overrides the cache folder (default `$XDG_CACHE_HOME/chronolake/jars`, or `~/.cache/…`)."""
SPARK_HOME = Path(pyspark.__file__).parent
FETCH_TIMEOUT_SECONDS = 900


class JarSet(StrEnum):
    """A stack of jars a session may load: Delta Lake's JVM classes, S3A for `s3://`, or
    Delta's DynamoDB log store for several writers on S3 (`chronolake.spark.stack`, opt-in)."""

    DELTA_SPARK = "delta-spark"
    S3A = "s3a"
    S3_DYNAMODB = "s3-dynamodb"


DEFAULT_SETS = (JarSet.DELTA_SPARK, JarSet.S3A)
"""What `fetch` brings without names: the sets a session loads without being asked to."""


ROOTS: Mapping[JarSet, tuple[str, ...]] = {
    JarSet.DELTA_SPARK: ("io.delta:delta-spark_4.2_2.13:4.4.0",),
    # hadoop-aws names the AWS SDK's whole `bundle` (about 0.5 GB): only the modules S3A
    # uses instead (the S3 client and its transfer manager, STS for assumed roles, and the
    # two HTTP clients S3A builds), at the SDK version hadoop-aws 3.5.0 was built with.
    JarSet.S3A: (
        "org.apache.hadoop:hadoop-aws:3.5.0",
        *(f"software.amazon.awssdk:{module}:2.35.4" for module in (
            "s3", "s3-transfer-manager", "sts", "apache-client", "netty-nio-client",
        )),
    ),
    # Delta's S3DynamoDBLogStore is built on the AWS SDK v1 (`com.amazonaws`, its own
    # packages, beside S3A's v2 modules), which its POM declares `provided`: the DynamoDB
    # module is named here, at the version Delta 4.4.0 builds and tests with.
    JarSet.S3_DYNAMODB: (
        "io.delta:delta-storage-s3-dynamodb:4.4.0",
        "com.amazonaws:aws-java-sdk-dynamodb:1.12.262",
    ),
}
"""What each set asks for; its transitive dependencies are resolved and pinned with it."""

ALWAYS_EXCLUDED = ("software.amazon.awssdk:bundle",)
EXCLUDED: Mapping[JarSet, tuple[str, ...]] = {
    # The SDK v1 DynamoDB module depends on its S3 and KMS modules for its object mapper's
    # S3 links; the DynamoDB client the log store builds loads neither.
    JarSet.S3_DYNAMODB: ("com.amazonaws:aws-java-sdk-s3", "com.amazonaws:aws-java-sdk-kms"),
}
"""Dependencies of a set's roots that it does not load, as `group:artifact`."""


class JarFetchError(ChronolakeError):
    """The pinned jars could not be fetched or did not match their checksums."""


@dataclass(frozen=True, slots=True)
class LockedJar:
    """One pinned jar: its Maven coordinate, the file name it is cached under, its SHA-256."""

    coordinate: str
    file: str
    sha256: str

    @property
    def group_artifact(self) -> str:
        return self.coordinate.rsplit(":", 1)[0]


def cache_dir() -> Path:
    """Where fetched jars are kept, one folder per checksum."""
    if configured := os.environ.get(CACHE_ENV):
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "chronolake" / "jars"


def locked(jar_set: JarSet) -> list[LockedJar]:
    """The jars `jar_set` pins, as `jars.lock.json` lists them."""
    return [LockedJar(**jar) for jar in _lock_entry(jar_set)["jars"]]


def cached_path(jar: LockedJar) -> Path:
    return cache_dir() / jar.sha256 / jar.file


def jar_paths(sets: Iterable[JarSet], *, progress: bool = True) -> list[Path]:
    """The cached files of every jar in `sets`, fetching those not cached yet (with a
    progress line on stderr when `progress`)."""
    paths: list[Path] = []
    for jar_set in sets:
        jars = locked(jar_set)
        if any(not cached_path(jar).is_file() for jar in jars):
            _fetch(jar_set, jars, progress=progress)
        # A jar two sets pin (delta-storage) is loaded once.
        paths += [path for path in map(cached_path, jars) if path not in paths]
    return paths


def _fetch(jar_set: JarSet, jars: Sequence[LockedJar], *, progress: bool) -> None:
    if progress:
        print(f"chronolake: fetching the pinned {jar_set} jars ({len(jars)}) into "
              f"{cache_dir()} once ...", file=sys.stderr, flush=True)
    pinned = {jar.group_artifact for jar in jars}
    excluded = {*_excluded(jar_set), *(_lock_entry(jar_set)["provided"])} - pinned
    with tempfile.TemporaryDirectory(prefix="chronolake-jars-") as folder:
        # Every pinned jar asked for by name: an exclusion then never drops one that is only
        # reached through an excluded module (commons-logging through Hadoop's client).
        resolved = resolve([jar.coordinate for jar in jars], sorted(excluded), Path(folder))
        for jar in jars:
            found = resolved.get(jar.coordinate)
            if found is None:
                msg = (f"{jar.coordinate}: Maven's resolution of {jar_set} did not return this "
                       f"pinned jar; expected every jar of {LOCK_FILE.name}; re-pin with "
                       "'python -m chronolake.spark.jars lock'")
                raise JarFetchError(msg)
            _store(found, jar)


def _store(found: Path, jar: LockedJar) -> None:
    digest = sha256_of(found)
    if digest != jar.sha256:
        msg = (f"{jar.coordinate}: downloaded jar has SHA-256 {digest}, and "
               f"{LOCK_FILE.name} pins {jar.sha256}; nothing was cached; check the "
               "repository you resolve from, or re-pin deliberately")
        raise JarFetchError(msg)
    target = cached_path(jar)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.{os.getpid()}.partial")
    shutil.copyfile(found, partial)
    partial.replace(target)


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


_RESOLVED = re.compile(r"^\t(\S+)#(\S+);(\S+) from \S+ in \[default\]$", re.MULTILINE)


def resolve(roots: Sequence[str], excluded: Sequence[str], folder: Path) -> dict[str, Path]:
    """Resolve `roots` with their transitive dependencies (less `excluded`, `group:artifact`)
    through Spark's Maven resolver into `folder`; each resolved coordinate and its jar."""
    home, empty = folder / "home", folder / "nothing.py"
    home.mkdir()
    empty.write_text("")
    command = [
        str(SPARK_HOME / "bin" / "spark-submit"),
        "--driver-java-options", f"-Duser.home={home}",
        "--conf", f"spark.jars.ivy={folder / 'ivy'}",
        "--packages", ",".join(roots),
        *(["--exclude-packages", ",".join(excluded)] if excluded else []),
        str(empty),
    ]
    environment = {**os.environ, "SPARK_HOME": str(SPARK_HOME), "PYSPARK_PYTHON": sys.executable}
    try:
        done = subprocess.run(command, env=environment, capture_output=True, text=True,
                              timeout=FETCH_TIMEOUT_SECONDS, check=False)
    except subprocess.TimeoutExpired as timeout:
        msg = (f"resolving {', '.join(roots)} took over {FETCH_TIMEOUT_SECONDS} s; check that "
               "Maven Central is reachable (or a mirror in ~/.ivy2 settings), then retry")
        raise JarFetchError(msg) from timeout
    if done.returncode != 0:
        unresolved = re.findall(r"(?:UNRESOLVED DEPENDENCY|FAILED DOWNLOADS).*", done.stderr)
        msg = (f"could not fetch {', '.join(roots)} from Maven Central "
               f"({unresolved[0] if unresolved else 'resolution failed'}); check the network "
               "or proxy, then retry; the embedded delta-rs backend needs none of these jars")
        raise JarFetchError(msg)
    jars_folder = folder / "ivy" / "jars"
    return {
        f"{group}:{artifact}:{version}": jars_folder / f"{group}_{artifact}-{version}.jar"
        for group, artifact, version in _RESOLVED.findall(done.stdout + done.stderr)
        if (jars_folder / f"{group}_{artifact}-{version}.jar").is_file()
    }


def _shipped_by_pyspark() -> set[str]:
    """The artifact names of pyspark's own jars (`jackson-core`, `hadoop-client-runtime`):
    the JVM loads Spark's copy first, so another copy is dead weight."""
    return {re.sub(r"-\d[^-]*(-[A-Za-z0-9.]+)?\.jar$", "", jar.name)
            for jar in (SPARK_HOME / "jars").glob("*.jar")}


def _excluded(jar_set: JarSet) -> tuple[str, ...]:
    return (*ALWAYS_EXCLUDED, *EXCLUDED.get(jar_set, ()))


def _lock_entry(jar_set: JarSet) -> dict[str, list]:
    entry = json.loads(LOCK_FILE.read_text())["sets"].get(jar_set.value)
    if entry is None:
        msg = (f"{LOCK_FILE.name} pins no {jar_set} jars ({', '.join(ROOTS[jar_set])}); pin "
               f"them with 'python -m chronolake.spark.jars lock {jar_set}' on a machine whose "
               "Maven resolver serves those artifacts")
        raise JarFetchError(msg)
    return dict(entry)


def write_lock(only: Iterable[JarSet] | None = None) -> None:
    """Resolve the sets `only` names (every set when None) afresh and pin what pyspark does
    not ship, keeping the other sets' pins as they are (maintainers only)."""
    shipped = _shipped_by_pyspark()
    chosen = set(ROOTS if only is None else only)
    sets: dict[str, object] = (
        json.loads(LOCK_FILE.read_text())["sets"] if LOCK_FILE.is_file() else {})
    for jar_set, roots in ROOTS.items():
        if jar_set not in chosen:
            continue
        with tempfile.TemporaryDirectory(prefix="chronolake-lock-") as folder:
            resolved = resolve(roots, _excluded(jar_set), Path(folder))
            kept = {c: p for c, p in resolved.items() if c.split(":")[1] not in shipped}
            sets[jar_set.value] = {
                "roots": list(roots),
                "provided": sorted(c.rsplit(":", 1)[0] for c in resolved if c not in kept),
                "jars": [{"coordinate": c, "file": p.name, "sha256": sha256_of(p)}
                         for c, p in sorted(kept.items())],
            }
    ordered = {name: sets[name] for name in [s.value for s in JarSet] if name in sets}
    LOCK_FILE.write_text(json.dumps({"spark": pyspark.__version__, "sets": ordered}, indent=1)
                         + "\n")


USAGE = ("usage: python -m chronolake.spark.jars fetch [delta-spark] [s3a] [s3-dynamodb] "
         "| lock [delta-spark] [s3a] [s3-dynamodb]")


def main(argv: Sequence[str]) -> int:
    names = [s.value for s in JarSet]
    if argv[:1] not in (["lock"], ["fetch"]) or any(name not in names for name in argv[1:]):
        print(USAGE, file=sys.stderr)
        return 2
    try:
        if argv[0] == "lock":
            write_lock([JarSet(name) for name in argv[1:]] or None)
            print(f"chronolake: pinned {LOCK_FILE}")
            return 0
        paths = jar_paths([JarSet(name) for name in argv[1:]] or DEFAULT_SETS)
    except JarFetchError as error:
        print(f"chronolake: {error}", file=sys.stderr)
        return 1
    print(f"chronolake: {len(paths)} pinned jars in {cache_dir()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
