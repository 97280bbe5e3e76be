"""The driver process of a Structured Streaming run: started with spark-submit in a
process group of its own, killed as a group, and never left behind.

The group holds the JVM, the Python driver program and the Python workers of its tasks
(``local[N]`` runs them all inside it), so a kill of the group is a driver crash, and the
watchdog of ``ftctl.cluster.watchdog`` (the one an owned cluster uses) stops the group
when ftctl itself dies, by SIGKILL too: it runs ``DriverGroup(...).down``.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

import psutil

from ftctl.cluster.java import require_java
from ftctl.cluster.local import spark_home
from ftctl.cluster.process import group_members, same_process, spawn, terminate_all

PIDS = "driver-pids.json"  # in the state dir: every driver group started, for the watchdog
_REPO = Path(__file__).resolve().parents[3]
QUERY = Path(__file__).with_name("query.py")


def conf(master: str, run_id: str, executors: int | None = None) -> dict[str, str]:
    """The driver's Spark configuration: loopback only, RocksDB state store, small.
    ``executors``: on a cluster whose workers faults strike, one single-core executor on
    each of that many workers (the standalone master spreads an application's cores over
    its workers), so a worker's loss is an executor's; else at most 2 cores."""
    spread = {} if executors is None else {"spark.executor.cores": "1",
                                           "spark.cores.max": str(max(executors, 1))}
    return {
        "spark.master": master,
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.memory": "512m",
        # A driver is started for every restart: on two busy cores, C2 compilation and a
        # parallel GC slow its start more than they speed a small query up.
        "spark.driver.extraJavaOptions": "-XX:+UseSerialGC -XX:TieredStopAtLevel=1",
        "spark.executor.memory": "512m",
        "spark.sql.shuffle.partitions": "2",
        "spark.sql.streaming.stateStore.providerClass":
            "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
        "spark.sql.streaming.noDataMicroBatches.enabled": "true",
        "spark.pyspark.python": sys.executable,
        "spark.pyspark.driver.python": sys.executable,
        "spark.log.level": "WARN",
        "spark.app.name": f"ftctl-{run_id}",
        # On a cluster, the executors' Python workers import ftctl's operators too.
        "spark.executorEnv.PYTHONPATH": str(_REPO),
        "spark.cores.max": "2",
        **spread,
    }


class DriverGroup:
    """The driver groups of one run, recorded in ``state_dir`` (``workers`` is unused: the
    watchdog constructs its teardown class as it constructs a cluster)."""

    def __init__(self, workers: int = 0, state_dir: Path | None = None) -> None:
        assert state_dir is not None
        self.state_dir = state_dir
        self.proc: psutil.Popen | None = None

    def start(self, spec_path: Path, attempt: int, log: Path) -> psutil.Popen:
        java = require_java()
        submit = spark_home() / "bin" / "spark-submit"
        env = {**os.environ, "JAVA_HOME": str(java.home), "PYSPARK_PYTHON": sys.executable,
               "PYSPARK_DRIVER_PYTHON": sys.executable, "FTCTL_ROOT": str(_REPO),
               "PYTHONPATH": os.pathsep.join(
                   p for p in (str(_REPO), os.environ.get("PYTHONPATH", "")) if p)}
        spec = json.loads(spec_path.read_text())
        argv = [str(submit), "--master", spec["conf"]["spark.master"],
                "--driver-memory", spec["conf"]["spark.driver.memory"],
                "--driver-java-options", spec["conf"]["spark.driver.extraJavaOptions"],
                str(QUERY), str(spec_path), str(attempt)]
        self.proc = spawn(argv, env, log, cwd=spec_path.parent)
        self._record(self.proc)
        return self.proc

    def _record(self, proc: psutil.Popen) -> None:
        path = self.state_dir / PIDS
        known = json.loads(path.read_text()) if path.exists() else []
        known.append([proc.pid, proc.create_time()])
        self.state_dir.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(known))
        os.replace(tmp, path)

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL the running driver's whole group: a crash, nothing flushed."""
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(psutil.Error):
            self.proc.wait(10)

    def python_workers(self, app: str | None = None) -> list[psutil.Process]:
        """The Python workers running the driver's tasks (what ``kill-task`` kills): in the
        driver's group in local mode, under the executors of ``app`` on a cluster."""
        if self.proc is None:
            return []
        out = []
        candidates = group_members([self.proc.pid], self.proc.create_time())
        if app is not None:
            candidates = [c for e in executors(app) for c in _descendants(e)]
        for p in candidates:
            with contextlib.suppress(psutil.Error):
                cmd = " ".join(p.cmdline())
                if "pyspark.daemon" in cmd or "pyspark.worker" in cmd:
                    out.append(p)
        # the daemon's forked workers are the leaves; the daemon itself outlives them
        leaves = [p for p in out if not _children(p)]
        return leaves or out

    def down(self, grace: float = 5.0) -> list[int]:
        """Stop every driver group this run started (and is still running)."""
        path = self.state_dir / PIDS
        known: list[Any] = json.loads(path.read_text()) if path.exists() else []
        procs = []
        for pid, created in known:
            leader = same_process(int(pid), float(created))
            with contextlib.suppress(ProcessLookupError, PermissionError):
                if leader is not None:
                    os.killpg(int(pid), signal.SIGTERM)
            procs += group_members([int(pid)], float(created))
        return terminate_all(procs, grace)


def _children(p: psutil.Process) -> list[psutil.Process]:
    try:
        return p.children()
    except psutil.Error:
        return []


def executors(app: str) -> list[psutil.Process]:
    """The executor JVMs of Spark application ``app`` on this machine (a standalone
    cluster's workers start them; ``--app-id`` names the application)."""
    out = []
    for p in psutil.process_iter(["cmdline"]):
        cmd = p.info["cmdline"] or []
        if "org.apache.spark.executor.CoarseGrainedExecutorBackend" in cmd and app in cmd:
            out.append(p)
    return out


def _descendants(p: psutil.Process) -> list[psutil.Process]:
    try:
        return p.children(recursive=True)
    except psutil.Error:
        return []
