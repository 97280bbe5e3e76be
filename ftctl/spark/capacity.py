"""Spark workers as the kernel's ``Slots``: a worker is a node, each of its cores a slot.

The simulation host places every unit on a node itself (``ftctl/sim/cluster.py``); on
Spark the task scheduler does, and the driver is not told which executor runs which
task. So this view counts cores, not places: a start takes a core when the alive workers
have one that no running instance holds (an idle standby task holds none of its own: a
restart handed to it runs on its core), and the
instances holding cores are packed onto the alive workers in order for ``Capacity``'s
per-node numbers. That count is exact once the instances a lost worker took are detected
(the kernel releases them), which is what the protocol plans with: the free cores when
capacity comes back decide which restart goes first, instead of Spark starting whatever
was queued first.

Where workers come from: the standalone master's JSON endpoint (ALIVE or not, cores),
named and labelled by the cluster ftctl started (``w0``, ``rack=a``) where it knows them.
``CapacityWatch`` polls it on a thread and hands each change to the host's event loop.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ftctl.cluster.errors import ClusterError
from ftctl.cluster.master_api import MasterJson, fetch_master_json
from protocols.contract.names import InstanceId
from protocols.contract.view import Capacity, NodeView

POLL_EVERY = 0.25  # seconds between two reads of the master (a few ms each, off the loop)


@dataclass(frozen=True, slots=True)
class Worker:
    """One worker as the cluster reports it."""

    id: str
    cores: int
    alive: bool
    labels: Mapping[str, str] = field(default_factory=dict)
    address: str = ""  # host:port, as the master and the executors' --worker-url say


class WorkerSlots:
    """The kernel's ``Slots`` over Spark workers (see the module docstring)."""

    def __init__(self, workers: Iterable[Worker], reserved: int = 0):
        self.workers: tuple[Worker, ...] = tuple(workers)
        self.reserved = reserved  # cores held by something other than an instance
        self.held: list[str] = []  # instances holding a core, in the order they took it
        # Returned workers (addresses) with no slot waiting yet: their cores are not
        # offered, so a plan never counts on a start that would wait for Spark.
        self.cold: frozenset[str] = frozenset()

    def usable(self, w: Worker) -> bool:
        return w.alive and not (w.address and w.address in self.cold)

    def total(self) -> int:
        return sum(w.cores for w in self.workers if self.usable(w))

    def free(self) -> int:
        return max(0, self.total() - self.reserved - len(self.held))

    def update(self, workers: Iterable[Worker]) -> bool:
        """The cluster as it is now; True when a worker left, came or changed."""
        new = tuple(workers)
        changed = new != self.workers
        self.workers = new
        return changed

    # ------------------------------------------------------------ Slots

    def capacity(self) -> Capacity:
        used = dict.fromkeys((w.id for w in self.workers), 0)
        placed: dict[InstanceId, str] = {}
        queue = [None] * self.reserved + list(self.held)  # spares fill cores first
        for w in self.workers:
            while self.usable(w) and queue and used[w.id] < w.cores:
                who = queue.pop(0)
                used[w.id] += 1
                if who is not None:
                    placed[InstanceId(who)] = w.id
        # Instances beyond the alive cores ran on a worker that is gone and are not
        # detected yet: they hold no node; the kernel releases them at the detection.
        return Capacity(tuple(NodeView(w.id, w.cores, used[w.id], self.usable(w),
                                       dict(w.labels))
                              for w in self.workers), placed)

    def take(self, instance: str, incarnation: int) -> bool:
        if instance in self.held:
            return True
        if self.free() <= 0:
            return False
        self.held.append(instance)
        return True

    def release(self, instance: str) -> None:
        if instance in self.held:
            self.held.remove(instance)


