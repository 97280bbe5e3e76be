"""A minimal in-test kernel that runs FalkirkInstance/FalkirkCoordinator unchanged.

It interprets exactly the contract actions falkirk uses: FIFO channels with seeded
delays, stable storage per instance (Persist, Restart.restore/extra, RollBack.restore,
DiscardSnapshots, DiscardStaged), sink staging and per-sink commit, Stop/kill fencing (what is in
flight to or from a killed or rolled-back instance is lost, as in ftctl) and failure
detection a few milliseconds after a kill. The visible output is what CommitOutput
made visible; a run is judged against a fault-free run of the same topology.
"""

from __future__ import annotations

import heapq
import itertools
import random
from collections import Counter
from collections.abc import Callable
from typing import Any

from ftctl.config.topology import Topology
from ftctl.runtime.graph import ExecutionGraph
from ftctl.runtime.instance import InstanceCore
from ftctl.runtime.messages import Batch
from protocols.contract.actions import (
    CommitOutput,
    Control,
    DiscardSnapshots,
    DiscardStaged,
    Persist,
    Report,
    Restart,
    RollBack,
    Send,
    StageOutput,
    Stop,
)
from protocols.contract.events import (
    BatchIn,
    ControlIn,
    FailureDetected,
    MarkerIn,
    ReportIn,
    RollBackTo,
    SourceReady,
    Started,
)
from protocols.contract.names import InstanceId as I
from protocols.contract.view import GraphView, InstanceView
from protocols.falkirk.coordinator import FalkirkCoordinator
from protocols.falkirk.instance import FalkirkInstance
from protocols.falkirk.params import FalkirkParams

PACE, DETECT = 0.004, 0.01


class Unit:
    def __init__(self, k: FalkirkKernel, slot: str, inc: int):
        self.id, self.inc, self.alive = slot, inc, True
        self.cores = {I(slot): InstanceCore(k.graph, slot)}
        self.logic = k.instance_cls(InstanceView.of(k.graph, slot), self.cores, k.params)


