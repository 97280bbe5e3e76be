"""Correlated failures on the simulation host (ftctl/sim/correlated.py): an instance and its
ring neighbour at once, the predecessor of a replacement just started, and capacity that
returns one node at a time on a cluster with no spare slot."""

from __future__ import annotations

import random

import pytest

from ftctl.kernel.history import HistoryEvent
from ftctl.runtime.graph import ExecutionGraph
from ftctl.sim.faults import (
    AFTER_RESTART_WITHIN,
    NEIGHBOUR_KINDS,
    STAGED_KINDS,
    AfterRestart,
    FailureSchedule,
    Pair,
    StagedLoss,
)
from ftctl.sim.host import SimHost
from ftctl.sim.runner import STAGED_NODES, Simulator, sim_params
from protocols.registry import PROTOCOLS
from tests.conftest import load

pytestmark = pytest.mark.sim

SHORT = {"ping_every": 0.002, "ping_timeout": 0.006, "retry_every": 0.002,
         "reinstate_after": 0.004}


def _host(protocol: str, topology: str, params: dict[str, float], **kw: object) -> SimHost:
    graph = ExecutionGraph(load(topology))
    spec = PROTOCOLS[protocol]
    return SimHost(graph, spec, sim_params(graph, spec, params), seed=4, **kw)  # type: ignore[arg-type]


def _crashes(events: list[HistoryEvent]) -> list[tuple[float, list[str]]]:
    return [(e.t, e.data["instances"]) for e in events
            if e.kind == "fault-injected" and e.data.get("type") == "crash"]


def test_a_pair_is_an_instance_and_the_next_of_its_operator_at_once() -> None:
    host = _host("replica-ring", "replica-chain", SHORT)
    host.at(0.01, lambda: host.inject(Pair(0, "split[2]")))
    res = host.run()
    assert _crashes(res.events) == [(0.01, ["split[0]", "split[2]"])]  # round the ring
    assert res.complete


def test_after_restart_strikes_the_predecessor_once_the_replacement_runs() -> None:
    host = _host("replica-ring", "replica-chain", SHORT)
    host.at(0.01, lambda: host.inject(AfterRestart(0, 0.001, "evens[1]")))
    res = host.run()
    (first, second) = _crashes(res.events)
    assert first == (0.01, ["evens[1]"]) and second[1] == ["evens[0]"]
    started = next(e.t for e in res.events if e.kind == "instance-started"
                   and e.instance == "evens[1]")
    assert second[0] == pytest.approx(started + 0.001)
    assert res.complete and not host.on_restart  # the follow-up fired once


def test_staged_capacity_returns_node_by_node_on_a_cluster_without_spare_slots() -> None:
    sim = Simulator(load("progressive-shared"), PROTOCOLS["progressive"], {},
                    kinds=STAGED_KINDS)
    cluster = sim.cluster()
    assert cluster is not None and len(cluster.nodes) == STAGED_NODES
    slots = sum(n.slots for n in cluster.nodes.values())
    assert len(sim.graph.order) <= slots < len(sim.graph.order) + STAGED_NODES
    graph = sim.graph
    host = SimHost(graph, sim.protocol, sim.params, seed=4, cluster=cluster)
    host.at(0.005, lambda: host.inject(StagedLoss(0, 2, (0.004, 0.006))))
    res = host.run()
    down = [(e.t, e.data["node"]) for e in res.events if e.kind == "node-down"]
    up = [(e.t, e.data["node"]) for e in res.events if e.kind == "node-up"]
    assert [t for t, _ in down] == [0.005, 0.005]
    assert [n for _, n in up] == [n for _, n in down]
    assert [round(t, 6) for t, _ in up] == [0.009, 0.015]  # one at a time
    plans = [e for e in res.events if e.kind == "protocol" and e.data.get("name") == "plan"]
    assert len(plans) >= 2  # restarts planned as each node came back
    assert res.complete and sim.run_one(1).verdict.passed


def test_a_ring_schedule_draws_one_correlated_failure() -> None:
    for seed in range(20):
        s = FailureSchedule.random(random.Random(seed), 500, 3, 3, NEIGHBOUR_KINDS)
        (f,) = s.strikes
        assert isinstance(f, Pair | AfterRestart)
        assert not isinstance(f, AfterRestart) or 0 <= f.within <= AFTER_RESTART_WITHIN
