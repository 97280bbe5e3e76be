"""The build context's wheels: the runtime dependencies, pinned to the driver's versions,
and a wheel of the project itself.

Executors unpickle the driver's task functions, so the container needs the project code
and the same pyspark, numpy and pydantic the driver has: the pins are read from the host's
installed distributions, not from pyproject ranges. Only what tasks import is installed
(pyarrow for the snapshot store's filesystems, pandas for the Structured Streaming
engine's UDFs; no matplotlib, typer, ...): the image stays smaller and builds faster.

The dependency wheels come from ``pip wheel`` once per pin set and are cached by the
pins' hash (pyspark alone is ~400 MB and is built from an sdist); the project wheel is
made here, byte-for-byte reproducibly, so its hash changes only when the code does.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import importlib.metadata as md
import importlib.util
import io
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Iterable
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from ftctl.cluster.errors import ClusterUsageError, InfraError
from ftctl.docker.cache import cache_dir, digest

# What the code running inside executors imports (ftctl.spark.task and the runtime;
# pandas for the Structured Streaming engine's pandas UDFs, which executors run).
RUNTIME_DISTS = ("pyspark", "numpy", "pyyaml", "pydantic", "psutil", "pyarrow", "pandas")
PROJECT_PACKAGES = ("ftctl", "protocols", "chaos")
PROJECT_NAME = "ftctl"
_MANIFEST = "pins.txt"  # written last: its presence marks a complete wheel directory
_ZIP_TIME = (1980, 1, 1, 0, 0, 0)  # fixed timestamps make the wheel reproducible

Progress = Callable[[str], None]


def runtime_pins(roots: Iterable[str] = RUNTIME_DISTS) -> list[str]:
    """``name==version`` for ``roots`` and their installed dependencies, sorted."""
    pins: dict[str, str] = {}
    todo = list(roots)
    while todo:
        name = canonicalize_name(todo.pop())
        if name in pins:
            continue
        try:
            dist = md.distribution(name)
        except md.PackageNotFoundError as exc:
            raise ClusterUsageError(
                f"{name} is not installed on this host; the image pins the driver's versions"
            ) from exc
        pins[name] = dist.version
        for text in dist.requires or []:
            req = Requirement(text)
            # Only unconditional requirements: extras (pyspark[sql], ...) are not needed.
            if req.marker is not None and not req.marker.evaluate({"extra": ""}):
                continue
            todo.append(req.name)
    return sorted(f"{name}=={version}" for name, version in pins.items())


def python_tag() -> str:
    return f"{sys.version_info.major}.{sys.version_info.minor}"


def dependency_wheels(pins: list[str], say: Progress) -> Path:
    """A directory holding a wheel for every pin (cached; filled with ``pip wheel`` once)."""
    root = cache_dir() / "wheels"
    target = root / digest([python_tag(), sys.platform, *pins])
    if (target / _MANIFEST).is_file():
        return target
    root.mkdir(parents=True, exist_ok=True)
    say(f"pip wheel: {len(pins)} runtime dependencies (first time only)")
    with tempfile.TemporaryDirectory(prefix="wheels-", dir=root) as tmp:
        log = root / "pip-wheel.log"
        argv = [sys.executable, "-m", "pip", "wheel", "--quiet", "--prefer-binary",
                "--wheel-dir", tmp, *pins]  # fmt: skip
        with open(log, "w") as out:
            result = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, check=False)
        if result.returncode != 0:
            tail = log.read_text(errors="replace").splitlines()[-20:]
            raise InfraError("pip wheel of the runtime dependencies failed", log_path=log,
                             log_tail=tail)
        Path(tmp, _MANIFEST).write_text("\n".join(pins) + "\n")
        shutil.rmtree(target, ignore_errors=True)
        os.replace(tmp, target)
        # TemporaryDirectory's cleanup must not fail on the moved-away directory.
        Path(tmp).mkdir()
    return target


def copy_wheels(source: Path, dest: Path) -> list[str]:
    """Hard-link (or copy) the wheels into a build context; returns their names."""
    dest.mkdir(parents=True, exist_ok=True)
    names = sorted(p.name for p in source.glob("*.whl"))
    for name in names:
        try:
            os.link(source / name, dest / name)
        except OSError:
            shutil.copy2(source / name, dest / name)
    return names


# --------------------------------------------------------------------------- project wheel


def project_files() -> list[tuple[str, Path]]:
    """``(path in wheel, file)`` for every file of the project's packages, sorted."""
    files: list[tuple[str, Path]] = []
    for package in PROJECT_PACKAGES:
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            raise ClusterUsageError(f"package {package} is not importable; install ftctl first")
        pkg_dir = Path(next(iter(spec.submodule_search_locations)))
        for path in pkg_dir.rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                files.append((f"{package}/{path.relative_to(pkg_dir).as_posix()}", path))
    return sorted(files)


def project_wheel(dest: Path, version: str) -> Path:
    """Write ``ftctl-<version>-py3-none-any.whl`` into ``dest``: same code, same bytes."""
    name = f"{PROJECT_NAME}-{version}-py3-none-any.whl"
    dist_info = f"{PROJECT_NAME}-{version}.dist-info"
    entries = [(arc, path.read_bytes()) for arc, path in project_files()]
    entries.append((f"{dist_info}/METADATA",
                    f"Metadata-Version: 2.1\nName: {PROJECT_NAME}\nVersion: {version}\n".encode()))
    entries.append((f"{dist_info}/WHEEL", b"Wheel-Version: 1.0\nGenerator: ftctl\n"
                    b"Root-Is-Purelib: true\nTag: py3-none-any\n"))
    record = io.StringIO()
    for arc, data in entries:
        sha = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.write(f"{arc},sha256={sha},{len(data)}\n")
    record.write(f"{dist_info}/RECORD,,\n")
    entries.append((f"{dist_info}/RECORD", record.getvalue().encode()))
    dest.mkdir(parents=True, exist_ok=True)
    path = dest / name
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for arc, data in entries:
            info = zipfile.ZipInfo(arc, date_time=_ZIP_TIME)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, data)
    return path


def project_version() -> str:
    with contextlib.suppress(md.PackageNotFoundError):
        return md.version(PROJECT_NAME)
    import ftctl

    return ftctl.__version__
