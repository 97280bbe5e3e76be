"""Nodes, slots and placement in the simulation host (ftctl/sim/cluster.py,
ftctl/kernel/placement.py): round-robin at start, restarts where a slot is free, by
priority, a release group all or none; node down kills what it holds, node up brings
its capacity back, and the coordinator hears both as CapacityChanged."""

from __future__ import annotations

from typing import Any

import pytest

from ftctl.kernel.placement import Placement
from ftctl.runtime.graph import ExecutionGraph
from ftctl.sim.cluster import SimCluster, SimNode, parse_labels
from ftctl.sim.golden import golden_output
from ftctl.sim.host import SimHost
from ftctl.sim.runner import sim_params
from ftctl.verify.checker import verify
from protocols.contract.events import CapacityChanged
from protocols.contract.spec import Guarantee
from protocols.contract.view import Capacity
from protocols.registry import PROTOCOLS
from tests.conftest import load

pytestmark = pytest.mark.sim


def test_workers_are_labelled_and_filled_round_robin() -> None:
    c = SimCluster.workers(3, 2, labels={1: {"rack": "a"}, 2: {"rack": "a"}})
    assert list(c.nodes) == ["worker-1", "worker-2", "worker-3"]
    assert c.select({"rack": "a"}) == ["worker-1", "worker-2"]
    got = [c.place(f"x[{k}]", "x", initial=True) for k in range(6)]
    assert got == ["worker-1", "worker-2", "worker-3"] * 2
    assert c.place("y[0]", "y", initial=True) is None  # full
    assert c.capacity().free == 0 and c.capacity().total == 6


def test_restart_goes_to_first_node_with_room_and_pins_hold() -> None:
    c = SimCluster([SimNode("a", 1, {"role": "core"}), SimNode("b", 2), SimNode("c", 2)],
                   pins={"src": {"role": "core"}})
    assert c.place("src[0]", "src", initial=True) == "a"
    assert c.place("src[1]", "src", initial=True) is None  # the only core node is full
    assert c.down("b") == []
    assert c.place("m[0]", "m", initial=False) == "c"  # b is down
    c.up("b")
    assert c.place("m[1]", "m", initial=False) == "b"
    assert c.down("c") == ["m[0]"] and "m[0]" not in c.where
    cap = c.capacity()
    assert [(n.id, n.alive, n.used) for n in cap.nodes] == [("a", True, 1), ("b", True, 1),
                                                             ("c", False, 0)]
    assert cap.free == 1 and cap.placed == {"src[0]": "a", "m[1]": "b"}


def test_labels_parse_and_refuse_garbage() -> None:
    assert parse_labels("rack=a, zone=1") == {"rack": "a", "zone": "1"}
    with pytest.raises(ValueError, match="'rack' is not key=value"):
        parse_labels("rack")


class FakeSlots:
    def __init__(self, free: int):
        self.free, self.held = free, set[str]()

    def capacity(self) -> Capacity:
        return Capacity()

    def take(self, instance: str, incarnation: int) -> bool:
        if self.free == 0:
            return False
        self.free -= 1
        self.held.add(instance)
        return True

    def release(self, instance: str) -> None:
        if instance in self.held:
            self.held.discard(instance)
            self.free += 1


def test_placement_by_priority_then_order_and_deferred_once() -> None:
    slots = FakeSlots(2)
    p = Placement(slots)
    for name, prio in [("a", 0.0), ("b", 0.5), ("c", 0.5), ("d", 2.0)]:
        p.enqueue(name, 1, prio, f"alone:{name}")
    placed, deferred = p.place()
    assert [w.instance for w in placed] == ["d", "b"]
    assert [w.instance for w in deferred] == ["c", "a"]
    assert p.place() == ([], [])  # still no room; deferred recorded only once
    p.stopped("d")  # its slot comes back
    placed, _ = p.place()
    assert [w.instance for w in placed] == ["c"]


def test_a_release_group_starts_all_or_none() -> None:
    slots = FakeSlots(2)
    p = Placement(slots)
    for name in "abc":
        p.enqueue(name, 1, 0.0, "plan")
    p.enqueue("z", 1, 0.0, "alone:z")
    placed, deferred = p.place()
    assert [w.instance for w in placed] == ["z"]  # the plan of 3 does not fit in 2
    assert slots.free == 1 and {w.instance for w in deferred} == {"a", "b", "c"}
    p.stopped("z")
    slots.free += 1
    placed, _ = p.place()
    assert [w.instance for w in placed] == ["a", "b", "c"]


def wordcount_on(workers: int, slots: int, seed: int = 1) -> tuple[ExecutionGraph, SimHost]:
    graph = ExecutionGraph(load("wordcount"))
    info = PROTOCOLS["checkpoint"]
    host = SimHost(graph, info, sim_params(graph, info, {}), seed,
                   cluster=SimCluster.workers(workers, slots))
    return graph, host


def test_default_host_has_unlimited_capacity() -> None:
    graph = ExecutionGraph(load("wordcount"))
    host = SimHost(graph, PROTOCOLS["none"], sim_params(graph, PROTOCOLS["none"], {}), 1)
    assert host.cluster is None and host.kernel.capacity == Capacity()


def test_node_down_kills_its_units_and_restart_waits_for_node_up() -> None:
    graph, host = wordcount_on(3, 2)
    seen: list[Capacity] = []
    handle = host.kernel.logic.handle

    def spy(ev: Any, view: Any) -> Any:
        if isinstance(ev, CapacityChanged):
            seen.append(ev.capacity)
        return handle(ev, view)

    host.kernel.logic.handle = spy  # type: ignore[method-assign]
    victims: list[str] = []
    host.at(0.008, lambda: victims.extend(host.node_down("worker-2")))
    host.at(0.05, lambda: host.node_up("worker-2"))
    result = host.run()
    assert len(victims) == 2 and all(i not in host.live or host.live[i].inc > 0
                                     for i in victims)
    assert [c.total for c in seen] == [4, 6]  # the coordinator heard the drop and the return
    ev = [e for e in result.events if e.kind in ("node-down", "node-up",
                                                      "restart-deferred", "instance-started")]
    kinds = [e.kind for e in ev]
    # Checkpoint restarts everyone as one group: 6 instances do not fit in 4 slots, so the
    # whole restart waits for the node to come back (blocking recovery), then all start.
    up = kinds.index("node-up")
    assert kinds[0] == "node-down" and kinds[1:up] == ["restart-deferred"] * 6
    assert kinds[up + 1:] == ["instance-started"] * 6
    assert all(e.t >= 0.05 for e in ev[up:])
    assert result.complete
    assert verify(graph.topology.sink_modes(), golden_output(graph), result.outputs,
                  Guarantee.EXACTLY_ONCE, complete=True).passed
    assert sorted(host.cluster.where.values()) == sorted(  # type: ignore[union-attr]
        ["worker-1", "worker-1", "worker-2", "worker-2", "worker-3", "worker-3"])
