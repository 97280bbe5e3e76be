"""replica-ring's contract-v2 logic end to end on a minimal in-test kernel.

The kernel here is the smallest thing that interprets the contract's actions: a routing
table slot -> unit, units hosting cores, timers, a constant link delay, crash at a time,
host detection a few milliseconds later. It runs ``ReplicaRingInstance`` and
``ReplicaRingCoordinator`` unchanged, so tuple ids in ``Batch.meta``, adoption, fetches,
end of stream and the sink's idempotent emit are exercised together.
"""

from __future__ import annotations

import heapq
import itertools
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ftctl.config.load import load_topology
from ftctl.config.topology import Topology
from ftctl.runtime.graph import ExecutionGraph
from ftctl.runtime.instance import InstanceCore
from ftctl.runtime.messages import Batch
from protocols.base import Guarantee
from protocols.contract.actions import (
    AdoptSlot,
    Control,
    Emit,
    Report,
    Restart,
    Route,
    Send,
    SendPeer,
    SetTimer,
    Stop,
    Suspect,
)
from protocols.contract.events import (
    BatchIn,
    ControlIn,
    FailureDetected,
    MarkerIn,
    PeerIn,
    ReportIn,
    SourceReady,
    Started,
    Suspected,
    TimerFired,
)
from protocols.contract.names import InstanceId as I
from protocols.contract.view import GraphView, InstanceView
from protocols.replica_ring.accounting import PAPER_TABLE1, table1_messages
from protocols.replica_ring.logic import ReplicaRingCoordinator, ReplicaRingInstance
from protocols.replica_ring.messages import KIND
from protocols.replica_ring.mutants import MUTANTS
from protocols.replica_ring.params import ReplicaRingParams
from tests.replica_ring_topologies import chain

DELAY, DETECT, PACE = 0.001, 0.004, 0.005


class Unit:
    def __init__(self, kernel: MiniKernel, slot: str, inc: int):
        self.id, self.inc, self.alive = slot, inc, True
        self.cores: dict[I, InstanceCore] = {I(slot): InstanceCore(kernel.graph, slot)}
        self.logic = kernel.instance_cls(InstanceView.of(kernel.graph, slot), self.cores,
                                         kernel.params)


