"""A full and a slow snapshot store (``store-full``, ``store-slow``) on both hosts' stores:
on the simulation host a full store kills the writers it catches and no restore ever
uses a write it refused; a slow one holds back what an event that writes does until its
writes are done, and a start until its restores are read; on the Spark host's
DirectoryStore (without Spark) the markers the driver writes reach every process using
the store."""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any

import pytest

from chaos.hostctx import HostFaultContext
from chaos.store_faults import StoreFullFault, StoreSlowFault
from ftctl.config.fault_kinds import FAULT_TYPES
from ftctl.kernel.history import HistoryEvent
from ftctl.runtime.graph import ExecutionGraph
from ftctl.sim import faults as sf
from ftctl.sim import store_faults as stf
from ftctl.sim.golden import golden_output
from ftctl.sim.host import SimHost, SimResult
from ftctl.sim.runner import sim_params
from ftctl.store import DirectoryStore, MemoryStore, StoreFull
from ftctl.verify.checker import verify
from protocols.contract.spec import Guarantee
from protocols.registry import PROTOCOLS
from tests.conftest import load

TOPOLOGY = "windowed"


def _sim(protocol: str, faults: list[tuple[float, sf.SimFault]], seed: int = 3,
         trace: bool = False) -> tuple[SimHost, list[tuple[float, int, str]]]:
    """A host with ``faults`` struck at their times, and the writes its store took."""
    graph = ExecutionGraph(load(TOPOLOGY))
    spec = PROTOCOLS[protocol]
    host = SimHost(graph, spec, sim_params(graph, spec, {}), seed, trace=trace)
    for t, f in faults:
        host.at(t, lambda f=f: host.inject(f))  # type: ignore[misc]
    written: list[tuple[float, int, str]] = []
    put = host.store.put

    def recording_put(snapshot: int, instance: str, blob: Any,
                      writer: str | None = None) -> None:
        put(snapshot, instance, blob, writer)  # raises on a full store: not recorded
        written.append((host.now, snapshot, instance))

    host.store.put = recording_put  # type: ignore[method-assign]
    return host, written


def _passed(result: SimResult) -> bool:
    graph = ExecutionGraph(load(TOPOLOGY))
    return bool(verify(load(TOPOLOGY).sink_modes(), golden_output(graph), result.outputs,
                       Guarantee.EXACTLY_ONCE, complete=result.complete,
                       stopped=result.stopped).passed)


def _kinds(result: SimResult, kind: str) -> list[HistoryEvent]:
    return [e for e in result.events if e.kind == kind]


def _restarts(result: SimResult) -> list[HistoryEvent]:
    return [e for e in _kinds(result, "instance-started") if e.data.get("reason") == "restart"]


# ---------------------------------------------------------------- simulation: store-full


def test_a_full_store_refuses_writes_and_serves_reads() -> None:
    store = MemoryStore()
    store.put(1, "a", {"n": 1})
    store.full += 1
    with pytest.raises(StoreFull, match="no space left"):
        store.put(2, "a", {"n": 2})
    assert store.get(1, "a") == {"n": 1} and store.snapshots_of("a") == [1]
    store.full -= 1
    store.put(2, "a", {"n": 2})
    assert store.snapshots_of("a") == [1, 2]


@pytest.mark.parametrize("protocol", ["checkpoint", "falkirk", "lineage"])
def test_a_full_store_kills_its_writers_and_no_restore_uses_a_refused_write(
        protocol: str) -> None:
    host, written = _sim(protocol, [(0.004, stf.FullStore(0, 0.008)),
                                    (0.03, sf.Strike(0, 1, ("win[0]",)))])
    result = host.run()
    failed = _kinds(result, "store-write-failed")
    assert failed and all(e.data["reason"] == "store full" for e in failed)
    assert all(0.004 <= e.t <= 0.012 for e in failed)
    assert all(e.data["snapshots"] for e in failed)  # each died writing a snapshot
    # a refused write left nothing behind: whatever a restart restores was written, and
    # written before it restored it (a later incarnation may take the same id again)
    restores = [(e.t, e.data["restore"], e.instance) for e in _restarts(result)
                if e.data.get("restore") is not None]
    assert restores
    for t, ref, instance in restores:
        assert any(w[0] <= t and w[1:] == (ref, instance) for w in written), (ref, instance)
    assert result.complete and result.stopped is None and _passed(result)


# ---------------------------------------------------------------- simulation: store-slow


def test_a_slow_write_holds_back_its_event_and_its_unit_until_it_is_done() -> None:
    latency = 0.003
    host, written = _sim("checkpoint", [(0.002, stf.SlowStore(0, latency, 0.05))])
    began: list[tuple[float, str, int]] = []  # (when, unit, writes) an event that writes
    store_write = host.store_write

    def recording(unit: Any, acts: list[Any]) -> None:
        if not host.writing_late:
            began.append((host.now, unit.id, sum(type(a).__name__ == "Persist"
                                                  for a in acts)))
        store_write(unit, acts)

    host.store_write = recording  # type: ignore[method-assign]
    result = host.run()
    slow = [w for w in written if 0.002 < w[0] < 0.05]
    assert began and slow
    # every write in the window took effect latency x its event's writes after it began
    for t, unit, n in began:
        done = [w for w in written if w[2] == unit and w[0] == pytest.approx(t + latency * n)]
        assert done, (t, unit)
    assert all(any(w[0] == pytest.approx(t + latency * n) for t, _u, n in began)
               for w in slow)
    assert result.complete and _passed(result)