def workers_from_master(data: MasterJson,
                        known: Mapping[str, tuple[str, Mapping[str, str]]] | None = None
                        ) -> list[Worker]:
    """The master's workers in registration order; ``known`` names and labels them by
    ``host:port`` (a cluster ftctl started). The master keeps dead workers listed for a
    while: they stay, not alive, so a returning worker is a new node next to them."""
    known = known or {}
    out: list[Worker] = []
    for w in sorted(data.get("workers", []), key=lambda w: str(w.get("id", ""))):
        address = f"{w.get('host')}:{w.get('port')}"
        name, labels = known.get(address, (str(w.get("id")), {}))
        out.append(Worker(name, int(w.get("cores", 0)), w.get("state") == "ALIVE",
                          dict(labels), address))
    return out


class ClusterSource(Protocol):
    """What ``master_source`` needs of a cluster ftctl started (``LocalCluster``,
    ``DockerCluster``)."""

    @property
    def state(self) -> Any: ...

    def workers(self, include_killed: bool = False) -> Sequence[Any]: ...


def master_source(cluster: ClusterSource) -> Callable[[], list[Worker] | None]:
    """Read the workers of a cluster ftctl started; None while the master does not answer."""
    ui_port = cluster.state.master.ui_port

    def poll() -> list[Worker] | None:
        data = fetch_master_json(ui_port, timeout=1.0)
        if data is None:
            return None
        try:
            known = {w.address: (w.name, w.labels)
                     for w in cluster.workers(include_killed=True)}
        except (ClusterError, OSError, ValueError):
            return None  # the cluster is going down under the run
        return workers_from_master(data, known)

    return poll


class CapacityWatch:
    """Polls ``source`` on a thread and calls ``changed(workers)`` (which must be
    thread-safe: the host puts it on its event queue) whenever the answer differs."""

    def __init__(self, source: Callable[[], list[Worker] | None],
                 changed: Callable[[list[Worker]], None], every: float = POLL_EVERY):
        self.source = source
        self.changed = changed
        self.every = every
        self._stop = threading.Event()
        self._last: list[Worker] | None = None
        self._thread = threading.Thread(target=self._run, name="capacity-watch", daemon=True)

    def start(self, first: list[Worker]) -> None:
        self._last = first
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=2.0)

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            got = self.source()
            if got is not None and got != self._last:
                self._last = got
                self.changed(got)


class SparkCapacity:
    """The host's side: the slots the kernel uses, kept current by a ``CapacityWatch``."""

    def __init__(self, source: Callable[[], list[Worker] | None], first: list[Worker],
                 reserved: int, post: Callable[[list[Worker]], None]):
        self.source = source
        self.slots = WorkerSlots(first, reserved)
        self.watch = CapacityWatch(source, post)
        self._first = first

    @classmethod
    def of(cls, source: Callable[[], list[Worker] | None], needed: int, reserved: int,
           post: Callable[[list[Worker]], None]) -> SparkCapacity | None:
        """None (every restart starts at once, as without a view) when the master does
        not answer, or its alive cores cannot hold the run's ``needed`` tasks: the initial
        plan would wait for a core that never comes."""
        first = source()
        if first is None or sum(w.cores for w in first if w.alive) < needed + reserved:
            return None
        return cls(source, first, reserved, post)

    def start(self) -> None:
        self.watch.start(self._first)

    def stop(self) -> None:
        self.watch.stop()

    def poll_now(self) -> list[Worker] | None:
        """Read the cluster at once (a detection asks, so a lost worker's cores are gone
        before the protocol plans the restarts)."""
        return self.source()

    def update(self, workers: list[Worker]) -> dict[str, Any] | None:
        """Apply a reading: the ``capacity-changed`` record's fields, None if nothing
        changed."""
        before = {w.id for w in self.slots.workers if w.alive}
        if not self.slots.update(workers):
            return None
        alive = [w.id for w in workers if w.alive]
        # What the cluster has, warm or not (the protocol is offered cold cores later).
        total = sum(w.cores for w in workers if w.alive)
        free = max(0, total - self.slots.reserved - len(self.slots.held))
        return {"total": total, "free": free, "alive": alive,
                "joined": [w for w in alive if w not in before],
                "left": sorted(before - set(alive))}
