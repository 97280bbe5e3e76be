"""Finding a Java runtime for Spark's JVMs and checking it is new enough (17+)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ftctl.cluster.errors import JavaNotFoundError

MIN_JAVA_MAJOR = 17

_ADVICE = "install a JDK and set JAVA_HOME"
# `java -version` prints e.g. `openjdk version "17.0.15" 2025-04-15` or `java version "1.8.0_392"`;
# `java --version` prints `openjdk 17.0.15 2025-04-15` without quotes.
_QUOTED = re.compile(r'version\s+"(?P<v>[^"]+)"')
_UNQUOTED = re.compile(r"^(?:openjdk|java)\s+(?P<v>\d[^\s]*)", re.MULTILINE)
_MAJOR = re.compile(r"^(?P<first>\d+)(?:\.(?P<second>\d+))?")


@dataclass(frozen=True)
class JavaInfo:
    """A Java runtime: the executable, its home (what JAVA_HOME should be) and version."""

    path: Path
    home: Path
    version: str
    major: int


def parse_java_version(output: str) -> tuple[str, int]:
    """Return ``(version string, major)`` from ``java -version`` output.

    Old runtimes number themselves ``1.<major>`` (``1.8.0_392`` is Java 8); since 9 the
    first component is the major (``17.0.15``, ``21``, ``22-ea``).
    Raises ``ValueError`` if no version can be found.
    """
    match = _QUOTED.search(output) or _UNQUOTED.search(output)
    if match is None:
        raise ValueError(f"no Java version in {output[:200]!r}")
    version = match.group("v")
    numbers = _MAJOR.match(version)
    if numbers is None:
        raise ValueError(f"unrecognised Java version {version!r}")
    first = int(numbers.group("first"))
    if first == 1 and numbers.group("second") is not None:
        return version, int(numbers.group("second"))
    return version, first


def find_java(env: Mapping[str, str] | None = None) -> Path | None:
    """The ``java`` executable Spark's ``spark-class`` would use: JAVA_HOME first, then PATH.

    A JAVA_HOME that has no ``bin/java`` is reported as an error rather than silently
    skipped, because spark-class would use (and fail on) that same JAVA_HOME.
    """
    env = os.environ if env is None else env
    java_home = env.get("JAVA_HOME")
    if java_home:
        candidate = Path(java_home) / "bin" / "java"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
        raise JavaNotFoundError(
            f"Java {MIN_JAVA_MAJOR}+ is required (found: none; JAVA_HOME={java_home} has no "
            f"bin/java); {_ADVICE}"
        )
    found = shutil.which("java", path=env.get("PATH", ""))
    return Path(found) if found else None


def java_home_of(java: Path) -> Path:
    """The directory to export as JAVA_HOME for ``java`` (``/usr/bin/java`` is a symlink chain)."""
    return java.resolve().parent.parent


def java_version(java: Path, timeout: float = 30.0) -> tuple[str, int]:
    """Run ``java -version`` (it prints to stderr) and parse it."""
    try:
        done = subprocess.run(
            [str(java), "-version"], capture_output=True, text=True, timeout=timeout, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise JavaNotFoundError(
            f"Java {MIN_JAVA_MAJOR}+ is required (found: {java}, which would not run: {exc}); "
            f"{_ADVICE}"
        ) from exc
    try:
        return parse_java_version(done.stderr + done.stdout)
    except ValueError as exc:
        raise JavaNotFoundError(
            f"Java {MIN_JAVA_MAJOR}+ is required (found: {java}, version unreadable); {_ADVICE}"
        ) from exc


def require_java(env: Mapping[str, str] | None = None, minimum: int = MIN_JAVA_MAJOR) -> JavaInfo:
    """Find Java and check its version, or raise :class:`JavaNotFoundError` with one line."""
    java = find_java(env)
    if java is None:
        raise JavaNotFoundError(f"Java {minimum}+ is required (found: none); {_ADVICE}")
    version, major = java_version(java)
    if major < minimum:
        raise JavaNotFoundError(
            f"Java {minimum}+ is required (found: {version} at {java}); {_ADVICE}"
        )
    return JavaInfo(path=java, home=java_home_of(java), version=version, major=major)
