"""The set-up's promises: the script's on a machine without a suitable Java, and the
package's to a pip-only install."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _fake_java(folder: Path, version: str) -> None:
    java = folder / "java"
    java.write_text(f'#!/bin/sh\necho \'openjdk version "{version}" 2021-01-19\' >&2\n')
    java.chmod(java.stat().st_mode | stat.S_IEXEC)


@pytest.mark.parametrize("command", ["demo", "test"])
def test_without_java_17_the_set_up_stops_and_says_how_to_install_it(
    tmp_path: Path, command: str
) -> None:
    _fake_java(tmp_path, "11.0.2")
    env = {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}"}
    result = subprocess.run(
        [str(ROOT / "dev"), command], cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert "Java 17 or newer is required" in result.stderr
    assert "found Java '11.0.2'" in result.stderr
    assert "apt-get install -y openjdk-17-jre-headless" in result.stderr


def test_without_any_java_the_set_up_says_so(tmp_path: Path) -> None:
    for tool in ("bash", "dirname", "awk", "cut", "cat", "sha256sum", "id"):
        target = subprocess.run(["which", tool], capture_output=True, text=True).stdout.strip()
        (tmp_path / tool).symlink_to(target)
    result = subprocess.run(
        [str(ROOT / "dev"), "demo"], cwd=ROOT, env={"PATH": str(tmp_path)},
        capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 1
    assert "none was found on PATH" in result.stderr


def test_a_wheel_carries_every_file_the_package_reads_besides_its_code(tmp_path: Path) -> None:
    """A pip-only install (a Dagster deployment, no `./dev`) reads the jar lock, the JVM
    sources and the settings files from the installed package."""
    package = ROOT / "platform" / "chronolake"
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", str(ROOT), "-w", str(tmp_path)],
        capture_output=True, text=True, timeout=600, check=False)
    assert built.returncode == 0, built.stderr[-3000:]

    with zipfile.ZipFile(next(tmp_path.glob("chronolake-*.whl"))) as wheel:
        shipped = {name for name in wheel.namelist() if name.startswith("chronolake/")}

    data = {f"chronolake/{path.relative_to(package).as_posix()}" for path in package.rglob("*")
            if path.is_file() and path.suffix not in (".py", ".pyc")}
    assert data and data <= shipped, sorted(data - shipped)