def test_a_start_on_a_slow_store_waits_for_its_restores() -> None:
    latency = 0.002
    host, _ = _sim("checkpoint", [(0.012, stf.SlowStore(0, latency, 0.05)),
                                  (0.0121, sf.Strike(0, 1, ("win[0]",)))], trace=True)
    result = host.run()
    (waited,) = [line for line in result.trace if "start reads a slow store" in line]
    t = float(waited.split()[0])
    restarts = _restarts(result)
    reads = sum(e.data.get("restore") is not None for e in restarts)
    assert reads == len(restarts) == 6  # checkpoint rolls every instance back
    assert all(e.t == pytest.approx(t + latency * reads) for e in restarts)
    assert result.complete and _passed(result)


def test_a_unit_that_dies_during_its_slow_write_does_nothing_of_that_event() -> None:
    host, written = _sim("checkpoint", [(0.002, stf.SlowStore(0, 0.004, 0.05))], trace=True)
    began: list[tuple[float, str]] = []
    store_write = host.store_write

    def kill_while_writing(unit: Any, acts: list[Any]) -> None:
        store_write(unit, acts)
        if not began and not host.writing_late:  # the first slow write: crash its unit
            began.append((host.now, unit.id))
            host.inject(sf.Strike(0, 1, (unit.id,)))

    host.store_write = kill_while_writing  # type: ignore[method-assign]
    result = host.run()
    ((t, unit),) = began
    assert any(f"slow write of {unit} lost with it" in line for line in result.trace)
    assert not [w for w in written if w[2] == unit and t <= w[0] <= t + 0.004]
    assert result.complete and _passed(result)


def test_the_new_kinds_are_drawn_on_top_and_leave_the_kit_draws_alone() -> None:
    assert sf.parse_kinds("store-slow,store-full") == ("store-slow", "store-full")
    assert not {"store-slow", "store-full"} & set(sf.ALL_KINDS)  # the kit's pinned draws
    for kind in ("store-slow", "store-full"):
        assert FAULT_TYPES[kind].hosts == ("sim", "spark") and FAULT_TYPES[kind].takes_duration
    assert not FAULT_TYPES["store-slow"].recovers and FAULT_TYPES["store-full"].recovers
    base = sf.FailureSchedule.random(random.Random(7), 500, 3, 3, ("crash",)).strikes
    both = sf.FailureSchedule.random(random.Random(7), 500, 3, 3,
                                     ("crash", "store-slow", "store-full")).strikes
    assert [f for f in both if isinstance(f, sf.Strike)] == base
    assert any(isinstance(f, (stf.SlowStore, stf.FullStore)) for f in both)


# ---------------------------------------------------------------- Spark's DirectoryStore


def _ctx(store: DirectoryStore) -> HostFaultContext:
    return HostFaultContext(clock=lambda: 4.0, instance_ids=["count[0]"],
                            task_pids=lambda _i: None, store=store)


def test_a_full_store_fails_every_write_by_anyone_until_the_last_one_heals(
        tmp_path: Path) -> None:
    store = DirectoryStore(tmp_path / "snapshots")
    store.put(1, "count[0]", {"n": 1})
    task_view = DirectoryStore.shared(store.root, store.key())  # as a task opens it
    assert task_view is not None
    first, second = StoreFullFault("random", duration=1.0), StoreFullFault("random",
                                                                           duration=2.0)
    rec = first.inject(_ctx(store))
    assert (rec.fault, rec.target) == ("store-full", "store")
    second.inject(_ctx(store))
    for op in (lambda: store.put(2, "count[0]", 2),
               lambda: task_view.write_pending(2, "count[0]", 2)):
        with pytest.raises(StoreFull):
            op()
    assert task_view.get(1, "count[0]") == {"n": 1}  # reads work
    assert store.snapshots_of("count[0]") == [1]  # nothing of a refused write is left
    first.heal(_ctx(store))
    with pytest.raises(StoreFull):
        store.put(2, "count[0]", 2)
    second.heal(_ctx(store))
    name, size = task_view.write_pending(2, "count[0]", {"n": 2})
    store.adopt(2, "count[0]", name, size)
    assert store.get(2, "count[0]") == {"n": 2}


def test_a_slow_store_delays_each_read_and_write_by_its_largest_latency(
        tmp_path: Path) -> None:
    store = DirectoryStore(tmp_path / "snapshots")
    store.put(1, "count[0]", {"n": 1})

    def took(op: Any) -> float:
        t0 = time.monotonic()
        op()
        return time.monotonic() - t0

    small = StoreSlowFault("random", {"latency": 0.05}, duration=1.0)
    large = StoreSlowFault("random", {"latency": 0.2}, duration=1.0)
    rec = small.inject(_ctx(store))
    assert rec.details["latency"] == 0.05
    assert 0.05 <= took(lambda: store.get(1, "count[0]")) < 0.2
    large.inject(_ctx(store))
    assert took(lambda: store.put(2, "count[0]", 2)) >= 0.2
    small.heal(_ctx(store))
    assert took(lambda: store.check(1, "count[0]")) >= 0.2  # the large one is still on
    large.heal(_ctx(store))
    assert took(lambda: store.get(2, "count[0]")) < 0.05
    assert not (tmp_path / "snapshots" / DirectoryStore.SLOW_FILE).exists()
