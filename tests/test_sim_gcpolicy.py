"""A simulated run pauses automatic garbage collection (``ftctl/sim/gcpolicy.py``)."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ftctl.config.load import load_topology
from ftctl.runtime.graph import ExecutionGraph
from ftctl.sim import gcpolicy
from ftctl.sim.host import SimHost
from ftctl.sim.runner import Simulator, sim_params
from protocols.contract.params import validate
from protocols.registry import PROTOCOLS

pytestmark = pytest.mark.sim

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def collections() -> Iterator[list[int]]:
    """The generation of every collection that starts while the test runs."""
    seen: list[int] = []

    def hook(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            seen.append(info["generation"])

    was = gc.isenabled()
    gc.enable()
    gc.callbacks.append(hook)
    try:
        yield seen
    finally:
        gc.callbacks.remove(hook)
        if not was:
            gc.disable()


def _host(records: int = 2000, hash_trace: bool = False) -> SimHost:
    topo = load_topology(ROOT / "topologies" / "wordcount.yaml").with_input(records=records)
    graph = ExecutionGraph(topo)
    info = PROTOCOLS["causal"]
    return SimHost(graph, info, sim_params(graph, info, {}), 5, hash_trace=hash_trace)


class On(gcpolicy.PausedCollection):
    """Automatic collection on throughout, as before the policy."""

    def __enter__(self) -> gcpolicy.PausedCollection:
        gc.enable()
        return self


def test_a_run_collects_once_at_its_end(collections: list[int],
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    host = _host()
    gc.collect()
    collections.clear()
    assert host.run().complete
    # Ours, of the two younger generations when the run ended; building the result
    # after it may start one more.
    assert collections[:1] == [1] and len(collections) <= 2, collections
    assert gc.isenabled()

    monkeypatch.setattr("ftctl.sim.host.PausedCollection", On)
    host = _host()
    gc.collect()
    collections.clear()
    host.run()
    assert len(collections) > 10  # what the pause saves, on this small run


def test_the_valve_collects_mid_run(collections: list[int],
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gcpolicy, "VALVE", 1000)
    monkeypatch.setattr(gcpolicy, "CHECK_EVERY", 64)
    monkeypatch.setattr("ftctl.sim.host.CHECK_EVERY", 64)
    host = _host()
    gc.collect()
    collections.clear()
    host.run()
    # the valve's, of the young generation only, then ours at the end
    assert len(collections) > 2 and set(collections[:-1]) == {0}, collections
    assert collections[-1] == 1


def test_a_caller_that_had_collection_off_keeps_it_off(collections: list[int]) -> None:
    gc.disable()
    try:
        collections.clear()
        _host().run()
        assert not gc.isenabled()
        assert collections == []  # nothing collected for it
    finally:
        gc.enable()


def test_a_run_that_raises_turns_collection_back_on(collections: list[int],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    host = _host()

    def boom(data: Any) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(host, "_on_step", boom)
    with pytest.raises(RuntimeError, match="boom"):
        host.run()
    assert gc.isenabled()


def test_runs_are_the_same_with_collection_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """Collection frees memory and nothing else: a run's trace is the same whether it ran
    paused or with automatic collection on throughout."""
    paused = _host(600, hash_trace=True).run()
    monkeypatch.setattr("ftctl.sim.host.PausedCollection", On)
    on = _host(600, hash_trace=True).run()
    assert paused.trace_hash and paused.trace_hash == on.trace_hash


def _simulator() -> Simulator:
    topo = load_topology(ROOT / "topologies" / "wordcount.yaml").with_input(records=2000)
    spec = PROTOCOLS["causal"]
    return Simulator(topo, spec, validate(spec.params, {}, spec.name))


def _hosts(monkeypatch: pytest.MonkeyPatch) -> list[weakref.ref[SimHost]]:
    made: list[weakref.ref[SimHost]] = []
    init = SimHost.__init__

    def remember(self: SimHost, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        made.append(weakref.ref(self))

    monkeypatch.setattr(SimHost, "__init__", remember)
    return made


@pytest.mark.parametrize("valve", [None, 1000])
def test_a_schedules_host_is_freed_when_the_schedule_ends(
        valve: int | None, monkeypatch: pytest.MonkeyPatch) -> None:
    """The host's state is full of cycles: collected while the host still lived, all of it
    waited for an older collection, and each schedule of a long ``ftctl sim`` added its
    state to the process's memory. A valve's collection moves what it keeps to an older
    generation, which the collection at the end must reach too."""
    sim = _simulator()
    if valve is not None:
        monkeypatch.setattr(gcpolicy, "VALVE", valve)
        monkeypatch.setattr("ftctl.sim.host.CHECK_EVERY", 64)
    hosts = _hosts(monkeypatch)
    gc.collect()
    for seed in (1, 2):
        sim.run_one(seed)
        assert len(hosts) == seed and hosts[-1]() is None, f"schedule {seed}'s host lives on"


@pytest.mark.parametrize("protocol", ["causal", "lineage", "progressive", "falkirk"])
def test_a_schedules_protocol_state_is_freed_without_a_collection(
        protocol: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """What the protocol instances hold (a Nexmark sink's million counts) is freed by
    reference counting once a schedule's record is taken, not walked by the collection
    that frees the host: no instance is in a cycle of its own, and the host drops its
    units and output before that collection."""
    from protocols.contract.logic import InstanceLogic

    topo = load_topology(ROOT / "topologies" / "wordcount.yaml").with_input(records=2000)
    spec = PROTOCOLS[protocol]
    sim = Simulator(topo, spec, validate(spec.params, {}, spec.name))
    made: list[weakref.ref[InstanceLogic[Any]]] = []
    init = InstanceLogic.__init__

    def remember(self: InstanceLogic[Any], *args: Any) -> None:
        init(self, *args)
        made.append(weakref.ref(self))

    monkeypatch.setattr(InstanceLogic, "__init__", remember)
    gc.disable()  # a caller with collection off: none is made for it
    try:
        assert sim.run_record(3).passed
        assert made and all(ref() is None for ref in made), [
            type(r()).__name__ for r in made if r() is not None]
    finally:
        gc.enable()


@pytest.mark.parametrize("protocol", ["causal", "lineage", "progressive"])
def test_a_schedule_leaves_few_objects_to_the_collection_at_its_end(protocol: str) -> None:
    """A sink's stored counts keep the identities they encode (``codec.decode_part``), and
    the store is in the host's cycles: unless the host empties it, every identity a run
    made waits for the collection that ends the schedule, which walks them all (a million
    on Nexmark q0, a quarter of a second)."""
    topo = load_topology(ROOT / "topologies" / "nexmark" / "q0.yaml").with_input(records=5000)
    spec = PROTOCOLS[protocol]
    sim = Simulator(topo, spec, validate(spec.params, {}, spec.name))
    gc.collect()
    gc.freeze()  # what the simulator holds: only the schedule's own objects are young
    gc.disable()
    try:
        assert sim.run_record(2).passed
        left = len(gc.get_objects(0)) + len(gc.get_objects(1))
        assert left < 1000, f"{left} objects left to the collection"
    finally:
        gc.unfreeze()
        gc.enable()
