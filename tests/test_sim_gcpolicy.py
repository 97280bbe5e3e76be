"""A simulated run pauses automatic garbage collection (``ftctl/sim/gcpolicy.py``)."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ftctl.config.load import load_topology
from ftctl.runtime.graph import ExecutionGraph
from ftctl.sim import gcpolicy
from ftctl.sim.host import SimHost
from ftctl.sim.runner import sim_params
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
    # Ours, of the young generation when the run ended; building the result after it
    # may start one more.
    assert collections[:1] == [0] and len(collections) <= 2, collections
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
    assert len(collections) > 2 and set(collections) == {0}, collections


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
