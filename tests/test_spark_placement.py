"""The placement rule: a protocol's replica groups on distinct executors."""

from __future__ import annotations

from pathlib import Path

import pytest

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



class _Clock:
    """``time`` for the placement module: sleeping moves the clock on at once."""

    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_placement_waits_for_every_alive_workers_executor_then_spreads(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Executors that register late (a busy machine, containers: the last one 25 s after
    the first) are waited for: placed on the first one alone, every instance would share
    a worker, and one worker's loss would take them all."""
    from ftctl.config.load import load_topology
    from ftctl.spark import placement as module
    from protocols.checkpoint.spec import SPEC as CHECKPOINT

    clock = _Clock()
    monkeypatch.setattr(module, "time", clock)
    root = Path(__file__).resolve().parent.parent
    graph = GraphView(ExecutionGraph(load_topology(root / "topologies" / "wordcount.yaml")))

    def executors(_sc: object) -> list[str]:  # e1 comes at 10 s, e2 and e3 at 25 s
        return ["e0", *(["e1"] if clock.now >= 10 else []),
                *(["e2", "e3"] if clock.now >= 25 else [])]

    got = module.placement(None, CHECKPOINT, graph, workers=4, executors_of=executors)
    assert 25 <= clock.now < 26  # it waited until all four were there, no longer
    assert set(got.values()) == {"e0", "e1", "e2", "e3"}
    for op in ("split", "count"):  # an operator's instances on distinct executors
        assert len({got[i] for i in got if i.startswith(op)}) == 2
    # no other worker's executor ever comes: it gives up after ``wait``, spreads over one
    clock.now = 0.0
    assert set(module.placement(None, CHECKPOINT, graph, wait=30, workers=4,
                                executors_of=lambda _sc: ["e0"]).values()) == {"e0"}
    assert 30 <= clock.now < 31


class _Option:
    """A Scala ``Option[BigDecimal]`` as py4j hands it over: only its text can be read."""

    def __init__(self, cores: float | None) -> None:
        self.cores = cores

    def toString(self) -> str:  # Scala's name
        return "None" if self.cores is None else f"Some({self.cores:.9f})"


class _Context:
    """A SparkContext whose scheduler backend reports each executor's free cores: zero
    until the clock reaches the executor's time in ``launched``."""

    def __init__(self, launched: dict[str, float], clock: _Clock) -> None:
        self.launched, self.clock = launched, clock

    @property
    def _jsc(self) -> _Context:
        return self

    def sc(self) -> _Context:
        return self

    def schedulerBackend(self) -> _Context:
        return self

    def getExecutorAvailableCpus(self, executor: str) -> _Option:
        if executor not in self.launched:
            return _Option(None)
        return _Option(4.0 if self.clock.now >= self.launched[executor] else 0.0)


def test_placement_waits_for_executors_to_launch_not_only_register(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """All four executors registered at once, three launching 10 s later (a loaded
    machine): a task that prefers an executor with no free core yet runs anywhere
    (locality wait 0), so placing on them then put the whole first plan on executor 0."""
    from ftctl.config.load import load_topology
    from ftctl.spark import placement as module
    from protocols.checkpoint.spec import SPEC as CHECKPOINT

    clock = _Clock()
    monkeypatch.setattr(module, "time", clock)
    registered = [location(str(i), "127.0.0.1") for i in range(4)]
    monkeypatch.setattr(module, "live_executors", lambda _sc: registered)
    sc = _Context({"0": 0.0, "1": 10.0, "2": 10.0, "3": 10.0}, clock)
    root = Path(__file__).resolve().parent.parent
    graph = GraphView(ExecutionGraph(load_topology(root / "topologies" / "wordcount.yaml")))
    assert module.launched_executors(sc) == registered[:1]
    got = module.placement(sc, CHECKPOINT, graph, workers=4)
    assert 10 <= clock.now < 11
    assert set(got.values()) == set(registered)