class MiniKernel:
    def __init__(self, topo: Topology, params: ReplicaRingParams,
                 instance_cls: type = ReplicaRingInstance,
                 coordinator_cls: type = ReplicaRingCoordinator):
        self.graph = ExecutionGraph(topo)
        self.gv = GraphView(self.graph)
        self.params = params
        self.instance_cls = instance_cls
        self.coord = coordinator_cls(self.gv, params)
        self.now = 0.0
        self.heap: list[tuple[float, int, Callable[[], None]]] = []
        self.seq = itertools.count()
        self.units: dict[str, Unit] = {}
        self.route: dict[str, str] = {i: i for i in self.graph.instances}
        self.inc: Counter[str] = Counter()
        self.output: Counter[Any] = Counter()
        self.seen_uids: set[Any] = set()
        self.peer: Counter[tuple[str, str, str]] = Counter()

    # ------------------------------------------------------------ ClusterView
    def unit_of(self, slot: I) -> I:
        return I(self.route[slot])

    def status(self, i: I) -> str:
        u = self.units.get(i)
        return "running" if u is not None and u.alive else "stopped"

    def incarnation(self, i: I) -> int:
        return max(0, self.inc[i] - 1)

    # ------------------------------------------------------------ loop
    def at(self, t: float, fn: Callable[[], None]) -> None:
        heapq.heappush(self.heap, (t, next(self.seq), fn))

    def start(self, slot: str, init: Any = None) -> None:
        self.inc[slot] += 1
        u = Unit(self, slot, self.inc[slot])
        self.units[slot] = u
        reason = "initial" if self.inc[slot] == 1 else "restart"
        self.deliver(u, Started(I(slot), u.inc, reason, init=init))
        if self.gv.is_source(slot):
            self.at(self.now + PACE, lambda: self.produce(u))

    def produce(self, u: Unit) -> None:
        if not u.alive:
            return
        self.deliver(u, SourceReady(I(u.id), self.now))
        if u.logic.more_to_produce(I(u.id)):
            self.at(self.now + PACE, lambda: self.produce(u))

    def deliver(self, u: Unit, ev: Any) -> None:
        if u.alive:
            self.apply_instance(u, u.logic.handle(ev, self.now))

    def send_to(self, slot: str, make: Callable[[], Any]) -> None:
        u = self.units.get(self.route[slot])  # routes resolve when a message is sent
        if u is not None:
            inc = u.inc
            self.at(self.now + DELAY,
                    lambda: self.deliver(u, make()) if u.inc == inc else None)

    def apply_instance(self, u: Unit, acts: list[Any]) -> None:
        for a in acts:
            if isinstance(a, Send):
                dst = self.graph.channels[a.channel].dst
                ev = (BatchIn(I(dst), a.channel, a.msg) if isinstance(a.msg, Batch)
                      else MarkerIn(I(dst), a.channel, a.msg))
                self.send_to(dst, lambda ev=ev: ev)
            elif isinstance(a, SendPeer):
                kind = KIND.get(type(a.msg), type(a.msg).__name__)
                self.peer[kind, self.gv.operator_of(u.id),
                          self.gv.operator_of(self.route[a.to])] += 1
                self.send_to(a.to, lambda a=a: PeerIn(I(u.id), a.msg, to=a.to))
            elif isinstance(a, SetTimer):
                self.at(self.now + a.after, lambda a=a, inc=u.inc: self.deliver(
                    u, TimerFired(a.key, self.now)) if u.inc == inc else None)
            elif isinstance(a, Route):
                self.route[a.slot] = a.to
            elif isinstance(a, AdoptSlot):
                u.cores[a.slot] = InstanceCore(self.graph, a.slot)
                self.deliver(u, Started(a.slot, u.inc, "adopt"))
            elif isinstance(a, Suspect):
                ev = Suspected(a.instance, I(u.id), a.reason, self.now)
                self.at(self.now + DELAY, lambda ev=ev: self.coordinate(ev))
            elif isinstance(a, Report):
                ev2 = ReportIn(a.slot or I(u.id), u.inc, a.msg, self.now)
                self.at(self.now + DELAY, lambda ev=ev2: self.coordinate(ev))
            elif isinstance(a, Emit):
                for n, rec in enumerate(a.records):
                    uid = a.uids[n] if a.uids is not None else None
                    if uid is not None and uid in self.seen_uids:
                        continue  # the store's idempotent upsert
                    self.seen_uids.add(uid)
                    self.output[rec] += 1

    def coordinate(self, ev: Any) -> None:
        for a in self.coord.handle(ev, self):
            if isinstance(a, Stop):
                for i in a.instances:
                    if i in self.units:
                        self.units[i].alive = False
            elif isinstance(a, Restart):
                self.start(a.instance, a.init)
            elif isinstance(a, Control):
                self.send_to(a.instance, lambda a=a: ControlIn(a.msg, a.instance))
            elif isinstance(a, SetTimer):
                self.at(self.now + a.after, lambda a=a: self.coordinate(
                    TimerFired(a.key, self.now)))

    def kill(self, slot: str) -> None:
        u = self.units[slot]
        if u.alive:
            u.alive = False
            self.at(self.now + DETECT, lambda: self.coordinate(
                FailureDetected(frozenset({I(slot)}), self.now)))

    def run(self, kills: tuple[tuple[float, str], ...] = (), until: float = 20.0) -> Counter:
        for a in self.coord.initial(self):
            assert isinstance(a, Restart)
            self.start(a.instance)
        for t, slot in kills:
            self.at(t, lambda s=slot: self.kill(s))
        while self.heap and self.now <= until and not self.coord.finished(self):
            self.now, _, fn = heapq.heappop(self.heap)
            fn()
        assert self.coord.finished(self), "the run did not finish"
        return self.output


def judge(got: Counter, golden: Counter) -> tuple[int, int]:
    lost = sum((golden - got).values())
    dup = sum((got - golden).values())
    return lost, dup


def golden(topo: Topology) -> Counter:
    return MiniKernel(topo, ReplicaRingParams(semantics="at-most-once")).run()


@pytest.mark.parametrize("r", [2, 4])
def test_table1_counted_from_the_contract_logic(r):
    topo = chain(r, 100 * r, sources=r)
    k = MiniKernel(topo, ReplicaRingParams(reinstate_after=None))
    out = k.run()
    assert judge(out, golden(topo)) == (0, 0)
    colleague = {kind: sum(n for (kk, a, b), n in k.peer.items() if kk == kind and a == b)
                 for kind in ("record", "purge")}
    assert colleague["record"] == table1_messages(r) == PAPER_TABLE1[r]
    assert colleague["purge"] == table1_messages(r)
    between = {kind: sum(n for (kk, a, b), n in k.peer.items()
                         if kk == kind and {a, b} in ({"A", "B"}, {"B", "out"}))
               for kind in ("ack", "delete")}
    assert between == {"ack": 2 * 100 * r, "delete": 2 * 100 * r}


