"""PySpark's Python worker daemon, with ftctl's pure-Python modules imported before it forks.

Every Spark task runs in a Python worker forked by its executor's daemon, a fresh one per
task (``spark.python.worker.reuse`` is off, ``ftctl/spark/session.py``). A slot's worker
then imports the runtime, the kernel and every protocol: most of a second of CPU, paid
again by each slot, and by all of a returning worker's slots at once while a recovery
waits for them (18-24 s from task start to a slot waiting, measured under Figure 5 on a
busy 2-core machine). Imported once here, before the forks, each worker starts with them
(``spark.python.daemon.module``).

PySpark imports the worker module only after the fork because some libraries start
threads when imported (pyarrow, pandas), and a fork copies no thread. So this preloads
only modules that import none of those; ``tests/test_spark_daemon.py`` keeps it so. A
preload that fails is left to the worker, which imports what it needs itself.

Spark puts its own zipped copies of pyspark and py4j first on a Python worker's path.
Imported from a zip, every module is compiled from source (a zip holds no bytecode
cache), and each task's start re-reads the zips' directories (``setup_spark_files``
invalidates the import caches): about a second of CPU per worker, per task, on this
machine. When those zips are the installed pyspark's own (the cluster runs the pyspark
this Python has, as every cluster ftctl starts does), the same modules are on the path
already, with their bytecode cached, so the daemon takes the zips off the path before it
imports anything from them.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import sys
from pathlib import Path

# In the order a slot's task needs them; none imports pyarrow, pandas or numpy.
PRELOAD = (
    "pydantic",
    "pyspark.worker",
    "ftctl.config.topology",
    "ftctl.runtime.topology",
    "ftctl.kernel.unit",
    "protocols.registry",
)
# What Spark's zips on the path provide, each of which must still be found without them.
ZIPPED = ("pyspark", "py4j")


def drop_zipped_copies(path: list[str] | None = None) -> list[str]:
    """Take off ``path`` (``sys.path``) the zips inside the installed pyspark package
    (``pyspark/python/lib/*.zip``); the entries dropped. Nothing is dropped when pyspark
    is not installed as a distribution, or when without the zips some of ``ZIPPED``
    would no longer be found."""
    entries = sys.path if path is None else path
    try:
        home = Path(str(importlib.metadata.distribution("pyspark").locate_file("pyspark")))
    except importlib.metadata.PackageNotFoundError:
        return []
    home = home.resolve()
    zipped = [p for p in entries if p.endswith(".zip") and Path(p).resolve().is_relative_to(home)]
    if not zipped:
        return []
    kept = [p for p in entries if p not in zipped]
    saved = list(sys.path)
    try:
        sys.path[:] = kept
        importlib.invalidate_caches()
        found = all(importlib.util.find_spec(name) is not None for name in ZIPPED)
    finally:
        sys.path[:] = saved
    if not found:
        return []
    entries[:] = kept
    return zipped


def preload() -> list[str]:
    """Import ``PRELOAD``; the names that failed (a worker then imports them itself)."""
    failed = []
    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except Exception:
            failed.append(name)
    return failed


if __name__ == "__main__":
    drop_zipped_copies()
    preload()
    from pyspark.daemon import manager

    manager()
