"""The local cluster backend: a Spark standalone master and workers as local processes.

The daemons are started with the installed pyspark's ``bin/spark-class``, bound to
127.0.0.1 on ports picked here, and recorded in a state file (see ``ftctl.cluster.state``)
so that any later ftctl process can inspect them, inject faults into them and stop them.

Typical use::

    with LocalCluster(workers=4, labels=["rack=a", "rack=a", "rack=b", "rack=b"]) as cluster:
        run_on(cluster.master_url)
        cluster.kill_worker(0)
        cluster.start_worker({"rack": "a"})
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any

import psutil

from ftctl.cluster import process
from ftctl.cluster.abandoned import prune_abandoned
from ftctl.cluster.errors import (
    ClusterAlreadyRunningError,
    ClusterUsageError,
    InfraError,
    NoClusterError,
)
from ftctl.cluster.java import JavaInfo, require_java
from ftctl.cluster.labels import Labels, LabelSpec, expand_labels, matches, parse_labels
from ftctl.cluster.lifecycle import ClusterLifecycle, Progress, interrupts_deferred
from ftctl.cluster.master_api import fetch_master_json, worker_entry
from ftctl.cluster.ports import HOST, PortAllocator, require_free_port
from ftctl.cluster.state import (
    ClusterState,
    DaemonInfo,
    WorkerInfo,
    default_state_dir,
    load_state,
    save_state,
    state_lock,
)
from ftctl.cluster.teardown import marker_arg, quote_java_opt, teardown
from ftctl.cluster.watchdog import Watchdog

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"

# The daemons only schedule and supervise; 512 MiB heap is plenty and starts faster.
DAEMON_MEMORY = "512m"
# C1-only JIT and the serial collector: several daemon JVMs boot at once on a small machine
# and compete for CPU; these cut start time noticeably (measured ~30% for 3 workers on
# 2 cores). Executors are started by the workers with the application's own options, so
# the options here do not slow real work down.
DAEMON_JAVA_OPTS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")

DAEMON_PROPERTIES = {
    # The REST submission server is not used and would take one more port.
    "spark.master.rest.enabled": "false",
    # Fail on a taken port instead of silently moving to port+1: the state file and the
    # master-JSON matching rely on each daemon being where ftctl put it.
    "spark.port.maxRetries": "0",
}

DEFAULT_WORKERS = 2
DEFAULT_CORES = 2
DEFAULT_MEMORY = "1g"
DEFAULT_START_TIMEOUT = 120.0
DEFAULT_GRACE = 5.0
_POLL_INTERVAL = 0.2
# Units required: Spark reads a bare number as bytes, so "1024" would be a 0 MiB worker.
_MEMORY = re.compile(r"^[1-9][0-9]*[mgt]$", re.IGNORECASE)



# --------------------------------------------------------------------------- status types


@dataclass
class WorkerStatus:
    """A worker as ftctl recorded it, merged with what the master says about it now."""

    name: str
    worker_id: str | None
    state: str  # master's state (ALIVE, DEAD, ...) or KILLED / STARTING / LOST
    address: str
    pid: int
    process_alive: bool
    cores: int
    cores_used: int
    memory_mb: int | None
    memory_used_mb: int
    labels: Labels
    ui_url: str


@dataclass
class ClusterStatus:
    """``status()`` result: master reachability plus one entry per worker."""

    state_dir: str
    master_url: str
    ui_url: str
    master_pid: int
    master_state: str  # the master's own status (ALIVE, ...) or UNREACHABLE / DOWN
    workers: list[WorkerStatus] = field(default_factory=list)

    @property
    def running(self) -> bool:
        return self.master_state == "ALIVE"

    @property
    def alive_workers(self) -> list[WorkerStatus]:
        return [w for w in self.workers if w.state == "ALIVE"]

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["running"] = self.running
        data["alive_workers"] = len(self.alive_workers)
        return data


# --------------------------------------------------------------------------- helpers


def spark_home() -> Path:
    """The installed pyspark, which ships Spark's jars and ``bin/spark-class``."""
    try:
        import pyspark
    except ImportError as exc:  # pragma: no cover - pyspark is a hard dependency
        raise ClusterUsageError("pyspark is not installed; pip install 'pyspark>=4'") from exc
    home = Path(pyspark.__file__).resolve().parent
    if not (home / "bin" / "spark-class").is_file():
        raise ClusterUsageError(f"pyspark at {home} has no bin/spark-class; reinstall pyspark")
    return home


