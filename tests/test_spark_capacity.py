"""Spark workers as the kernel's slots (ftctl/spark/capacity.py), without Spark: a fake
master answer, the core count, and the kernel restoring progressive's queries in
profit-density order as workers come back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ftctl.config.load import load_topology
from ftctl.kernel.commands import HostCommand, Log, StartGroup
from ftctl.kernel.coordinator import CoordinatorKernel
from ftctl.kernel.outputs import Outputs
from ftctl.runtime.graph import ExecutionGraph
from ftctl.spark.capacity import SparkCapacity, Worker, WorkerSlots, workers_from_master
from ftctl.store import MemoryStore, SinkStore
from protocols.progressive.coordinator import ProgressiveCoordinator
from protocols.progressive.params import ProgressiveParams

ROOT = Path(__file__).resolve().parent.parent


def w(name: str, cores: int = 4, alive: bool = True, rack: str = "a") -> Worker:
    return Worker(name, cores, alive, {"rack": rack})


def test_master_answer_names_and_labels_the_workers() -> None:
    data: dict[str, Any] = {"workers": [
        {"id": "worker-2-127.0.0.1-7002", "host": "127.0.0.1", "port": 7002, "cores": 2,
         "state": "ALIVE"},
        {"id": "worker-1-127.0.0.1-7001", "host": "127.0.0.1", "port": 7001, "cores": 2,
         "state": "DEAD"},
        {"id": "worker-3-127.0.0.1-7003", "host": "127.0.0.1", "port": 7003, "cores": 3,
         "state": "ALIVE"},
    ]}
    known = {"127.0.0.1:7001": ("w0", {"rack": "a"}), "127.0.0.1:7002": ("w1", {"rack": "b"})}
    assert workers_from_master(data, known) == [
        Worker("w0", 2, False, {"rack": "a"}, "127.0.0.1:7001"),
        Worker("w1", 2, True, {"rack": "b"}, "127.0.0.1:7002"),
        Worker("worker-3-127.0.0.1-7003", 3, True, {}, "127.0.0.1:7003")]


def test_cores_are_taken_released_and_go_with_their_worker() -> None:
    slots = WorkerSlots([w("w0", 2), w("w1", 2), w("w2", 2)], reserved=1)
    assert [slots.take(i, 0) for i in "abcdef"] == [True] * 5 + [False]
    assert slots.take("a", 1)  # already holds one
    cap = slots.capacity()
    # The spare fills the first core, the instances the rest, in the order they came.
    assert [(n.id, n.used) for n in cap.nodes] == [("w0", 2), ("w1", 2), ("w2", 2)]
    assert dict(cap.placed) == {"a": "w0", "b": "w1", "c": "w1", "d": "w2", "e": "w2"}
    assert slots.update([w("w0", 2), w("w1", 2, alive=False), w("w2", 2, alive=False)])
    assert slots.free() == 0 and slots.capacity().free == 0
    # Until the detection releases the lost ones, they hold no node.
    assert dict(slots.capacity().placed) == {"a": "w0"}
    for i in "bcde":
        slots.release(i)
    assert slots.free() == 0 and not slots.take("f", 0)  # w0: the spare and a
    assert slots.update([w("w0", 2), w("w1", 2), w("w2", 2, alive=False)])  # w1 is back
    assert [slots.take(i, 0) for i in "fgh"] == [True, True, False]
    assert not slots.update(list(slots.workers))  # the same reading changes nothing


def test_a_reading_becomes_a_capacity_changed_record() -> None:
    posted: list[list[Worker]] = []
    readings = [[w("w0"), w("w1")]]
    cap = SparkCapacity.of(lambda: readings[-1], needed=6, reserved=1, post=posted.append)
    assert cap is not None
    assert cap.update([w("w0"), w("w1")]) is None
    assert cap.update([w("w0", alive=False), w("w1"), w("w2")]) == {
        "total": 8, "free": 7, "alive": ["w1", "w2"], "joined": ["w2"], "left": ["w0"]}
    # No view when the cores cannot hold the run (its initial plan would never start).
    assert SparkCapacity.of(lambda: readings[-1], needed=8, reserved=1, post=posted.append) \
        is None
    assert SparkCapacity.of(lambda: None, needed=1, reserved=0, post=posted.append) is None


def _started(cmds: list[HostCommand]) -> list[str]:
    return [i for c in cmds if isinstance(c, StartGroup) for i, _ in c.starts]


def test_the_kernel_restores_queries_by_profit_density_as_workers_return() -> None:
    """progressive-small (12 instances) on 3 workers of 4 cores: w0 and w1 die with the 8
    instances they ran; w3, w4, w5 come back one at a time, 3 cores each. Each arrival
    starts the best query by profit density that fits the free cores (out1, cost 1.5 for
    priority 1; then out2 and out3 tie at 0.5, the cheaper first), a core left idle
    rather than given to a query that cannot run whole."""
    graph = ExecutionGraph(load_topology(ROOT / "topologies" / "progressive-small.yaml"))
    slots = WorkerSlots([w("w0"), w("w1"), w("w2", rack="b")])
    kernel = CoordinatorKernel(ProgressiveCoordinator, graph, ProgressiveParams(), MemoryStore(),
                               Outputs(SinkStore()), slots)
    assert sorted(_started(kernel.start(0.0))) == sorted(graph.order)
    for i in graph.order:
        assert kernel.start_unit(i, 0) is not None
    survivors = ["tags[0]", "ones[0]", "ones[1]", "cnt[0]"]
    lost = [i for i in graph.order if i not in survivors]
    slots.update([w("w0", alive=False), w("w1", alive=False), w("w2", rack="b")])
    kernel.capacity_changed(1.0)
    for i in lost:
        kernel.lost(i)
    assert _started(kernel.failure(frozenset(lost), 1.1)) == []  # no free core
    assert slots.free() == 0

    arrivals = []
    for t, back in [(5.0, ["w3"]), (7.0, ["w3", "w4"]), (9.0, ["w3", "w4", "w5"])]:
        slots.update([w("w0", alive=False), w("w1", alive=False), w("w2", rack="b"),
                      *(w(n, 3) for n in back)])
        cmds = kernel.capacity_changed(t)
        arrivals.append(_started(cmds))
        for i in arrivals[-1]:
            kernel.start_unit(i, kernel.incarnation(i))
        assert not [c for c in cmds if isinstance(c, Log) and c.kind == "restart-deferred"]
    assert arrivals == [["cnt[1]", "out1[0]"], ["win[0]", "win[1]", "out2[0]"],
                        ["both[0]", "both[1]", "out3[0]"]]
    assert slots.free() == 1


def test_a_returned_workers_cores_are_offered_only_once_it_is_warm() -> None:
    """A cold worker (back, no slot waiting yet) counts in the cluster's reading but its
    cores are not offered: a plan on them would wait for a Spark job start."""
    back = Worker("w3", 3, True, {}, "127.0.0.1:7003")
    slots = WorkerSlots([w("w2", 4), back])
    slots.cold = frozenset({back.address})
    assert slots.total() == 4 and [n.alive for n in slots.capacity().nodes] == [True, False]
    assert [slots.take(i, 0) for i in "abcde"] == [True] * 4 + [False]
    slots.cold = frozenset()  # a slot waits on w3 now
    assert slots.total() == 7 and slots.take("e", 0)
    assert dict(slots.capacity().placed)["e"] == "w3"


def test_the_capacity_changed_record_counts_cold_workers() -> None:
    w4 = Worker("w4", 3, True, {}, "127.0.0.1:7004")
    cap = SparkCapacity.of(lambda: [w("w2", 4)], needed=1, reserved=0, post=lambda _: None)
    assert cap is not None
    cap.slots.cold = frozenset({w4.address})
    assert cap.update([w("w2", 4), w4]) == {
        "total": 7, "free": 7, "alive": ["w2", "w4"], "joined": ["w4"], "left": []}
