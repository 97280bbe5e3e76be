"""Store faults as the Spark host's driver does them, on a DirectoryStore, without Spark:
which object each damage picks and what a read of it then raises, the outage file every
process using the store sees, what the Spark host does with a restore that does not read
back, and the verdict of a stopped run judged from files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from chaos.faults import FaultError
from chaos.hostctx import HostFaultContext
from chaos.store_faults import Corrupt, Delete, StoreOutage, Truncate
from ftctl.config.fault_kinds import FAULT_TYPES
from ftctl.config.load import load_topology
from ftctl.config.scenario import STORE_FAULTS
from ftctl.runtime.graph import ExecutionGraph
from ftctl.spark.host import SparkHost
from ftctl.store import CorruptObject, DirectoryStore, MissingObject, StoreUnavailable
from ftctl.verify.checker import verify
from ftctl.verify.outofcore import verify_files
from ftctl.verify.sinkfile import write_sink
from protocols.contract.actions import Restart
from protocols.contract.names import InstanceId
from protocols.contract.spec import Guarantee
from protocols.registry import get_protocol
from tests.conftest import ROOT

INSTANCES = ["lines[0]", "split[0]", "count[0]", "count[1]", "out[0]"]


def _store(tmp_path: Path) -> DirectoryStore:
    store = DirectoryStore(tmp_path / "snapshots")
    for ref in (1, 2, 3):
        store.put(ref, "count[0]", {"counts": {"w": ref}, "pad": "x" * 200})
    store.put(1, "split[0]", {"offset": 10})
    return store


def _ctx(store: DirectoryStore | None) -> HostFaultContext:
    return HostFaultContext(clock=lambda: 4.0, instance_ids=INSTANCES,
                            task_pids=lambda _i: None, store=store)


def test_corrupt_damages_the_targets_newest_object_only(tmp_path: Path) -> None:
    store = _store(tmp_path)
    rec = Corrupt("count[0]", seed=3).inject(_ctx(store))
    assert (rec.fault, rec.target, rec.t, rec.details["snapshot"]) == ("corrupt", "count[0]",
                                                                        4.0, 3)
    assert rec.details["bytes"] == store.size_of(3, "count[0]")  # same size: a byte flipped
    with pytest.raises(CorruptObject):  # where the byte is flipped says which check fails
        store.get(3, "count[0]")
    assert store.get(2, "count[0]")["counts"] == {"w": 2}  # the older ones still read
    assert store.get(1, "split[0]") == {"offset": 10}
    assert store.snapshots_of("count[0]") == [1, 2, 3]  # still listed: a recovery reads it
    # the damaged copy took the object's place; the catalog says so to a reopened store
    again = DirectoryStore(tmp_path / "snapshots")
    with pytest.raises(CorruptObject):
        again.get(3, "count[0]")
    assert again.get(2, "count[0]")["counts"] == {"w": 2}


def test_truncate_and_delete_take_the_named_snapshot(tmp_path: Path) -> None:
    store = _store(tmp_path)
    size = store.size_of(2, "count[0]")
    rec = Truncate("count[0]", {"snapshot": 2}, seed=1).inject(_ctx(store))
    assert rec.details["snapshot"] == 2
    assert (store.size_of(2, "count[0]") or 0) < (size or 0)
    with pytest.raises(CorruptObject):
        store.get(2, "count[0]")
    Delete("count[0]", {"snapshot": 1}).inject(_ctx(store))
    with pytest.raises(MissingObject):
        store.get(1, "count[0]")
    assert store.get(3, "count[0]")["counts"] == {"w": 3}


def test_random_draws_an_instance_with_an_object_and_nothing_stored_is_an_error(
        tmp_path: Path) -> None:
    store = _store(tmp_path)
    hit = {Delete("random", {"snapshot": 1}, seed=s).inject(_ctx(store)).target
           for s in range(2)}
    assert hit <= {"count[0]", "split[0]"}
    with pytest.raises(FaultError, match="nothing stored of out\\[0\\]"):
        Corrupt("out[0]").inject(_ctx(store))
    with pytest.raises(FaultError, match="at snapshot 9"):
        Corrupt("count[0]", {"snapshot": 9}).inject(_ctx(store))
    with pytest.raises(FaultError, match="snapshot store"):
        Corrupt("count[0]").inject(_ctx(None))


def test_an_outage_fails_every_read_and_write_until_the_last_one_heals(
        tmp_path: Path) -> None:
    store = _store(tmp_path)
    task_view = DirectoryStore.shared(store.root, store.key())  # as a task opens it
    assert task_view is not None
    first, second = StoreOutage("random", duration=1.0), StoreOutage("random", duration=2.0)
    rec = first.inject(_ctx(store))
    assert rec.target == "store" and rec.details["location"] == store.root
    second.inject(_ctx(store))
    for op in (lambda: store.get(2, "count[0]"), lambda: store.put(4, "count[0]", 1),
               lambda: task_view.write_pending(4, "count[1]", 1),
               lambda: task_view.get(1, "split[0]")):
        with pytest.raises(StoreUnavailable):
            op()
    first.heal(_ctx(store))
    with pytest.raises(StoreUnavailable):  # the second outage is still under way
        store.get(2, "count[0]")
    second.heal(_ctx(store))
    second.heal(_ctx(store))  # healing twice is harmless
    name, size = task_view.write_pending(4, "count[1]", {"n": 1})
    store.adopt(4, "count[1]", name, size)
    assert store.get(4, "count[1]") == {"n": 1}


def test_spark_realizes_every_store_kind() -> None:
    for kind in ("corrupt", "truncate", "delete", "store-unavailable", "lose-unsynced"):
        assert FAULT_TYPES[kind].hosts == ("sim", "spark")
    assert STORE_FAULTS == ()
    # damage fails nothing by itself: the kill that makes a recovery read it is measured
    assert not FAULT_TYPES["corrupt"].recovers and FAULT_TYPES["store-unavailable"].recovers


GOLDEN = [("a", 1), ("b", 1), ("a", 2), ("b", 2), ("a", 3)]


@pytest.mark.parametrize("guarantee", list(Guarantee))
@pytest.mark.parametrize("mode", ["ordered-per-key", "multiset", "final-per-key"])
def test_a_stopped_run_is_judged_from_files_as_in_memory(tmp_path: Path, mode: str,
                                                         guarantee: Guarantee) -> None:
    outputs = ([("a", 1), ("b", 1)],                 # a start of golden's
               [("a", 1), ("a", 3)],                 # a part, not a start
               [("a", 1), ("a", 1)],                 # a record twice
               [("z", 9)],                           # a record golden lacks
               [])
    for k, output in enumerate(outputs):
        g = write_sink(tmp_path / f"g{k}.parquet", GOLDEN)
        o = write_sink(tmp_path / f"o{k}.parquet", output)
        files = verify_files({"out": mode}, {"out": g}, {"out": o}, guarantee, False,
                             tmp_path / "duck", stopped="corrupt snapshot 3 of count[0]")
        mem = verify({"out": mode}, {"out": GOLDEN}, {"out": output}, guarantee, False,
                     stopped="corrupt snapshot 3 of count[0]")
        assert (files.wrong, files.outcome) == (mem.wrong, mem.outcome), output
    # the cases differ: a start stops safely; a duplicate under exactly-once does not
    ok = verify_files({"out": "ordered-per-key"}, {"out": g}, {"out": write_sink(
        tmp_path / "ok.parquet", GOLDEN[:2])}, Guarantee.EXACTLY_ONCE, False, stopped="x")
    assert ok.stopped_safely and ok.outcome == "stopped safely: x"


class _Jobs:
    """The Spark host's job runner, minus Spark: what it was asked to start."""

    def __init__(self) -> None:
        self.submitted: list[tuple[str, int]] = []

    def submit(self, payload: Any) -> str:
        self.submitted.append((payload.instance, payload.inc))
        return "job"

    def released(self, *_: Any) -> None:
        pass

    def cancel_later(self, *_: Any) -> None:
        pass