@pytest.mark.parametrize("semantics", list(Guarantee))
@pytest.mark.parametrize("victim", ["A[1]", "B[2]"])
def test_a_replica_killed_mid_run_keeps_each_guarantee(semantics, victim):
    topo = chain(3, 120)
    params = ReplicaRingParams(semantics=semantics, reinstate_after=0.1)
    k = MiniKernel(topo, params)
    lost, dup = judge(k.run(kills=((0.05, victim),)), golden(topo))
    assert dup == 0 if semantics is not Guarantee.AT_LEAST_ONCE else lost == 0
    if semantics is not Guarantee.AT_MOST_ONCE:
        assert lost == 0
    assert k.route[victim] == victim and k.units[victim].alive  # reinstated
    assert any(victim in u.cores and u.id != victim for u in k.units.values())  # adopted


def test_a_source_restarts_and_exactly_once_drops_what_it_resends():
    topo = chain(2, 80)
    k = MiniKernel(topo, ReplicaRingParams(reinstate_after=None))
    assert judge(k.run(kills=((0.05, "src[0]"),)), golden(topo)) == (0, 0)


STALL = "stall"
# each shipped mutant, a kill schedule (time, slot) on the 3-replica chain under which it
# breaks exactly-once, and what it does there (a stall: the output never completes)
CAUGHT = {
    "takeover-ignores-pending": (((0.256, "B[0]"), (0.451, "B[1]")), STALL),
    "purge-before-ack": (((0.180, "B[0]"), (0.262, "A[0]")), (3, 0)),
    "sync-skips-successor": (((0.180, "B[0]"), (0.262, "A[0]")), (3, 0)),
    "origin-drops-on-ack": (((0.066, "B[2]"), (0.258, "A[2]")), STALL),
    "sink-no-dedup": (((0.066, "B[2]"), (0.258, "A[2]")), (0, 1)),
    "no-route": (((0.256, "B[0]"), (0.451, "B[1]")), STALL),
    "drop-records": (((0.083, "B[0]"), (0.101, "B[2]")), STALL),
    "no-ring-walk": (((0.256, "B[0]"), (0.451, "B[1]")), STALL),
    "replay-through-dedup": (((0.256, "B[0]"), (0.451, "B[1]")), STALL),
    "origin-purges-on-ack": (((0.256, "B[0]"), (0.451, "B[1]")), STALL),
}


def outcome(kills, instance=ReplicaRingInstance, coordinator=ReplicaRingCoordinator):
    topo = chain(3, 60)
    k = MiniKernel(topo, ReplicaRingParams(reinstate_after=0.2), instance, coordinator)
    try:
        return judge(k.run(kills=kills), golden(topo))
    except AssertionError:
        return STALL


def test_every_shipped_mutant_breaks_the_guarantee_where_the_protocol_keeps_it():
    assert set(CAUGHT) == {m.name for m in MUTANTS}
    for m in MUTANTS:
        kills, broken = CAUGHT[m.name]
        assert outcome(kills, m.instance, m.coordinator) == broken, m.name
    for kills in {kills for kills, _ in CAUGHT.values()}:
        assert outcome(kills) == (0, 0), kills


# the bundled topology replica-ring accepts: split x3 (flat_map, hash out) -> evens x3
# (filter, round-robin out) -> tag x3 -> sink
KILLS_ON_CHAIN = (
    ((0.079, "tag[2]"), (0.329, "tag[1]")),  # two in one ring, one after the other
    ((0.104, "split[2]"), (0.133, "split[0]")),  # two in one ring, the second mid-takeover
    ((0.240, "split[1]"), (0.255, "evens[1]")),  # a replica and its next hop together
)


def replica_chain() -> Topology:
    topo = load_topology(Path(__file__).resolve().parent.parent / "topologies"
                         / "replica-chain.yaml")
    return topo.model_copy(update={"input": topo.input.model_copy(update={"records": 600})})


@pytest.mark.parametrize("semantics", list(Guarantee))
def test_the_bundled_replica_chain_keeps_each_guarantee_under_kills(semantics):
    topo = replica_chain()
    gold = golden(topo)
    for kills in KILLS_ON_CHAIN:
        k = MiniKernel(topo, ReplicaRingParams(semantics=semantics, reinstate_after=0.2))
        lost, dup = judge(k.run(kills=kills), gold)
        if semantics is not Guarantee.AT_MOST_ONCE:
            assert lost == 0, kills
        if semantics is not Guarantee.AT_LEAST_ONCE:
            assert dup == 0, kills


def test_the_faithful_variant_duplicates_on_the_bundled_chain():
    topo = replica_chain()
    k = MiniKernel(topo, ReplicaRingParams(variant="faithful", reinstate_after=0.2))
    kills = ((0.07900974185664848, "tag[2]"), (0.3292978634998701, "tag[1]"))
    assert judge(k.run(kills=kills), golden(topo)) == (0, 6)  # exactly-once claimed
