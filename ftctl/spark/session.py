"""The Spark session the host runs on: configured for many long-running single-task jobs.

The driver JVM's own output (log4j2 to its console, JVM warnings) never reaches the terminal:
``start_session(log_dir=...)`` launches the JVM with its stdout and stderr piped into
``driver.log`` in that folder, and ``verbose`` also streams each line to our stderr.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any

from ftctl.cluster.errors import InfraError
from ftctl.spark import allocator
from ftctl.spark import plugins as spark_plugins

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
        # Every restart is a Spark job. The driver JVM keeps the status of finished jobs,
        # stages and tasks (up to 1,000 jobs by default, and every root RDD of the job
        # graph), so a chaos run with hundreds of restarts grew its heap for the whole run.
        # Nothing of ftctl reads them back.
        "spark.ui.retainedJobs": "50",
        "spark.ui.retainedStages": "50",
        "spark.ui.retainedTasks": "500",
        "spark.ui.retainedDeadExecutors": "10",
        "spark.ui.dagGraph.retainedRootRDDs": "50",
        "spark.sql.ui.retainedExecutions": "10",
        "spark.driver.memory": "512m",
        "spark.executor.memory": "512m",
        "spark.executor.extraJavaOptions": "-XX:+UseSerialGC -XX:TieredStopAtLevel=1",
        "spark.pyspark.python": sys.executable,
        "spark.pyspark.driver.python": sys.executable,
        # A fresh Python worker per task: threads and sockets of an instance that ended
        # can never leak into the next instance scheduled on the same executor.
        "spark.python.worker.reuse": "false",
        # ...forked by a daemon that imported ftctl's pure-Python modules already, so a
        # fresh worker does not pay for them again (ftctl/spark/daemon.py).
        "spark.python.daemon.module": "ftctl.spark.daemon",
        "spark.sql.shuffle.partitions": "4",
        # Into driver.log (never the terminal): warnings explain a failed run.
        "spark.log.level": "WARN",
        "spark.ui.showConsoleProgress": "false",
    }


def driver_conf(bind: str) -> dict[str, str]:
    """Where the driver JVM listens for executors: with ``--bind`` off loopback, on that
    address (executors on other hosts fetch tasks and send results there), advertised as
    the control channel advertises itself; on loopback, ``spark_conf``'s defaults."""
    from ftctl.spark import wire

    if bind == wire.HOST:
        return {}
    return {"spark.driver.bindAddress": bind or "0.0.0.0",
            "spark.driver.host": wire.advertised((bind, 0))[0]}


def heap_pinned(conf: dict[str, str]) -> dict[str, str]:
    """``conf`` with the driver JVM's whole heap (``spark.driver.memory``, whatever set it)
    committed and touched at start, unless ``conf`` sets the driver's JVM options itself.

    G1 otherwise grows and shrinks the heap with the load, and a long run's driver JVM
    moved in 30-60 MB steps (the soak benchmark read them as a trend); resident memory is
    then flat from the start.
    """
    key = "spark.driver.extraJavaOptions"
    if key in conf:
        return conf
    return {**conf, key: f"-Xms{conf['spark.driver.memory']} -XX:+AlwaysPreTouch"}


DRIVER_LOG = "driver.log"


