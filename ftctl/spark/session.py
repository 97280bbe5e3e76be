"""The Spark session the host runs on: configured for many long-running single-task jobs."""

from __future__ import annotations

import contextlib
import os
import sys
import time
from typing import Any

from ftctl.cluster.errors import InfraError

SLOT_WAIT = 90.0
DRIVER_CLASS = "org.apache.spark.deploy.SparkSubmit"  # on the command line of a driver JVM


def spark_conf(master: str, app_name: str) -> dict[str, str]:
    return {
        "spark.master": master,
        "spark.app.name": app_name,
        # Loopback only: the driver, its block manager and every task bind to 127.0.0.1.
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        # The coordinator decides what is restarted; Spark must never retry a task.
        "spark.task.maxFailures": "1",
        # Long-running tasks from concurrent jobs must all run at once.
        "spark.scheduler.mode": "FAIR",
        "spark.locality.wait": "0s",
        "spark.ui.enabled": "false",
        "spark.driver.memory": "512m",
        "spark.executor.memory": "512m",
        "spark.executor.extraJavaOptions": "-XX:+UseSerialGC -XX:TieredStopAtLevel=1",
        "spark.pyspark.python": sys.executable,
        "spark.pyspark.driver.python": sys.executable,
        # A fresh Python worker per task: threads and sockets of an instance that ended
        # can never leak into the next instance scheduled on the same executor.
        "spark.python.worker.reuse": "false",
        "spark.sql.shuffle.partitions": "4",
        "spark.log.level": "ERROR",
        "spark.ui.showConsoleProgress": "false",
    }


def start_session(master: str, app_name: str, slots: int) -> Any:
    """A SparkSession on ``master`` with at least ``slots`` task slots registered."""
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder
    for key, value in spark_conf(master, app_name).items():
        builder = builder.config(key, value)
    try:
        spark = builder.getOrCreate()
    except BaseException as exc:
        # Interrupted or failed half-way, the driver JVM may already run, and with no
        # session there is nothing stop_session could stop: it would outlive us.
        _kill_driver_jvms()
        if not isinstance(exc, Exception):
            raise
        reason = _first_line(exc)
        raise InfraError(f"could not start a Spark session on {master}: {reason}") from exc
    spark.sparkContext.setLogLevel("ERROR")
    try:
        wait_for_slots(spark.sparkContext, slots)
    except BaseException:
        stop_session(spark)
        raise
    return spark


def task_slots(sc: Any) -> int:
    """Cores of the executors registered now (the driver's own entry excluded)."""
    status = sc._jsc.sc().getExecutorMemoryStatus()
    executors = status.size() - 1
    if executors <= 0:
        return 0
    return int(sc._jsc.sc().defaultParallelism())


def wait_for_slots(sc: Any, slots: int, timeout: float = SLOT_WAIT) -> None:
    deadline = time.monotonic() + timeout
    have = 0
    while time.monotonic() < deadline:
        have = task_slots(sc)
        if have >= slots:
            return
        time.sleep(0.2)
    raise InfraError(
        f"the cluster offers {have} task slot(s) after {timeout:.0f} s; this run needs {slots} "
        "(one per operator instance and spare task (--spares), plus room for replacements)"
    )


def stop_session(spark: Any) -> None:
    """Stop the session and make sure its driver JVM is gone too."""
    from pyspark import SparkContext

    gateway = getattr(SparkContext, "_gateway", None)
    proc = getattr(gateway, "proc", None)
    with contextlib.suppress(Exception):
        spark.stop()
    with contextlib.suppress(Exception):
        if gateway is not None:
            gateway.shutdown()
    if proc is not None:
        with contextlib.suppress(Exception):
            proc.terminate()
            proc.wait(10)
        with contextlib.suppress(Exception):
            proc.kill()
    SparkContext._gateway = None
    SparkContext._jvm = None


def _kill_driver_jvms() -> None:
    """Kill the Spark driver JVMs this process started (a session start that failed)."""
    import psutil
    from pyspark import SparkContext

    for child in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            if DRIVER_CLASS in child.cmdline():
                child.kill()
                child.wait(10)
    SparkContext._gateway = None
    SparkContext._jvm = None


def _first_line(exc: BaseException) -> str:
    lines = [ln for ln in str(exc).splitlines() if ln.strip()]
    return lines[0][:200] if lines else type(exc).__name__
