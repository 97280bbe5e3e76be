"""Protocol plug-ins on Spark executors: ship their code, then check they import there.

A task resolves its protocol by name on the executor (``protocols.registry``), so the
executor's Python must import what the driver imported: an installed plug-in, or a module
named by ``-p package.module:SPEC``. The local cluster's executors run the driver's
interpreter (``spark.pyspark.python``), which has the driver's installed distributions,
but neither the driver's working directory nor, on the docker backend or ``--master``,
those distributions. So the driver ships each plug-in's top-level package as a zip
(``SparkContext.addPyFile``, which later tasks put on ``sys.path``) and names the plug-ins
in the executors' environment, for an executor with no such distribution installed. A
one-task job then resolves every name on an executor; one that fails is one line.
"""

from __future__ import annotations

import sys
import tempfile
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ftctl.cluster.errors import InfraError
from protocols.plugins import SHIPPED_ENV

_SKIP = {"__pycache__", ".git", ".mypy_cache", ".pytest_cache", ".ruff_cache"}


def used() -> dict[str, str]:
    """The plug-in protocols this driver process loaded: name -> ``module:ATTR``."""
    from protocols.registry import PROTOCOLS

    return PROTOCOLS.used_outside()


def executor_conf(plugins: Mapping[str, str]) -> dict[str, str]:
    """Spark conf naming ``plugins`` to the executors' registry (empty when none)."""
    if not plugins:
        return {}
    names = ";".join(f"{name}={target}" for name, target in plugins.items())
    return {f"spark.executorEnv.{SHIPPED_ENV}": names}


def top_level(target: str) -> Path:
    """The top-level package directory (or single module file) of ``module:ATTR``, as
    imported in this process."""
    top = target.partition(":")[0].split(".")[0]
    module = sys.modules.get(top)
    paths = list(getattr(module, "__path__", []) or [])
    if paths:
        return Path(paths[0]).resolve()
    origin = getattr(module, "__file__", None)
    if origin is None:
        raise InfraError(f"protocol module {top!r} has no files to ship to the executors")
    return Path(origin).resolve()


def zip_package(source: Path, into: Path) -> Path:
    """``source`` (a package directory or a module) as a zip importable from ``sys.path``."""
    into.mkdir(parents=True, exist_ok=True)
    out = into / f"{source.stem}.zip"
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        if source.is_file():
            z.write(source, source.name)
        else:
            for path in sorted(source.rglob("*")):
                rel = path.relative_to(source.parent)
                if path.is_file() and not _SKIP & set(rel.parts) and path.suffix != ".pyc":
                    z.write(path, str(rel))
    return out


def ship(sc: Any, plugins: Mapping[str, str], log_dir: Path | None) -> None:
    """Add each plug-in's top-level package to what later tasks import (zips written under
    ``log_dir``, else a temporary directory), then check on an executor that every name
    resolves (raises ``InfraError``, one line, if one does not)."""
    if not plugins:
        return
    workdir = Path(log_dir) / "plugins" if log_dir else Path(tempfile.mkdtemp(prefix="ftctl-"))
    tops = {top_level(target) for target in plugins.values()}
    for source in sorted(tops):
        sc.addPyFile(str(zip_package(source, workdir)))
    problems = sc.parallelize([sorted(plugins)], 1).map(resolve_here).collect()[0]
    if problems:
        raise InfraError(f"on a Spark executor, {problems[0]}; install the protocol's "
                         "distribution (and what it imports) into the executors' Python")


def resolve_here(names: list[str]) -> list[str]:
    """On an executor: why each of ``names`` does not resolve (empty: all do)."""
    from protocols.registry import UnknownProtocol, registered

    problems = []
    for name in names:
        try:
            registered(name)
        except UnknownProtocol as exc:  # its message names the protocol
            problems.append(str(exc))
    return problems
