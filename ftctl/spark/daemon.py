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
"""

from __future__ import annotations

import importlib

# In the order a slot's task needs them; none imports pyarrow, pandas or numpy.
PRELOAD = (
    "pydantic",
    "ftctl.config.topology",
    "ftctl.runtime.topology",
    "ftctl.kernel.unit",
    "protocols.registry",
)


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
    preload()
    from pyspark.daemon import manager

    manager()