def _host(tmp_path: Path) -> tuple[SparkHost, _Jobs]:
    none = get_protocol("none")
    graph = ExecutionGraph(load_topology(ROOT / "topologies" / "wordcount.yaml"))
    host = SparkHost(None, graph, none, none.resolve({}), "r", tmp_path / "store")
    jobs = _Jobs()
    host.jobs = jobs  # type: ignore[assignment]
    host._apply(host.kernel.start(0.0))
    host.store.put(1, "count[0]", {"counts": {"w": 1}})
    return host, jobs


def _restart_from_1(host: SparkHost) -> None:
    host._apply(host.kernel._apply([Restart(InstanceId("count[0]"), restore=1)]))


def test_the_spark_host_stops_the_run_on_a_restore_that_does_not_check(
        tmp_path: Path) -> None:
    host, jobs = _host(tmp_path)
    Corrupt("count[0]").inject(_ctx(host.store))
    _restart_from_1(host)
    # not started: the protocol (none: the default rule) heard StoreFault and stopped
    assert ("count[0]", 1) not in jobs.submitted
    assert host.kernel.halted == "corrupt snapshot 1 of count[0]"
    kinds = [(e.kind, e.instance) for e in host.events]
    assert ("store-read-failed", "count[0]") in kinds and ("run-stopped", "count[0]") in kinds


def test_the_spark_host_starts_a_restore_once_the_store_is_back(tmp_path: Path) -> None:
    host, jobs = _host(tmp_path)
    outage = StoreOutage("random", duration=1.0)
    outage.inject(_ctx(host.store))
    _restart_from_1(host)
    host._retry_starts(host.now() + 1.0)  # still down: it waits again
    assert ("count[0]", 1) not in jobs.submitted and len(host.store_waits) == 1
    outage.heal(_ctx(host.store))
    host._retry_starts(host.now() + 1.0)
    assert ("count[0]", 1) in jobs.submitted and not host.store_waits
    assert host.kernel.halted is None
    assert not [e for e in host.events if e.kind == "store-read-failed"]
