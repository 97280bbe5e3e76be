"""checkpoint's global rollback: what it discards, and the kernel doing it in one pass."""

from __future__ import annotations

from pathlib import Path

from ftctl.config.load import load_topology
from ftctl.kernel.coordinator import CoordinatorKernel
from ftctl.kernel.outputs import Outputs
from ftctl.runtime.graph import ExecutionGraph
from ftctl.store import MemoryStore, SinkStore
from protocols.checkpoint.coordinator import CheckpointCoordinator
from protocols.checkpoint.params import CheckpointParams
from protocols.contract.actions import DiscardSnapshots, DiscardStaged, Restart, Stop
from protocols.contract.events import FailureDetected
from protocols.contract.messages import Persisted
from protocols.contract.names import InstanceId

ROOT = Path(__file__).resolve().parent.parent
PARAMS = CheckpointParams(interval=1.0)


def _kernel() -> tuple[ExecutionGraph, MemoryStore, CoordinatorKernel]:
    graph = ExecutionGraph(load_topology(ROOT / "topologies" / "wordcount.yaml"))
    store = MemoryStore()
    kernel = CoordinatorKernel(CheckpointCoordinator, graph, PARAMS, store,
                               Outputs(SinkStore()))
    kernel.start(0.0)
    for i in graph.order:
        for ref in (1, 2, 3):
            store.put(ref, i, {"id": ref})
    for ref in (1, 2):  # snapshot 2 completes; 3 is persisted everywhere but not reported
        for i in graph.order:
            kernel.report(i, 0, Persisted(ref), 1.0)
    return graph, store, kernel


def test_a_rollback_restarts_everyone_from_the_last_complete_snapshot_discarding_once() -> None:
    graph, _store, kernel = _kernel()
    failed = InstanceId(graph.order[0])
    acts = kernel.logic.handle(FailureDetected(frozenset({failed}), 2.0), kernel)
    everyone = tuple(InstanceId(i) for i in graph.order)
    assert acts[0] == Stop(everyone)
    assert [a for a in acts if isinstance(a, DiscardSnapshots)] == [DiscardSnapshots(after=2)]
    assert [a for a in acts if isinstance(a, DiscardStaged)] == [
        DiscardStaged(InstanceId(s), after=2) for s in graph.sinks]
    assert [a for a in acts if isinstance(a, Restart)] == [Restart(i, restore=2)
                                                           for i in everyone]


def test_the_kernel_discards_every_instance_after_the_restore_point() -> None:
    graph, store, kernel = _kernel()
    failed = graph.order[0]
    kernel.lost(failed)
    kernel.failure(frozenset({failed}), 2.0)
    assert {tuple(store.snapshots_of(i)) for i in graph.order} == {(1, 2)}


def test_a_discard_of_every_instance_below_a_ref_collects_each() -> None:
    graph, store, kernel = _kernel()
    kernel._apply([DiscardSnapshots(below=2)])
    assert {tuple(store.snapshots_of(i)) for i in graph.order} == {(2, 3)}


def test_only_the_newest_complete_snapshots_stay_in_the_store() -> None:
    # A long run's store would grow with its input: each completion deletes what is
    # older than the newest ``keep`` complete snapshots, every instance's parts of them.
    graph = ExecutionGraph(load_topology(ROOT / "topologies" / "wordcount.yaml"))
    for keep in (1, 2, 3):
        store = MemoryStore()
        kernel = CoordinatorKernel(CheckpointCoordinator, graph,
                                   CheckpointParams(interval=1.0, keep=keep), store,
                                   Outputs(SinkStore()))
        kernel.start(0.0)
        for ref in range(1, 7):
            for i in graph.order:
                store.put(ref, i, {"id": ref})
            for i in graph.order[:-1]:  # not complete yet: nothing is collected
                kernel.report(i, 0, Persisted(ref), 1.0)
            assert len(store.snapshots_of(graph.order[0])) == min(ref, keep + 1)
            kernel.report(graph.order[-1], 0, Persisted(ref), 1.0)
        kept = tuple(range(7 - keep, 7))
        assert {tuple(store.snapshots_of(i)) for i in graph.order} == {kept}
        assert kernel.logic.completed == list(kept)  # type: ignore[attr-defined]
        # a failure restarts from the newest, which is there to restore
        failed = graph.order[0]
        kernel.lost(failed)
        kernel.failure(frozenset({failed}), 2.0)
        assert {tuple(store.snapshots_of(i)) for i in graph.order} == {kept}