def start_session(master: str, app_name: str, slots: int, log_dir: Path | None = None,
                  verbose: bool = False, conf: dict[str, str] | None = None) -> Any:
    """A SparkSession on ``master`` with at least ``slots`` task slots registered.

    With ``log_dir``, the driver JVM writes everything it prints to ``log_dir/driver.log``
    (streamed to stderr as well when ``verbose``); without it, the JVM inherits our
    terminal as pyspark would have it. ``conf`` overrides ``spark_conf``'s settings.
    """
    from pyspark.sql import SparkSession

    # Before py4j and the host start their threads (see ``allocator``).
    allocator.cap_arenas()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    plugins = spark_plugins.used()  # protocols from outside ftctl: shipped once it is up
    conf = heap_pinned({**spark_conf(master, app_name), **spark_plugins.executor_conf(plugins),
                        **(conf or {})})
    builder = SparkSession.builder
    for key, value in conf.items():
        builder = builder.config(key, value)
    try:
        if log_dir is not None:
            _launch_driver(conf, Path(log_dir) / DRIVER_LOG, verbose)
        spark = builder.getOrCreate()
    except BaseException as exc:
        # Interrupted or failed half-way, the driver JVM may already run, and with no
        # session there is nothing stop_session could stop: it would outlive us.
        _kill_driver_jvms()
        if not isinstance(exc, Exception):
            raise
        reason = first_line(exc)
        raise InfraError(f"could not start a Spark session on {master}: {reason}") from exc
    try:
        wait_for_slots(spark.sparkContext, slots)
        spark_plugins.ship(spark.sparkContext, plugins, log_dir)
    except BaseException:
        stop_session(spark)
        raise
    return spark


def _launch_driver(conf: dict[str, str], log: Path, verbose: bool) -> None:
    """Start the driver JVM with its output piped into ``log``; the builder then reuses it.

    pyspark launches the JVM itself unless ``SparkContext._gateway`` is already set, and
    its launcher takes Popen arguments: the same command, only the output goes elsewhere.
    """
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    log.parent.mkdir(parents=True, exist_ok=True)
    jconf = SparkConf(loadDefaults=False)
    for key, value in conf.items():
        jconf.set(key, value)
    with SparkContext._lock:
        if SparkContext._gateway is not None:
            return
        gateway = launch_gateway(jconf, popen_kwargs={
            "stdout": subprocess.PIPE, "stderr": subprocess.STDOUT})
        SparkContext._gateway = gateway
        SparkContext._jvm = gateway.jvm
    proc = getattr(gateway, "proc", None)
    if proc is not None and proc.stdout is not None:
        threading.Thread(target=_pump, args=(proc.stdout, log, verbose),
                         name="ftctl-driver-log", daemon=True).start()


def _pump(stream: IO[bytes], log: Path, verbose: bool) -> None:
    """Copy the JVM's output line by line until it exits (the pipe must never fill up)."""
    with open(log, "ab") as out:
        for line in iter(stream.readline, b""):
            out.write(line)
            out.flush()
            if verbose:
                with contextlib.suppress(Exception):
                    sys.stderr.write("[spark] " + line.decode(errors="replace"))
                    sys.stderr.flush()


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
            if DRIVER_CLASS in _command_line(child):
                child.kill()
                child.wait(10)
    SparkContext._gateway = None
    SparkContext._jvm = None


def _command_line(proc: Any, patience: float = 2.0) -> list[str]:
    """``proc``'s arguments, waited for while they read empty.

    A process caught inside ``execve`` (the launcher script becoming the JVM, or a child
    just forked) shows no arguments for a moment, even to its parent once ``Popen`` has
    returned; read then, a driver would look like a stranger and outlive us.
    """
    deadline = time.monotonic() + patience
    while True:
        args: list[str] = proc.cmdline()
        if args or time.monotonic() >= deadline or proc.status() == "zombie":
            return args
        time.sleep(0.01)


def first_line(exc: BaseException) -> str:
    lines = [ln for ln in str(exc).splitlines() if ln.strip()]
    return lines[0][:200] if lines else type(exc).__name__


def collect_executor_logs(work_dir: Path, app_id: str, dest: Path) -> list[Path]:
    """Copy the stdout/stderr of every executor of ``app_id`` under a standalone worker's
    work dir (``<work_dir>/<worker>/<app_id>/<executor>/``) into ``dest``, named
    ``<worker>-<executor>.<stream>``. Returns the files written; missing ones are skipped."""
    import shutil

    written = []
    for stream in sorted(Path(work_dir).glob(f"*/{app_id}/*/std*")):
        executor, worker = stream.parent.name, stream.parent.parent.parent.name
        dest.mkdir(parents=True, exist_ok=True)
        target = dest / f"executor-{worker}-{executor}.{stream.name}"
        with contextlib.suppress(OSError):
            shutil.copyfile(stream, target)
            written.append(target)
    return written