class FalkirkKernel:
    def __init__(self, topo: Topology, params: FalkirkParams, seed: int = 0,
                 instance_cls: type = FalkirkInstance,
                 coordinator_cls: type = FalkirkCoordinator):
        self.graph = ExecutionGraph(topo)
        self.gv = GraphView(self.graph)
        self.params, self.instance_cls = params, instance_cls
        self.coord = coordinator_cls(self.gv, params)
        self.rng = random.Random(seed)
        self.now = 0.0
        self.heap: list[tuple[float, int, Callable[[], None]]] = []
        self.seq = itertools.count()
        self.units: dict[str, Unit] = {}
        self.inc: Counter[str] = Counter()
        self.gen: Counter[str] = Counter()  # fencing: bumped on kill, restart, rollback
        self.fifo: dict[Any, float] = {}
        self.store: dict[str, dict[int, Any]] = {i: {} for i in self.graph.instances}
        self.staged: dict[tuple[str, int], list[Any]] = {}
        self.committed: dict[str, int] = dict.fromkeys(self.graph.sinks, -1)
        self.output: Counter[Any] = Counter()
        self.restarts: Counter[str] = Counter()
        self.rollbacks: Counter[str] = Counter()

    # ClusterView, as far as falkirk asks
    def status(self, i: str) -> str:
        u = self.units.get(i)
        return "running" if u is not None and u.alive else "stopped"

    def incarnation(self, i: str) -> int:
        return self.inc[i]

    def at(self, t: float, fn: Callable[[], None]) -> None:
        heapq.heappush(self.heap, (t, next(self.seq), fn))

    def later(self, key: Any, fn: Callable[[], None]) -> None:
        """Deliver after a seeded delay, FIFO per key."""
        t = max(self.now + self.rng.uniform(0.0005, 0.003), self.fifo.get(key, 0.0))
        self.fifo[key] = t
        self.at(t, fn)

    def start(self, slot: str, init: Any, restore: int | None, extra: tuple[int, ...]) -> None:
        self.inc[slot] += 1
        self.gen[slot] += 1
        u = Unit(self, slot, self.inc[slot])
        self.units[slot] = u
        blob = None if restore is None else self.store[slot].get(restore)  # gone: empty
        ex = {r: self.store[slot].get(r) for r in extra}
        reason = "initial" if self.inc[slot] == 1 else "restart"
        self.deliver(u, Started(I(slot), u.inc, reason, blob, ex, init))
        if self.gv.is_source(slot):
            self.at(self.now + PACE, lambda: self.produce(u))

    def produce(self, u: Unit) -> None:
        if u.alive and u is self.units[u.id]:
            self.deliver(u, SourceReady(I(u.id), self.now))
            if u.logic.more_to_produce(I(u.id)):
                self.at(self.now + PACE, lambda: self.produce(u))

    def deliver(self, u: Unit, ev: Any) -> None:
        if u.alive:
            self.perform(u, u.logic.handle(ev, self.now))

    def perform(self, u: Unit, acts: list[Any]) -> None:
        for a in acts:
            if isinstance(a, Send):
                dst = self.graph.channels[a.channel].dst
                msg = a.msg
                ev = (BatchIn(I(dst), a.channel, Batch(list(msg.records), msg.seq,
                                                       msg.watermark, msg.meta))
                      if isinstance(msg, Batch) else MarkerIn(I(dst), a.channel, msg))
                gens = (self.gen[u.id], self.gen[dst])
                self.later(("ch", a.channel), lambda ev=ev, dst=dst, g=gens, src=u.id: (
                    self.deliver(self.units[dst], ev)
                    if (self.gen[src], self.gen[dst]) == g else None))
            elif isinstance(a, Persist):
                self.store[a.slot][a.ref] = a.blob
            elif isinstance(a, StageOutput):
                # As ftctl's Outputs: staging an epoch again adds to what is staged.
                self.staged.setdefault((a.slot, a.epoch), []).extend(a.records)
            elif isinstance(a, Report):
                rep = ReportIn(I(u.id), u.inc, a.msg, self.now)
                self.later(("rep", u.id), lambda rep=rep: self.coordinate(rep))
            else:
                raise AssertionError(f"unexpected action {a!r}")

    def coordinate(self, ev: Any) -> None:
        for a in self.coord.handle(ev, self):
            if isinstance(a, Stop):
                for i in a.instances:
                    self.units[i].alive = False
                    self.gen[i] += 1
            elif isinstance(a, Restart):
                self.restarts[a.instance] += 1
                if a.instance in self.units:
                    self.units[a.instance].alive = False
                self.start(a.instance, a.init, a.restore, a.extra)
            elif isinstance(a, RollBack):
                self.rollbacks[a.instance] += 1
                self.gen[a.instance] += 1  # fence its channels, keep the process
                u = self.units[a.instance]
                blob = None if a.restore is None else self.store[a.instance].get(a.restore)
                self.deliver(u, RollBackTo(a.instance, a.to, blob))
            elif isinstance(a, Control):
                u = self.units[a.instance]
                self.later(("ctl", a.instance), lambda a=a, u=u: self.deliver(
                    u, ControlIn(a.msg, a.instance)))
            elif isinstance(a, CommitOutput):
                for t in range(self.committed[a.sink] + 1, a.upto + 1):
                    for rec in self.staged.get((a.sink, t), []):
                        self.output[rec] += 1
                self.committed[a.sink] = max(self.committed[a.sink], a.upto)
            elif isinstance(a, DiscardStaged):
                for key in [k for k in self.staged if k[0] == a.sink and k[1] > a.after]:
                    del self.staged[key]
            elif isinstance(a, DiscardSnapshots):
                st = self.store[a.instance]
                for ref in [r for r in st if a.below is not None and r < a.below]:
                    del st[ref]

    def kill(self, slot: str) -> None:
        u = self.units[slot]
        if u.alive:
            u.alive = False
            self.gen[slot] += 1
            self.at(self.now + DETECT, lambda: self.coordinate(
                FailureDetected(frozenset({I(slot)}), self.now)))

    def run(self, kills: tuple[tuple[float, str], ...] = (), until: float = 60.0) -> Counter:
        for a in self.coord.initial(self):
            assert isinstance(a, Restart)
            self.start(a.instance, a.init, None, ())
        for t, slot in kills:
            self.at(t, lambda s=slot: self.kill(s))
        while self.heap and self.now <= until and not self.coord.finished(self):
            self.now, _, fn = heapq.heappop(self.heap)
            fn()
        return self.output


def judge(got: Counter, golden: Counter) -> tuple[int, int]:
    """(records lost, records duplicated or unexpected)."""
    return sum((golden - got).values()), sum((got - golden).values())


def schedule(seed: int, instances: list[str], horizon: float) -> tuple[tuple[float, str], ...]:
    """One to three crashes at seeded times within ``horizon`` (bursts and failures during
    recovery included), on seeded instances (sources and sinks too)."""
    rng = random.Random(seed)
    return tuple(sorted((rng.uniform(0.0, horizon), rng.choice(instances))
                        for _ in range(rng.randint(1, 3))))
