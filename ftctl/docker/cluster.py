"""The docker cluster backend: a Spark standalone master and workers as containers.

Same public API as :class:`ftctl.cluster.local.LocalCluster`, so ``ftctl run``, the Spark
host and chaos use either backend. It shares the local cluster's code instead of copying
it: ``up``/``down`` are the lifecycle template's (``ftctl.cluster.lifecycle``), and the
Spark command lines, ports, state file, waiting for ALIVE, adding workers, status and label
lookups are ``LocalCluster``'s. It overrides only hooks: ``_spawn_daemon`` (a container
instead of a process), ``_java_description``, ``_ready_to_start_worker``, and the
lifecycle's ``_prepare``, ``_prepare_dirs``, ``_before_master``, ``_clear_previous``,
``_prune_abandoned`` and ``_stop_everything``. What differs is how daemons are started
and stopped:

- each daemon is a container of the ftctl image (``ftctl image build``), with host
  networking and Spark bound to 127.0.0.1, so the driver on the host and the executors in
  containers reach each other exactly as with local processes;
- the state dir and any extra ``mounts`` (the results dir: tasks write snapshots there and
  the driver reads them) are bind-mounted at the same path, so paths line up both sides;
- the host's PID namespace is shared (``pid_mode=host``): a task reports ``os.getpid()``
  to the driver and chaos signals that pid, so it must be a host pid, not a number from a
  container namespace (which would hit an unrelated host process). ``pid`` in the state
  file is the host pid of the container's main process (the daemon JVM), so process-level
  faults (SIGKILL of a task's Python worker, SIGSTOP of a tree) work unchanged; the engine
  still kills every process of the container's cgroup when its main process dies.
  ``own_pids`` gives each container its own PID namespace instead, as on separate hosts:
  such a cluster is for ``--master`` runs, where faults go through the tasks' own agent;
- every container carries ``ftctl.cluster=<state dir hash>`` and ``ftctl.run=<id>``:
  ``down()`` removes them by label, and ``prune()`` finds those a crashed run left.

Container-level faults (kill, stop/start, pause/unpause through the cgroup freezer,
restart) are methods here, for chaos code that wants a whole node to misbehave.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import signal
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from ftctl.cluster import process
from ftctl.cluster.errors import ClusterUsageError, InfraError, NoClusterError
from ftctl.cluster.labels import Labels, LabelSpec
from ftctl.cluster.lifecycle import Progress
from ftctl.cluster.local import (
    DAEMON_JAVA_OPTS,
    DAEMON_MEMORY,
    DEFAULT_CORES,
    DEFAULT_GRACE,
    DEFAULT_MEMORY,
    DEFAULT_START_TIMEOUT,
    DEFAULT_WORKERS,
    LocalCluster,
)
from ftctl.cluster.ports import HOST
from ftctl.cluster.state import (
    ClusterState,
    WorkerInfo,
    load_state,
    remove_state,
)
from ftctl.docker.engine import api_error, connect
from ftctl.docker.meta import (
    LABEL_CLUSTER,
    LABEL_PREFIX,
    LABEL_ROLE,
    LABEL_RUN,
    LABEL_STATE_DIR,
    LABEL_WORKER,
    DockerMeta,
    cluster_key,
    container_name,
    load_meta,
    remove_meta,
    save_meta,
)
from ftctl.docker.prune import PrunedCluster, prune_containers

CONTAINER_SPARK_HOME = "/opt/ftctl/spark"  # a symlink made by Dockerfile.deps
# A worker container holds the Worker JVM (DAEMON_MEMORY), executor JVMs and their Python
# workers on top of the executor memory Spark is told about; this is room for the rest.
WORKER_OVERHEAD_MB = 1536
MASTER_MEM_LIMIT = "1g"
MASTER_CPUS = 1.0
_SIZE = re.compile(r"^([1-9][0-9]*)([mgt])$", re.IGNORECASE)
_UNIT_MB = {"m": 1, "g": 1024, "t": 1024 * 1024}


@dataclass
class ContainerInfo:
    """One container of the cluster as the engine sees it now."""

    name: str
    role: str
    worker: str | None
    status: str  # created, running, paused, exited, ...
    pid: int
    labels: Labels


def memory_mb(size: str) -> int:
    match = _SIZE.match(size.strip())
    if match is None:
        raise ClusterUsageError(f"bad memory size {size!r}: expected e.g. 512m or 2g")
    return int(match.group(1)) * _UNIT_MB[match.group(2).lower()]


def new_run_id() -> str:
    return time.strftime("up-%Y%m%d-%H%M%S-") + secrets.token_hex(2)


class DockerCluster(LocalCluster):
    """A Spark standalone master and N workers as containers, host network, 127.0.0.1.

    Extra options over :class:`LocalCluster`: ``image`` (default: build or find the image
    for the current code), ``mounts`` (host paths bind-mounted at the same path, e.g. the
    results dir), ``cpus``/``mem_limit`` per worker container (default: ``min(cores,
    host CPUs)`` and the worker memory plus room for the daemons), ``run_id`` (the
    ``ftctl.run`` label), ``owned`` (the cluster belongs to this process: ``prune``
    removes it once the process is gone) and ``own_pids`` (a PID namespace per container).
    """

    DAEMON_NOUN = " container"

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
        image: str | None = None,
        mounts: Sequence[Path | str] = (),
        cpus: float | None = None,
        mem_limit: str | None = None,
        run_id: str | None = None,
        owned: bool = False,
        own_pids: bool | None = False,
        client: Any = None,
    ) -> None:
        super().__init__(
            workers, cores=cores, memory=memory, labels=labels, state_dir=state_dir,
            master_port=master_port, ui_port=ui_port, start_timeout=start_timeout, grace=grace,
            owned=owned,
        )  # fmt: skip
        if cpus is not None and cpus <= 0:
            raise ClusterUsageError(f"bad --cpus {cpus}: must be more than 0")
        if mem_limit is not None:
            memory_mb(mem_limit)
        self.image = image
        self.mounts = sorted({str(Path(m).resolve()) for m in mounts})
        self.cpus = cpus
        self.mem_limit = mem_limit
        self.run_id = run_id or new_run_id()
        self.own_pids = bool(own_pids)
        self.key = cluster_key(self.state_dir)
        self._client = client
        self._client_lock = threading.Lock()
        self._meta: DockerMeta | None = None

    @property
    def local_dir(self) -> Path:
        """Spark scratch space (shuffle files, executor temp), shared by all containers."""
        return self.state_dir / "local"

    # ------------------------------------------------------------------ engine

    @property
    def client(self) -> Any:
        """The Docker client, connected on first use (so a failing ping is one line)."""
        with self._client_lock:
            if self._client is None:
                self._client = connect()
            return self._client

    def _container(self, name: str) -> Any | None:
        import docker.errors

        try:
            return self.client.containers.get(container_name(self.key, name))
        except docker.errors.NotFound:
            return None
        except docker.errors.DockerException as exc:
            raise api_error(f"cannot inspect container {name}", exc) from exc

    def _cluster_containers(self) -> list[Any]:
        return list(
            self.client.containers.list(all=True, filters={"label": f"{LABEL_CLUSTER}={self.key}"})
        )

    # ------------------------------------------------------------------ construction

    @classmethod
    def attach(cls, state_dir: Path | str | None = None) -> DockerCluster:
        cluster = cls(workers=0, state_dir=state_dir)
        meta = load_meta(cluster.state_dir)
        state = load_state(cluster.state_dir)
        if meta is None or state is None:
            raise NoClusterError(f"no docker cluster is running (state dir {cluster.state_dir})")
        cluster._use_meta(meta)
        cluster._adopt(state)
        return cluster

    def _use_meta(self, meta: DockerMeta) -> None:
        self._meta = meta
        self.image, self.mounts, self.run_id = meta.image, list(meta.mounts), meta.run_id
        self.cpus, self.mem_limit, self.own_pids = meta.cpus, meta.mem_limit, meta.own_pids

    # ------------------------------------------------------------------ up

    def _prepare(self, say: Progress) -> Path:
        self.client  # noqa: B018 - fail with "no Docker engine" before anything else
        if self.image is None:
            from ftctl.docker.image import build_image

            say("checking the ftctl image")
            self.image = build_image(progress=say, client=self.client).tag
        return Path(CONTAINER_SPARK_HOME)

    def _prepare_dirs(self) -> None:
        super()._prepare_dirs()
        shutil.rmtree(self.local_dir, ignore_errors=True)  # a dead cluster's scratch
        self.local_dir.mkdir(parents=True)

    def _before_master(self) -> None:
        self._save_meta()

    def _save_meta(self) -> None:
        assert self.image is not None
        owner = psutil.Process() if self.owned else None
        self._meta = DockerMeta(
            image=self.image, cluster_key=self.key, run_id=self.run_id, mounts=self.mounts,
            cpus=self.cpus, mem_limit=self.mem_limit, own_pids=self.own_pids,
            owner_pid=owner.pid if owner else None,
            owner_create_time=owner.create_time() if owner else None,
        )  # fmt: skip
        save_meta(self.state_dir, self._meta)

    def _prune_abandoned(self) -> None:
        """Containers of killed runs go too, not only their local processes."""
        super()._prune_abandoned()
        if self.owned:
            prune_containers(client=self.client)

    def _clear_previous(self) -> None:
        # The master pid check of the local backend holds here too: it is the host pid of
        # the master container's JVM. After that, whatever is left of a dead cluster in
        # this state dir (local processes or containers) goes.
        super()._clear_previous()
        self._remove_containers()

    def _daemon_environment(self, log: Path) -> dict[str, str]:
        java_opts = " ".join(DAEMON_JAVA_OPTS)
        return {
            "SPARK_LOCAL_IP": HOST,
            "SPARK_DAEMON_MEMORY": DAEMON_MEMORY,
            "SPARK_DAEMON_JAVA_OPTS": java_opts,
            "SPARK_CONF_DIR": str(self.conf_dir),
            "SPARK_LOG_DIR": str(self.log_dir),
            "SPARK_WORKER_DIR": str(self.work_dir),
            "SPARK_PID_DIR": str(self.state_dir),
            # Executors that share 127.0.0.1 read each other's shuffle files straight from
            # disk (spark.shuffle.readHostLocalDisk): the files must be at the same path in
            # every container, so the scratch space is one bind-mounted host directory.
            "SPARK_LOCAL_DIRS": str(self.local_dir),
            "HOME": "/tmp",  # the host user's home does not exist in the image
            "FTCTL_LOG": str(log),
            "FTCTL_DRIVER_PYTHON": ":".join(driver_python_paths()),
            "FTCTL_UID": str(os.getuid()),
            "FTCTL_GID": str(os.getgid()),
        }

    def _run_container(
        self,
        daemon: str,
        argv: list[str],
        log: Path,
        *,
        role: str,
        labels: Labels,
        cpus: float,
        mem_limit: str,
    ) -> Any:
        """Create and start one daemon container; returns it (reloaded, with its pid)."""
        import docker.errors

        container_labels = {
            LABEL_CLUSTER: self.key,
            LABEL_RUN: self.run_id,
            LABEL_ROLE: role,
            LABEL_STATE_DIR: str(self.state_dir),
            **({LABEL_WORKER: daemon} if role == "worker" else {}),
            **{LABEL_PREFIX + key: value for key, value in labels.items()},
        }
        volumes = {p: {"bind": p, "mode": "rw"} for p in [str(self.state_dir), *self.mounts]}
        log.parent.mkdir(parents=True, exist_ok=True)
        log.touch()
        for mount in self.mounts:
            # Made here, owned by the user: the engine would create a missing one as root.
            Path(mount).mkdir(parents=True, exist_ok=True)
        try:
            container = self.client.containers.run(
                self.image, argv, name=container_name(self.key, daemon), detach=True,
                network_mode="host", pid_mode=None if self.own_pids else "host",
                # In a namespace of its own the daemon would be its init, which ignores
                # SIGKILL from inside: a small init runs it, as a host's would.
                init=True if self.own_pids else None, labels=container_labels,
                environment=self._daemon_environment(log), volumes=volumes,
                working_dir=str(self.state_dir), nano_cpus=int(cpus * 1e9), mem_limit=mem_limit,
            )  # fmt: skip
            container.reload()
        except docker.errors.DockerException as exc:
            raise api_error(f"cannot start the {daemon} container", exc) from exc
        return container

    def _daemon_info(self, container: Any, log: Path) -> tuple[int, float]:
        """Host pid and start time of the container's main process (the daemon JVM)."""
        pid = int(container.attrs["State"].get("Pid") or 0)
        proc = process.same_process(pid, None) if pid else None
        if proc is None:
            code = container.attrs["State"].get("ExitCode")
            raise self._start_error(
                f"container {container.name} exited right after start (exit code {code})",
                str(log),
            )
        return pid, proc.create_time()

    def _spawn_daemon(self, home: Path, daemon: str, argv: list[str], log: Path,
                      labels: Labels | None = None, cores: int | None = None,
                      memory: str | None = None) -> tuple[int, float]:
        """The daemon as a container: the master small, a worker sized by ``cpus`` and
        ``mem_limit`` (default: its cores, at most the host's, and its memory plus room)."""
        del home  # the image's
        if daemon == "master":
            cpus, mem_limit = min(MASTER_CPUS, _host_cpus()), MASTER_MEM_LIMIT
        else:
            assert cores is not None and memory is not None
            cpus = self.cpus if self.cpus is not None else min(cores, _host_cpus())
            mem_limit = self.mem_limit or f"{memory_mb(memory) + WORKER_OVERHEAD_MB}m"
        container = self._run_container(
            daemon, argv, log, role="master" if daemon == "master" else "worker",
            labels=labels or {}, cpus=cpus, mem_limit=mem_limit)
        try:
            return self._daemon_info(container, log)
        except InfraError:
            self._remove(container)
            raise

    def _java_description(self) -> tuple[str, str]:
        return f"docker:{self.image}", "17 (image)"

    def _ready_to_start_worker(self) -> None:
        """A worker started later (capacity returning) runs the cluster's image."""
        if self._meta is None:
            meta = load_meta(self.state_dir)
            if meta is None:
                raise NoClusterError(f"no docker cluster is running (state dir {self.state_dir})")
            self._use_meta(meta)

    def _exit_code(self, pid: int) -> int | None:
        state = self._state
        if state is None:
            return None
        names = {state.master.pid: "master", **{w.pid: w.name for w in state.workers}}
        container = self._container(names[pid]) if pid in names else None
        return None if container is None else container.attrs["State"].get("ExitCode")

    # ------------------------------------------------------------------ down

    def _stop_everything(self, grace: float) -> list[int]:
        """Remove every container of this cluster (by label) and its records; returns
        the host pids that ran in them. Containers are killed, not stopped (``grace``
        unused): a Spark daemon has nothing to flush and teardown should be quick."""
        del grace
        pids = self._remove_containers()
        remove_state(self.state_dir)
        remove_meta(self.state_dir)
        return pids

    def _remove_containers(self) -> list[int]:
        """Kill and remove this cluster's containers, in parallel; their host pids."""
        containers = self._cluster_containers()
        pids: list[int] = []
        for container in containers:
            pid = int(container.attrs["State"].get("Pid") or 0)
            main = process.same_process(pid, None) if pid > 0 else None
            pids += [p.pid for p in process.tree(main)] if main is not None else []
        threads = [threading.Thread(target=self._remove, args=(c,)) for c in containers]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return pids

    @staticmethod
    def _remove(container: Any) -> None:
        import docker.errors

        with contextlib.suppress(docker.errors.NotFound):
            container.remove(force=True)  # SIGKILL, then remove

    def _stop_failed_worker(self, worker: WorkerInfo) -> None:
        container = self._container(worker.name)
        if container is not None:
            self._remove(container)

        def apply(state: ClusterState) -> None:
            state.workers = [w for w in state.workers if w.name != worker.name]

        self._update_state(apply)

    # ------------------------------------------------------------------ workers

    def worker_processes(self, which: str | int) -> list[psutil.Process]:
        """Host processes of the worker's container: the Worker JVM, executors, Python
        workers (the container's main process and its descendants)."""
        worker = self.worker(which)
        proc = process.same_process(worker.pid, worker.create_time)
        return process.tree(proc) if proc is not None else []

    def kill_worker(self, which: str | int, sig: int = signal.SIGKILL) -> WorkerInfo:
        """Kill a worker's container, as a node loss would; mark it killed.

        SIGKILL of the container's main process takes every process in it down at once.
        Another signal is escalated to SIGKILL after the grace period. The exited
        container stays (its log, ``docker inspect``) until ``down``.
        """
        worker = self.worker(which)
        container = self._container(worker.name)
        if worker.killed or container is None or container.status != "running":
            raise ClusterUsageError(f"worker {worker.name} ({worker.worker_id}) is not running")
        self._signal(container, sig)
        if sig != signal.SIGKILL and not self._wait_exited(container, self.grace):
            self._signal(container, signal.SIGKILL)
        self._wait_exited(container, 30.0)
        self._mark(worker.name, killed=True)
        worker.killed = True
        return worker

    def containers(self) -> list[ContainerInfo]:
        """Every container of this cluster as the engine sees it now (killed ones too)."""
        found = []
        for container in self._cluster_containers():
            labels = container.labels
            found.append(ContainerInfo(
                name=container.name, role=labels.get(LABEL_ROLE, "?"),
                worker=labels.get(LABEL_WORKER), status=container.status,
                pid=int(container.attrs["State"].get("Pid") or 0),
                labels={k[len(LABEL_PREFIX):]: v for k, v in labels.items()
                        if k.startswith(LABEL_PREFIX)},
            ))  # fmt: skip
        return sorted(found, key=lambda c: c.name)

    # ------------------------------------------------------------------ container faults

    def stop_worker(self, which: str | int, timeout: float | None = None) -> WorkerInfo:
        """``docker stop``: SIGTERM, then SIGKILL after ``timeout`` (a clean node shutdown)."""
        worker, container = self._running(which)
        budget = self.grace if timeout is None else timeout
        with self._engine_errors(f"stop {worker.name}"):
            container.stop(timeout=max(0, int(budget)))
        self._mark(worker.name, killed=True)
        worker.killed = True
        return worker

    def restart_container(self, which: str | int, wait: bool = False) -> WorkerInfo:
        """Start a stopped or killed worker's container again (same name, labels, ports).

        The Worker JVM registers as a new worker with the master; ``wait`` for it to be
        ALIVE. Its new pid is recorded.
        """
        worker = self.worker(which)
        container = self._container(worker.name)
        if container is None:
            raise ClusterUsageError(f"worker {worker.name} has no container to start")
        with self._engine_errors(f"start {worker.name}"):
            if container.status == "paused":
                container.unpause()
            elif container.status != "running":
                container.start()
        container.reload()
        self._record_pid(worker.name, container)
        if wait:
            self.wait_alive(worker.name)
        return self.worker(worker.name)

    def restart_worker(self, which: str | int, timeout: float | None = None,
                       wait: bool = False) -> WorkerInfo:
        """``docker restart``: stop (SIGTERM, then SIGKILL) and start the same container."""
        worker = self.worker(which)
        container = self._container(worker.name)
        if container is None:
            raise ClusterUsageError(f"worker {worker.name} has no container to restart")
        budget = self.grace if timeout is None else timeout
        with self._engine_errors(f"restart {worker.name}"):
            container.restart(timeout=max(0, int(budget)))
        container.reload()
        self._record_pid(worker.name, container)
        if wait:
            self.wait_alive(worker.name)
        return self.worker(worker.name)

    def pause_worker(self, which: str | int) -> WorkerInfo:
        """Freeze every process of the worker's container (cgroup freezer): a hung node.

        Unlike SIGSTOP the processes cannot see it and nothing is delivered to them; the
        master declares the worker DEAD after its heartbeat timeout.
        """
        worker, container = self._running(which)
        with self._engine_errors(f"pause {worker.name}"):
            container.pause()
            self._settled(container, "running")
        return worker

    def unpause_worker(self, which: str | int) -> WorkerInfo:
        worker = self.worker(which)
        container = self._container(worker.name)
        if container is None or container.status != "paused":
            raise ClusterUsageError(f"worker {worker.name} is not paused")
        with self._engine_errors(f"unpause {worker.name}"):
            container.unpause()
            self._settled(container, "paused")
        return worker

    @staticmethod
    def _settled(container: Any, left: str, timeout: float = 10.0) -> None:
        """Wait until the engine no longer reports ``container`` as ``left``. The engine
        can answer a pause or unpause before it records the new state (it takes that from
        the runtime's event), so a listing right after could still show the old one; a
        caller that unpaused a worker expects it running when the call returns."""
        end = time.monotonic() + timeout
        while True:
            container.reload()
            if container.status != left or time.monotonic() >= end:
                return
            time.sleep(0.05)

    # ------------------------------------------------------------------ helpers

    def _running(self, which: str | int) -> tuple[WorkerInfo, Any]:
        worker = self.worker(which)
        container = self._container(worker.name)
        if container is None or container.status != "running":
            raise ClusterUsageError(f"worker {worker.name} is not running")
        return worker, container

    @contextlib.contextmanager
    def _engine_errors(self, what: str) -> Iterator[None]:
        import docker.errors

        try:
            yield
        except docker.errors.DockerException as exc:
            raise api_error(f"cannot {what}", exc) from exc

    def _signal(self, container: Any, sig: int) -> None:
        import docker.errors

        with contextlib.suppress(docker.errors.APIError):  # already exited: fine
            container.kill(signal=int(sig))

    @staticmethod
    def _wait_exited(container: Any, timeout: float) -> bool:
        def exited() -> bool:
            with contextlib.suppress(Exception):
                container.reload()
            return bool(container.status in ("exited", "dead"))

        return process.wait_until(exited, timeout)

    def _record_pid(self, name: str, container: Any) -> None:
        pid = int(container.attrs["State"].get("Pid") or 0)
        proc = process.same_process(pid, None) if pid else None
        if proc is None:
            raise InfraError(f"container {container.name} did not start")
        self._mark(name, killed=False, pid=pid, create_time=proc.create_time())

    def _mark(self, name: str, *, killed: bool, pid: int | None = None,
              create_time: float | None = None) -> None:
        def apply(state: ClusterState) -> None:
            for recorded in state.workers:
                if recorded.name == name:
                    recorded.killed = killed
                    if pid is not None and create_time is not None:
                        recorded.pid, recorded.create_time = pid, create_time
                        recorded.worker_id = None  # a new registration gets a new id

        self._update_state(apply)

    @staticmethod
    def prune(include_live: bool = False, client: Any = None) -> list[PrunedCluster]:
        """Remove containers that crashed runs left behind (see ``ftctl.docker.prune``)."""
        return prune_containers(include_live=include_live, client=client)

    def __enter__(self) -> DockerCluster:
        super().__enter__()
        return self


def driver_python_paths() -> list[str]:
    """Paths a driver on this host may run as, for the launchers the image puts in place.

    The driver sends its own ``sys.executable`` as the executors' Python; the ``ftctl``
    script and ``python -m`` of one installation differ in name (``bin/python3.11`` vs
    ``bin/python``), so every usual name in the interpreter's directory (and in its
    resolved directory) gets one.
    """
    minor = f"python{sys.version_info.major}.{sys.version_info.minor}"
    names = ("python", f"python{sys.version_info.major}", minor)
    found = {sys.executable}
    for directory in {Path(sys.executable).parent, Path(sys.executable).resolve().parent}:
        found.update(str(directory / name) for name in names)
    return sorted(found)


def _host_cpus() -> float:
    return float(os.cpu_count() or 1)