def check_memory(memory: str) -> str:
    if not _MEMORY.match(memory.strip()):
        raise ClusterUsageError(
            f"bad worker memory {memory!r}: expected a size with a unit, e.g. 512m or 2g"
        )
    return memory.strip().lower()


def check_cores(cores: int) -> int:
    if cores < 1:
        raise ClusterUsageError(f"bad worker cores {cores}: must be at least 1")
    return cores


def _raise_system_exit(signum: int, _frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)


# --------------------------------------------------------------------------- the cluster


class LocalCluster(ClusterLifecycle):
    """A Spark standalone master and N workers as local processes on 127.0.0.1.

    Construct with the wanted shape, then ``up()`` (or use ``with``); ``attach()`` gets
    a handle on a cluster that another ftctl process started. All methods that change
    the cluster also update the state file, so other processes see the change.
    """

    def __init__(
        self,
        workers: int = DEFAULT_WORKERS,
        *,
        cores: int = DEFAULT_CORES,
        memory: str = DEFAULT_MEMORY,
        labels: Sequence[LabelSpec] | None = None,
        state_dir: Path | str | None = None,
        master_port: int | None = None,
        ui_port: int | None = None,
        start_timeout: float = DEFAULT_START_TIMEOUT,
        grace: float = DEFAULT_GRACE,
        owned: bool = False,
    ) -> None:
        if workers < 0:
            raise ClusterUsageError(f"bad worker count {workers}: must be 0 or more")
        self.n_workers = workers
        self.cores = check_cores(cores)
        self.memory = check_memory(memory)
        # Parsed now so a bad label is reported before any JVM starts.
        self.labels = expand_labels(labels, workers)
        self.state_dir = Path(state_dir).resolve() if state_dir else default_state_dir()
        self.master_port = master_port
        self.ui_port = ui_port
        self.start_timeout = start_timeout
        self.grace = grace
        # Owned: the cluster lives only as long as this process (``ftctl run``); a
        # watchdog tears it down if the process dies without doing so itself.
        self.owned = owned
        self._watchdog: Watchdog | None = None
        self._state: ClusterState | None = None
        self._popens: list[psutil.Popen] = []
        self._ports = PortAllocator()
        self._lock = threading.RLock()
        self._java: JavaInfo | None = None
        self._previous_sigterm: Any = None

    # ------------------------------------------------------------------ construction

    @classmethod
    def attach(cls, state_dir: Path | str | None = None) -> LocalCluster:
        """A handle on the cluster recorded in ``state_dir`` (raises NoClusterError if none)."""
        cluster = cls(workers=0, state_dir=state_dir)
        state = load_state(cluster.state_dir)
        if state is None:
            raise NoClusterError(f"no local cluster is running (state dir {cluster.state_dir})")
        cluster._adopt(state)
        return cluster

    def _adopt(self, state: ClusterState) -> None:
        self._state = state
        self._ports.reserve(state.master.port)
        self._ports.reserve(state.master.ui_port)
        for worker in state.workers:
            self._ports.reserve(worker.port)
            self._ports.reserve(worker.ui_port)

    # ------------------------------------------------------------------ properties

    @property
    def state(self) -> ClusterState:
        if self._state is None:
            raise NoClusterError(f"no local cluster is running (state dir {self.state_dir})")
        return self._state

    @property
    def master_url(self) -> str:
        return self.state.master_url

    @property
    def ui_url(self) -> str:
        return self.state.ui_url

    @property
    def conf_dir(self) -> Path:
        return self.state_dir / "conf"

    @property
    def log_dir(self) -> Path:
        return self.state_dir / "logs"

    @property
    def work_dir(self) -> Path:
        return self.state_dir / "work"

    # ------------------------------------------------------------------ up

    def _prepare(self, say: Progress) -> Path:
        self._java = require_java()
        return spark_home()

    def _clear_previous(self) -> None:
        """Refuse to start over a live cluster; clean up after a dead one."""
        if self._state is not None:
            raise ClusterAlreadyRunningError(
                f"this cluster is already up ({self._state.master_url})"
            )
        previous = load_state(self.state_dir)
        if previous is not None:
            master = process.same_process(previous.master.pid, previous.master.create_time)
            if master is not None:
                raise ClusterAlreadyRunningError(
                    f"a local cluster is already running ({previous.master_url}, state "
                    f"{self.state_dir}); use it, or stop it with `ftctl cluster down`"
                )
        # A crashed earlier run may have left daemons or executors: stop them first.
        teardown(self.state_dir, previous, grace=self.grace)

    def _prepare_dirs(self) -> None:
        for directory in (self.conf_dir, self.log_dir, self.work_dir):
            directory.mkdir(parents=True, exist_ok=True)
        # Fresh logs, so the tail quoted in an error is from this start, not an old one;
        # fresh work dirs, because executor dirs of earlier clusters would pile up there
        # (Spark's own worker cleanup is off by default and only runs on a live worker).
        for old in self.log_dir.glob("*.log"):
            old.unlink()
        shutil.rmtree(self.work_dir, ignore_errors=True)
        self.work_dir.mkdir(parents=True)
        lines = [f"{key} {value}" for key, value in DAEMON_PROPERTIES.items()]
        (self.conf_dir / "ftctl-daemons.conf").write_text("\n".join(lines) + "\n")

    def _daemon_env(self, home: Path) -> dict[str, str]:
        assert self._java is not None
        env = dict(os.environ)
        java_opts = [*DAEMON_JAVA_OPTS, quote_java_opt(marker_arg(self.state_dir))]
        env.update(
            {
                "SPARK_HOME": str(home),  # set, so spark-class skips its Python lookup
                "JAVA_HOME": str(self._java.home),  # the Java we checked is the one used
                "SPARK_LOCAL_IP": HOST,
                "SPARK_DAEMON_MEMORY": DAEMON_MEMORY,
                "SPARK_DAEMON_JAVA_OPTS": " ".join(java_opts),
                # Everything Spark writes goes under the state dir, never into site-packages.
                "SPARK_CONF_DIR": str(self.conf_dir),
                "SPARK_LOG_DIR": str(self.log_dir),
                "SPARK_WORKER_DIR": str(self.work_dir),
                "SPARK_PID_DIR": str(self.state_dir),
            }
        )
        return env

    def _spark_class(self, home: Path, main_class: str, args: Sequence[str]) -> list[str]:
        return [
            str(home / "bin" / "spark-class"),
            main_class,
            *args,
            "--properties-file",
            str(self.conf_dir / "ftctl-daemons.conf"),
        ]

    def _start_master(self, home: Path) -> None:
        port = self._requested_port(self.master_port, "master", "--port")
        ui_port = self._requested_port(self.ui_port, "master web UI", "--ui-port")
        argv = self._spark_class(
            home,
            MASTER_CLASS,
            ["--host", HOST, "--port", str(port), "--webui-port", str(ui_port)],
        )
        log = self.log_dir / "master.log"
        # Taken before the spawn: teardown trusts processes in our groups created after it.
        started_at = time.time()
        pid, create_time = self._spawn_daemon(home, "master", argv, log)
        master = DaemonInfo(
            pid=pid,
            create_time=create_time,
            host=HOST,
            port=port,
            ui_port=ui_port,
            log=str(log),
        )
        java, java_version = self._java_description()
        self._state = ClusterState(
            state_dir=str(self.state_dir),
            spark_home=str(home),
            java=java,
            java_version=java_version,
            started_at=started_at,
            master_url=f"spark://{HOST}:{port}",
            ui_url=f"http://{HOST}:{ui_port}",
            master=master,
            **self._owner(),
        )
        # Recorded before waiting, so `down` from another shell can stop a hung start.
        save_state(self._state)

    # ------------------------------------------------------------------ daemon hooks

    def _spawn_daemon(self, home: Path, daemon: str, argv: list[str], log: Path,
                      labels: Labels | None = None, cores: int | None = None,
                      memory: str | None = None) -> tuple[int, float]:
        """Start one daemon (``master`` or a worker's name) running ``argv``, its output to
        ``log``; its host pid and start time. Here a local process; the docker backend
        runs a container instead (``labels``, ``cores`` and ``memory`` size it)."""
        popen = process.spawn(argv, self._daemon_env(home), log, cwd=self.state_dir)
        self._popens.append(popen)
        return popen.pid, popen.create_time()

    def _java_description(self) -> tuple[str, str]:
        """The Java the daemons run on, for the state file: (path, version)."""
        assert self._java is not None
        return str(self._java.path), self._java.version

    def _ready_to_start_worker(self) -> None:
        """What ``start_worker`` needs besides the state file (here: the checked Java)."""
        if self._java is None:
            self._java = require_java()

    def _prune_abandoned(self) -> None:
        """A per-run cluster cleans up after runs that were killed before it: their
        clusters sit beside its own state dir (``.ftctl/runs/<run>``)."""
        if self.owned:
            prune_abandoned([self.state_dir.parent])

    def _start_watchdog(self) -> None:
        """An owned cluster: from here on, this process's death takes the cluster down."""
        if self.owned and self._watchdog is None:
            self._watchdog = Watchdog(self.state_dir, type(self))

    def _owner(self) -> dict[str, Any]:
        """``ClusterState``'s owner fields: this process if the cluster is owned."""
        if not self.owned:
            return {}
        me = psutil.Process()
        return {"owner_pid": me.pid, "owner_create_time": me.create_time()}

    def _requested_port(self, port: int | None, what: str, option: str) -> int:
        if port is None:
            return self._ports.pick()
        return self._ports.reserve(require_free_port(port, what, option))

    def _wait_master_alive(self, deadline: float) -> None:
        master = self.state.master
        while True:
            self._check_running(master, "Spark master")
            data = fetch_master_json(master.ui_port)
            if data is not None and data.get("status") == "ALIVE":
                return
            if time.monotonic() >= deadline:
                raise self._start_error(
                    f"Spark master did not become ALIVE within {self.start_timeout:g} s",
                    master.log,
                )
            time.sleep(_POLL_INTERVAL)

    def _launch_worker(self, home: Path, labels: Labels, cores: int, memory: str) -> WorkerInfo:
        """Start one worker daemon and record it (not waiting for it to register)."""
        with self._lock:
            # Fresh from the file: another ftctl process may have added workers meanwhile.
            name = f"w{len(self._reload().workers)}"
            port, ui_port = self._ports.pick(), self._ports.pick()
            work_dir = self.work_dir / name
            work_dir.mkdir(parents=True, exist_ok=True)
            log = self.log_dir / f"worker-{name}.log"
            args = [
                "--host", HOST,
                "--port", str(port),
                "--webui-port", str(ui_port),
                "--cores", str(cores),
                "--memory", memory,
                "--work-dir", str(work_dir),
            ]  # fmt: skip
            argv = self._spark_class(home, WORKER_CLASS, args)
            argv.append(self.state.master_url)
            pid, create_time = self._spawn_daemon(home, name, argv, log, labels, cores, memory)
            worker = WorkerInfo(
                pid=pid,
                create_time=create_time,
                host=HOST,
                port=port,
                ui_port=ui_port,
                log=str(log),
                name=name,
                cores=cores,
                memory=memory,
                labels=dict(labels),
                work_dir=str(work_dir),
            )
            self._update_state(lambda state: state.workers.append(worker))
            return worker

    def _wait_workers_alive(
        self, workers: Sequence[WorkerInfo], deadline: float, say: Progress
    ) -> None:
        """Poll the master until every worker in ``workers`` is ALIVE; record their ids."""
        pending = {w.name: w for w in workers}
        while pending:
            self._check_running(self.state.master, "Spark master")
            for worker in pending.values():
                self._check_running(worker, f"Spark worker {worker.name}")
            data = fetch_master_json(self.state.master.ui_port) or {}
            for name, worker in list(pending.items()):
                entry = worker_entry(data, worker.host, worker.port)
                if entry is not None and entry.get("state") == "ALIVE":
                    self._record_worker_id(worker, str(entry["id"]))
                    del pending[name]
            if not pending:
                break
            say(f"{len(workers) - len(pending)}/{len(workers)} worker(s) ALIVE")
            if time.monotonic() >= deadline:
                late = next(iter(pending.values()))
                raise self._start_error(
                    f"{len(pending)} of {len(workers)} Spark worker(s) did not become ALIVE "
                    f"within {self.start_timeout:g} s",
                    late.log,
                )
            time.sleep(_POLL_INTERVAL)
        say(f"{len(workers)}/{len(workers)} worker(s) ALIVE")

    def _record_worker_id(self, worker: WorkerInfo, worker_id: str) -> None:
        worker.worker_id = worker_id

        def apply(state: ClusterState) -> None:
            for recorded in state.workers:
                if recorded.name == worker.name:
                    recorded.worker_id = worker_id

        self._update_state(apply)

    def _check_running(self, daemon: DaemonInfo, what: str) -> None:
        if process.same_process(daemon.pid, daemon.create_time) is None:
            code = self._exit_code(daemon.pid)
            detail = f" with exit code {code}" if code is not None else ""
            raise self._start_error(f"{what} exited during start{detail}", daemon.log)

    def _exit_code(self, pid: int) -> int | None:
        for popen in self._popens:
            if popen.pid == pid:
                return popen.poll()
        return None

    def _start_error(self, message: str, log: str) -> InfraError:
        path = Path(log)
        return InfraError(message, log_path=path, log_tail=process.tail(path))

    # ------------------------------------------------------------------ down / status

    def _stop_everything(self, grace: float) -> list[int]:
        """Whole process trees of the recorded daemons, and any unrecorded leftovers."""
        return teardown(self.state_dir, load_state(self.state_dir) or self._state, grace)

    def _forget(self) -> None:
        self._state = None
        if self._watchdog is not None:
            # Only after the teardown: a watchdog released earlier could not finish it.
            self._watchdog.release()
            self._watchdog = None
        for popen in self._popens:
            popen.poll()  # reap, if it was our child and teardown did not already
        self._popens.clear()

    def status(self) -> ClusterStatus:
        """Master and workers as the master's JSON endpoint sees them now."""
        state = self._reload()
        master_proc = process.same_process(state.master.pid, state.master.create_time)
        data = fetch_master_json(state.master.ui_port) if master_proc is not None else None
        if master_proc is None:
            master_state = "DOWN"
        elif data is None:
            master_state = "UNREACHABLE"
        else:
            master_state = str(data.get("status", "UNKNOWN"))
        return ClusterStatus(
            state_dir=state.state_dir,
            master_url=state.master_url,
            ui_url=state.ui_url,
            master_pid=state.master.pid,
            master_state=master_state,
            workers=[_worker_status(w, data) for w in state.workers],
        )

    def _reload(self) -> ClusterState:
        """The state file's current content: another process may have changed the cluster."""
        state = load_state(self.state_dir)
        if state is None:
            raise NoClusterError(f"no local cluster is running (state dir {self.state_dir})")
        with self._lock:
            self._adopt(state)
        return state

    def _update_state(self, change: Callable[[ClusterState], None]) -> None:
        """Apply ``change`` to the freshest state (file first) and write it back."""
        with self._lock, state_lock(self.state_dir):
            state = load_state(self.state_dir) or self.state
            change(state)
            save_state(state)
            self._adopt(state)

    # ------------------------------------------------------------------ fault injection

    def workers(self, include_killed: bool = False) -> list[WorkerInfo]:
        """Recorded workers in start order (index = position in this list with killed ones)."""
        state = self._reload()
        return [w for w in state.workers if include_killed or not w.killed]

    def worker_pids(self) -> dict[str, int]:
        """Live workers' JVM pids, keyed by the master's worker id (name if not yet known)."""
        return {w.worker_id or w.name: w.pid for w in self.workers() if self._is_up(w)}

    def worker(self, which: str | int) -> WorkerInfo:
        """A worker by index (start order, killed ones included), master id or name."""
        all_workers = self.workers(include_killed=True)
        if isinstance(which, int):
            if not 0 <= which < len(all_workers):
                raise ClusterUsageError(
                    f"no worker #{which}: the cluster has had {len(all_workers)} worker(s)"
                )
            return all_workers[which]
        for worker in all_workers:
            if which in (worker.worker_id, worker.name):
                return worker
        raise ClusterUsageError(f"no worker {which!r} in this cluster")

    def workers_by_label(self, selector: LabelSpec) -> list[WorkerInfo]:
        """Live workers whose labels include every ``key=value`` of ``selector``."""
        parse_labels(selector)  # report a bad selector even if no worker is live
        return [w for w in self.workers() if matches(w.labels, selector) and self._is_up(w)]

    def worker_processes(self, which: str | int) -> list[psutil.Process]:
        """The worker JVM and everything under it (executors, their Python workers)."""
        worker = self.worker(which)
        proc = process.same_process(worker.pid, worker.create_time)
        if proc is None:
            return []
        found = process.tree(proc)
        found += process.group_members([worker.pid], worker.create_time)
        return list({p.pid: p for p in found}.values())

    def kill_worker(self, which: str | int, sig: int = signal.SIGKILL) -> WorkerInfo:
        """Kill a worker and its executors, as a node loss would; mark it killed.

        SIGKILL (the default) gives Spark no chance to clean up, like a crashed machine;
        another signal is escalated to SIGKILL after the grace period. Returns once the
        processes are gone; the master notices when the connection drops.
        """
        worker = self.worker(which)
        procs = self.worker_processes(which)
        if worker.killed or not procs:
            raise ClusterUsageError(f"worker {worker.name} ({worker.worker_id}) is not running")
        process.terminate_all(procs, grace=self.grace, sig=sig)

        def apply(state: ClusterState) -> None:
            for recorded in state.workers:
                if recorded.name == worker.name:
                    recorded.killed = True

        self._update_state(apply)
        worker.killed = True
        return worker

    def start_worker(
        self,
        labels: LabelSpec | None = None,
        *,
        cores: int | None = None,
        memory: str | None = None,
        timeout: float | None = None,
        wait: bool = True,
    ) -> WorkerInfo:
        """Add one worker to the running cluster and (by default) wait until it is ALIVE.

        This is how capacity comes back after a node loss (all at once or progressively).
        If it does not come up, it is stopped again and InfraError is raised. With
        ``wait=False`` it returns right after the launch (``worker_id`` still None), so a
        fault scheduler is not blocked for the seconds a JVM takes; ``wait_alive`` later.
        """
        parsed = parse_labels(labels or "")
        cores = check_cores(cores if cores is not None else self._default_cores())
        memory = check_memory(memory or self._default_memory())
        self._reload()
        self._ready_to_start_worker()
        home = Path(self.state.spark_home)
        worker = self._launch_worker(home, parsed, cores, memory)
        if wait:
            self.wait_alive(worker.name, timeout)
            worker.worker_id = self.worker(worker.name).worker_id
        return worker

    def wait_alive(self, which: str | int, timeout: float | None = None) -> WorkerInfo:
        """Wait until a started worker is ALIVE at the master; stop it and raise if not."""
        worker = self.worker(which)
        budget = self.start_timeout if timeout is None else timeout
        try:
            self._wait_workers_alive([worker], time.monotonic() + budget, lambda _msg: None)
        except BaseException:
            with interrupts_deferred():
                self._stop_failed_worker(worker)
            raise
        return worker

    def _default_cores(self) -> int:
        live = self.workers()
        return live[-1].cores if live else self.cores

    def _default_memory(self) -> str:
        live = self.workers()
        return live[-1].memory if live else self.memory

    def _stop_failed_worker(self, worker: WorkerInfo) -> None:
        proc = process.same_process(worker.pid, worker.create_time)
        if proc is not None:
            process.terminate_all(process.tree(proc), grace=self.grace)

        def apply(state: ClusterState) -> None:
            state.workers = [w for w in state.workers if w.name != worker.name]

        self._update_state(apply)

    def master_worker_state(self, which: str | int) -> str:
        """What the master says about a worker now: ALIVE, DEAD, ... or ABSENT."""
        worker = self.worker(which)
        data = fetch_master_json(self.state.master.ui_port)
        if data is None:
            raise InfraError(f"the Spark master at {self.state.ui_url} is not answering")
        entry = worker_entry(data, worker.host, worker.port)
        return str(entry["state"]) if entry is not None else "ABSENT"

    @staticmethod
    def _is_up(worker: WorkerInfo) -> bool:
        alive = process.same_process(worker.pid, worker.create_time) is not None
        return alive and not worker.killed

    # ------------------------------------------------------------------ context manager

    def __enter__(self) -> LocalCluster:
        # Default SIGTERM handling would end Python without running __exit__ and leave
        # the JVMs behind; turn it into SystemExit so teardown runs.
        if threading.current_thread() is threading.main_thread():
            self._previous_sigterm = signal.signal(signal.SIGTERM, _raise_system_exit)
        try:
            if self._state is None:
                self.up()
        except BaseException:
            self._restore_sigterm()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            self.down()
        finally:
            self._restore_sigterm()

    def _restore_sigterm(self) -> None:
        if self._previous_sigterm is not None:
            signal.signal(signal.SIGTERM, self._previous_sigterm)
            self._previous_sigterm = None


# --------------------------------------------------------------------------- module helpers


def _worker_status(worker: WorkerInfo, data: dict[str, Any] | None) -> WorkerStatus:
    entry = worker_entry(data, worker.host, worker.port) if data is not None else None
    alive = process.same_process(worker.pid, worker.create_time) is not None
    if entry is not None:
        state = str(entry.get("state", "UNKNOWN"))
    elif worker.killed:
        state = "KILLED"
    elif alive:
        state = "STARTING" if data is not None else "UNKNOWN"
    else:
        state = "LOST"
    entry = entry or {}
    return WorkerStatus(
        name=worker.name,
        worker_id=str(entry["id"]) if "id" in entry else worker.worker_id,
        state=state,
        address=worker.address,
        pid=worker.pid,
        process_alive=alive,
        cores=int(entry.get("cores", worker.cores)),
        cores_used=int(entry.get("coresused", 0)),
        memory_mb=int(entry["memory"]) if "memory" in entry else None,
        memory_used_mb=int(entry.get("memoryused", 0)),
        labels=dict(worker.labels),
        ui_url=f"http://{worker.host}:{worker.ui_port}",
    )
