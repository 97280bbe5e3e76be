"""A FaultContext assembled from what a host already has, so wiring chaos in is short.

The host supplies its run clock, its instances, a lookup of the live task pids, and the
phase flags its coordinator knows (snapshot or recovery in progress); the cluster backend
(``LocalCluster`` or anything with the same four methods) supplies the workers. Container
faults need a backend whose workers are containers (``DockerCluster``: it has the
``ContainerBackend`` methods too); on any other they are a FaultError. Channel faults need
the host's channel layer; until it passes ``apply_channel``/``clear_channel`` they are
refused with a FaultError, which the nemesis logs as ``fault-error``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from chaos import procs
from chaos.context import ChannelFault, ContainerAction, WorkerRef
from chaos.faults import FaultError
from ftctl.cluster.errors import ClusterError
from ftctl.kernel.clocks import ClockFault
from ftctl.store import DirectoryStore, LostWrites

NO_CLUSTER = (
    "this fault needs process access to the workers, which ftctl has only on a cluster it "
    "started (run without --master)"
)


class ClusterBackend(Protocol):
    """The part of ``ftctl.cluster.LocalCluster`` that faults use."""

    def workers(self, include_killed: bool = False) -> Sequence[Any]: ...

    def worker_pids(self) -> dict[str, int]: ...

    def kill_worker(self, which: str | int, sig: int = ...) -> Any: ...

    def start_worker(self, labels: Any = None, *, wait: bool = True) -> Any: ...


@runtime_checkable
class ContainerBackend(Protocol):
    """What ``ftctl.docker.DockerCluster`` adds: its workers' containers as fault targets.
    (``kill_worker`` of that backend already kills the container.)"""

    def kill_worker(self, which: str | int, sig: int = ...) -> Any: ...

    def stop_worker(self, which: str | int, timeout: float | None = None) -> Any: ...

    def restart_container(self, which: str | int, wait: bool = False) -> Any: ...

    def restart_worker(self, which: str | int, timeout: float | None = None,
                       wait: bool = False) -> Any: ...

    def pause_worker(self, which: str | int) -> Any: ...

    def unpause_worker(self, which: str | int) -> Any: ...


NOT_CONTAINERS = (
    "container faults need the docker backend (--backend docker); this cluster's workers "
    "are processes: use kill-worker or pause"
)


def _container_call(cluster: ContainerBackend, worker: str, action: ContainerAction,
                    timeout: float | None) -> Any:
    # No waiting for a (re)started worker to be ALIVE: as with restore-capacity, the
    # launch is the event; the run measures when the capacity is used.
    if action == "kill":
        return cluster.kill_worker(worker)
    if action == "stop":
        return cluster.stop_worker(worker, timeout=timeout)
    if action == "start":
        return cluster.restart_container(worker, wait=False)
    if action == "pause":
        return cluster.pause_worker(worker)
    if action == "unpause":
        return cluster.unpause_worker(worker)
    return cluster.restart_worker(worker, timeout=timeout, wait=False)


def _never() -> bool:
    return False


def _no_phase(phase: str) -> bool:
    return False


def _no_holders(phase: str) -> list[str]:
    return []


@dataclass
class HostFaultContext:
    clock: Callable[[], float]
    instance_ids: Sequence[str]
    task_pids: Callable[[str], int | None]
    cluster: ClusterBackend | None = None
    snapshot: Callable[[], bool] = _never
    recovery: Callable[[], bool] = _never
    phase: Callable[[str], bool] = _no_phase
    holders: Callable[[str], list[str]] = _no_holders
    apply_channel: Callable[[ChannelFault], None] | None = None
    clear_channel: Callable[[str], None] | None = None
    # Set on a cluster ftctl did not start: process faults go to the task's own agent.
    agent: Callable[[str, str, float | None, float], bool] | None = None
    # Why an instance's reported pid is not its task on this machine (host and PID
    # namespace, start time, command line), None if it is: checked before any signal.
    pid_mismatch: Callable[[str, int], str | None] | None = None
    # Sets a clock fault on an instance's runtime clock, through its task's agent on any
    # cluster (no process of ours holds that clock): the Spark host's.
    clock_agent: Callable[[str, ClockFault], bool] | None = None
    # The run's snapshot store, which store faults damage or take down from the driver.
    store: DirectoryStore | None = None
    # Marks a running task's unsynced writes to vanish when its frames end
    # (``lose-unsynced``): the Spark host's ``expect_lost_writes``.
    lost_writes: Callable[[str, int | None], Future[LostWrites] | None] | None = None

    def snapshot_store(self) -> DirectoryStore | None:
        return self.store

    def lose_unsynced(self, instance: str, pid: int | None) -> Future[LostWrites] | None:
        if self.lost_writes is None:
            raise FaultError("lose-unsynced needs a host that knows which writes are "
                             "not durable yet")
        return self.lost_writes(instance, pid)

    def clock_fault(self, instance: str, fault: ClockFault) -> bool:
        if self.clock_agent is None:
            raise FaultError("clock faults need a host whose tasks keep a runtime clock")
        return self.clock_agent(instance, fault)

    def through_agent(self) -> bool:
        return self.agent is not None

    def agent_fault(self, instance: str, op: str, seconds: float | None = None,
                    factor: float = 1.0) -> bool:
        if self.agent is None:
            raise FaultError(f"{op} through the task's agent needs a host that has one")
        return self.agent(instance, op, seconds, factor)

    def now(self) -> float:
        return self.clock()

    def instances(self) -> list[str]:
        return list(self.instance_ids)

    def task_pid(self, instance: str) -> int | None:
        """The pid the instance's task reported, once shown to belong to this run: on a
        cluster of local processes it must run under one of the cluster's workers (whose
        pids the cluster checked by start time and command line), else it is refused,
        never signalled. (Containers have pids of their own namespaces; on a cluster
        ftctl did not start faults go through the task's agent and signal nothing.)"""
        pid = self.task_pids(instance)
        if pid is None or self.through_agent():
            return pid  # the agent's record names it; nothing here signals it
        if self.pid_mismatch is not None and (why := self.pid_mismatch(instance, pid)):
            raise FaultError(f"{instance}'s task reported pid {pid}, but {why}: not signalled")
        if self.cluster is None or isinstance(self.cluster, ContainerBackend):
            return pid
        if procs.ancestor_in(pid, self.cluster.worker_pids().values()) is None:
            raise FaultError(f"{instance}'s task reported pid {pid}, which is no process of "
                             "this run's cluster on this host: not signalled")
        return pid

    def executor_pids(self) -> dict[str, int]:
        return procs.executor_pids_under(w.pid for w in self.workers())

    def workers(self) -> list[WorkerRef]:
        cluster = self._cluster()
        live = set(cluster.worker_pids().values())
        # Named by the ftctl worker name: known from launch on, unlike the master's id.
        return [_ref(w) for w in cluster.workers() if w.pid in live]

    def kill_worker(self, worker_id: str) -> WorkerRef:
        return _ref(self._cluster().kill_worker(worker_id))

    def start_worker(self, labels: Mapping[str, str]) -> WorkerRef:
        # No waiting for ALIVE (~10 s): the arrival is the launch; the master's view and
        # the coordinator's use of the new capacity are what the run then measures.
        return _ref(self._cluster().start_worker(dict(labels), wait=False))

    def container(
        self, worker_id: str, action: ContainerAction, timeout: float | None = None
    ) -> WorkerRef:
        cluster = self._cluster()
        if not isinstance(cluster, ContainerBackend):
            raise FaultError(NOT_CONTAINERS)
        try:
            return _ref(_container_call(cluster, worker_id, action, timeout))
        except ClusterError as exc:  # not running, already paused, an engine error
            raise FaultError(f"{action} {worker_id}: {exc}") from exc

    def channel_fault(self, spec: ChannelFault) -> None:
        if self.apply_channel is None:
            raise FaultError(f"{spec.kind} faults are not supported by this host yet")
        self.apply_channel(spec)

    def clear_channel_fault(self, fault_id: str) -> None:
        if self.clear_channel is not None:
            self.clear_channel(fault_id)

    def snapshot_in_progress(self) -> bool:
        return self.snapshot()

    def recovery_in_progress(self) -> bool:
        return self.recovery()

    def phase_active(self, phase: str) -> bool:
        return self.phase(phase)

    def phase_holders(self, phase: str) -> list[str]:
        return self.holders(phase)

    def _cluster(self) -> ClusterBackend:
        if self.cluster is None:
            raise FaultError(NO_CLUSTER)
        return self.cluster


def _ref(worker: Any) -> WorkerRef:
    return WorkerRef(str(worker.name), int(worker.pid), dict(worker.labels))
