"""What a fault may touch: the `FaultContext` protocol and the records faults produce.

Faults never reach into a host or a cluster backend directly. Everything they need
(pids of tasks and executors, the workers and their labels, starting and killing
workers, channel-layer faults, the run clock) goes through a `FaultContext`, so the
same fault code runs against the Spark host and against a fake context in unit tests.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Mapping
from concurrent.futures import Future
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from ftctl.config.scenario import WORKER_KEY
from ftctl.kernel.clocks import ClockFault
from ftctl.store import DirectoryStore, LostWrites

ChannelKind = Literal["partition", "delay", "drop"]
# What a container fault asks of a worker's container (docker backend only).
ContainerAction = Literal["kill", "stop", "start", "pause", "unpause", "restart"]


@dataclass(frozen=True)
class WorkerRef:
    """A worker as a fault sees it: the id the context knows it by, its pid, its labels."""

    id: str
    pid: int
    labels: Mapping[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "pid": self.pid, "labels": dict(self.labels)}


_channel_ids = itertools.count(1)


@dataclass(frozen=True)
class ChannelFault:
    """A request to the runtime to disturb the links between instances.

    Partitions, delays and drops cannot be done with signals: the runtime's channel
    layer applies them. ``dst`` empty means every peer of ``src``. ``both_ways``: the
    links in both directions are affected (a partition cuts both). ``seed`` is for the
    runtime's own draws (drop decisions, jitter), so a replay drops the same way.
    """

    src: str
    dst: tuple[str, ...]
    kind: ChannelKind
    params: Mapping[str, Any] = field(default_factory=dict)
    both_ways: bool = True
    seed: int = 0
    id: str = field(default_factory=lambda: f"ch-{next(_channel_ids)}")

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["dst"] = list(self.dst)
        data["params"] = dict(self.params)
        return data


@dataclass
class InjectRecord:
    """What an inject did: when (run clock), to what, which pids were hit.

    ``details`` holds type-specific facts (killed worker ids and their offsets, the
    channel fault id, restored workers), enough to explain the run afterwards.
    """

    fault: str
    target: str
    t: float
    pids: list[int] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@runtime_checkable
class FaultContext(Protocol):
    """The host-side surface that faults act through.

    Times are seconds on the run clock (the same clock as the host's events), so fault
    records and the coordinator's detections can be compared directly.
    """

    def now(self) -> float:
        """Seconds on the run clock."""
        ...

    def instances(self) -> list[str]:
        """Every operator instance of the topology (``count[1]``), in topological order."""
        ...

    def task_pid(self, instance: str) -> int | None:
        """The pid of the Python worker running the instance now; None if it is not up."""
        ...

    def executor_pids(self) -> dict[str, int]:
        """Live executor JVM pids by executor id."""
        ...

    def workers(self) -> list[WorkerRef]:
        """Live workers."""
        ...

    def kill_worker(self, worker_id: str) -> WorkerRef:
        """Kill a worker's whole process tree (node loss); returns the worker killed."""
        ...

    def start_worker(self, labels: Mapping[str, str]) -> WorkerRef:
        """Start a replacement worker with these labels; may return before it is ALIVE."""
        ...

    def container(
        self, worker_id: str, action: ContainerAction, timeout: float | None = None
    ) -> WorkerRef:
        """Act on a worker's container (``timeout``: grace before SIGKILL of stop/restart).

        Raises FaultError when the workers are not containers (local processes, or a
        cluster ftctl did not start) or the container is not in a state for ``action``.
        """
        ...

    def channel_fault(self, spec: ChannelFault) -> None:
        """Ask the runtime to apply a channel fault until cleared."""
        ...

    def clear_channel_fault(self, fault_id: str) -> None:
        """Lift a channel fault applied earlier (unknown ids are ignored)."""
        ...

    def snapshot_in_progress(self) -> bool:
        """Whether a checkpoint/snapshot is being taken right now."""
        ...

    def recovery_in_progress(self) -> bool:
        """Whether the coordinator is recovering from a failure right now."""
        ...

    def phase_active(self, phase: str) -> bool:
        """Whether the protocol has ``phase`` open right now (its ``DeclarePhase``)."""
        ...

    def phase_holders(self, phase: str) -> list[str]:
        """The instances holding an occurrence of ``phase`` now (``target:
        phase-holder``); empty when only the coordinator holds it or none is open."""
        ...


@runtime_checkable
class AgentDelivery(Protocol):
    """A context whose process faults go through the fault agent inside each task (a
    cluster ftctl did not start: the driver signals no pid there)."""

    def through_agent(self) -> bool:
        """Whether process faults on tasks must go through the agent."""
        ...

    def agent_fault(self, instance: str, op: str, seconds: float | None = None,
                    factor: float = 1.0) -> bool:
        """Have ``instance``'s task carry out ``op`` (``ftctl.spark.agent.OPS``) on
        itself; False if it is not running now."""
        ...


@runtime_checkable
class ClockDelivery(Protocol):
    """A context that can set a clock fault on an instance's runtime clock (the clock
    its protocol's events and timers go by, never the system clock)."""

    def clock_fault(self, instance: str, fault: ClockFault) -> bool:
        """Set ``fault`` on ``instance``'s clock now; False if it is not running."""
        ...


@runtime_checkable
class StoreAccess(Protocol):
    """A context whose snapshot store the driver can reach as files (the Spark host's
    ``DirectoryStore``): store faults act on it from the driver."""

    def snapshot_store(self) -> DirectoryStore | None:
        """The run's snapshot store; None if this host has none the driver can reach."""
        ...


@runtime_checkable
class WriteLoss(Protocol):
    """A context whose host knows which writes a crash of their writer takes (the Spark
    host's ``ftctl.spark.durability``): ``lose-unsynced`` asks it before its kill."""

    def lose_unsynced(self, instance: str, pid: int | None) -> Future[LostWrites] | None:
        """Have ``instance``'s running task (``pid``, when given) lose its unsynced
        writes when its frames end; what they were comes in the future (cancel it if
        the task is not killed after all). None if it is not running now."""
        ...


@dataclass
class Ledger:
    """Workers lost to faults of this run and not restored yet.

    Kept by the scheduler and shared by its faults: kill-worker and kill-group add what
    they killed, restore-capacity brings back (with the same labels) what it finds here.
    """

    lost: list[WorkerRef] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, worker: WorkerRef) -> None:
        with self._lock:
            self.lost.append(worker)

    def take(self, selector: Mapping[str, str] | None) -> list[WorkerRef]:
        """Remove and return the lost workers whose labels include ``selector``."""
        with self._lock:
            wanted = dict(selector or {})
            taken = [w for w in self.lost if selects(w, wanted)]
            self.lost = [w for w in self.lost if w not in taken]
            return taken


def matches(labels: Mapping[str, str], selector: Mapping[str, str]) -> bool:
    """Whether ``labels`` contain every pair of ``selector``."""
    return all(labels.get(k) == v for k, v in selector.items())


def selects(worker: WorkerRef, selector: Mapping[str, str]) -> bool:
    """Whether a selector picks this worker: its labels, plus its name as ``worker``."""
    return matches({**worker.labels, WORKER_KEY: worker.id}, selector)
