"""The placement rule: a protocol's replica groups on distinct executors."""

from __future__ import annotations

from pathlib import Path

from ftctl.runtime.graph import ExecutionGraph
from ftctl.spark.placement import location, spread
from protocols.contract.view import GraphView
from protocols.replica_ring.spec import SPEC, rings


def test_each_group_lands_on_distinct_executors() -> None:
    groups = (frozenset({"A[0]", "A[1]", "A[2]"}), frozenset({"B[0]", "B[1]", "B[2]"}))
    execs = ["e0", "e1", "e2"]
    got = spread(groups, execs)
    for group in groups:
        assert sorted(got[i] for i in group) == execs  # one replica per executor
    # groups start one executor further along: the first replicas do not pile up
    assert got["A[0]"] != got["B[0]"]


def test_more_replicas_than_executors_wrap_around_evenly() -> None:
    got = spread((frozenset({"A[0]", "A[1]", "A[2]"}),), ["e0", "e1"])
    assert sorted(got.values()) == ["e0", "e0", "e1"]
    assert spread((frozenset({"A[0]"}),), []) == {}


def test_replica_ring_spreads_every_ring_of_replica_chain() -> None:
    from ftctl.config.load import load_topology

    root = Path(__file__).resolve().parent.parent
    graph = ExecutionGraph(load_topology(root / "topologies" / "replica-chain.yaml"))
    groups = rings(GraphView(graph))
    assert SPEC.spared is rings and len(groups) == 3
    execs = [location(str(i), "127.0.0.1") for i in range(3)]
    got = spread(groups, execs)
    assert set(got) == {i for g in groups for i in g}  # sources and sinks are not pinned
    for group in groups:
        assert len({got[i] for i in group}) == 3
    assert execs[0] == "executor_127.0.0.1_0"
