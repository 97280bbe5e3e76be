"""``lose-unsynced`` as the Spark host's driver does it, without Spark: which adopted
objects are unsynced (since the writer's last report or emit), that the crash of their
writer removes them from the store when its frames end, and the fault that kills the
task and records what it took."""

from __future__ import annotations

import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest

from chaos.context import InjectRecord
from chaos.faults import FaultError, NotRunning
from chaos.hostctx import HostFaultContext
from chaos.store_faults import LoseUnsynced
from ftctl.config.load import load_topology
from ftctl.kernel.commands import Fence
from ftctl.results import RunStore
from ftctl.runtime.graph import ExecutionGraph
from ftctl.spark import wire
from ftctl.spark.driver import EV_LOST
from ftctl.spark.durability import Durability
from ftctl.spark.host import SparkHost, _Task
from protocols.registry import get_protocol
from tests.conftest import ROOT
from tests.test_store_faults_driver import _Jobs

SINK = "out[0]"


class _Conn:
    def send(self, _frame: Any) -> None:
        pass


def _host(tmp_path: Path, pid: int = 1) -> SparkHost:
    none = get_protocol("none")
    graph = ExecutionGraph(load_topology(ROOT / "topologies" / "wordcount.yaml"))
    host = SparkHost(None, graph, none, none.resolve({}), "r", tmp_path / "store")
    host.jobs = _Jobs()  # type: ignore[assignment]
    host._apply(host.kernel.start(0.0))
    host.live[SINK] = _Task(host.inc[SINK], _Conn(), pid, None, 0.0)  # type: ignore[arg-type]
    return host


def _persisted(host: SparkHost, ref: int) -> tuple[Any, ...]:
    """The item a task sends once it wrote its part of snapshot ``ref`` itself."""
    name, size = host.store.write_pending(ref, SINK, {"seen": list(range(ref * 10))})
    return (wire.PERSISTED, SINK, ref, name, size)


def _emit(n: int) -> tuple[Any, ...]:
    return (wire.EMIT, SINK, [("w", n)], None)


def _frame(host: SparkHost, *items: tuple[Any, ...]) -> None:
    host._on_msg(SINK, (wire.MULTI, host.inc[SINK], list(items), 0, 0))


def _end(host: SparkHost) -> None:
    """The task's control connection closes: nothing more of it comes."""
    host._handle((EV_LOST, SINK, host.inc[SINK]))


def test_a_report_or_an_emit_syncs_what_its_writer_adopted_before() -> None:
    d = Durability()
    d.adopted("a", 1, "a")
    d.adopted("a", 2, "a")
    d.adopted("b", 1, "b")
    d.synced("a")
    assert d.take("a") == [] and d.take("b") == [(1, "b")]
    d.adopted("a", 3, "a")
    d.adopted("a", 3, "a")  # written again: lost once
    assert d.take("a") == [(3, "a")] and d.take("a") == []


def test_the_crash_takes_what_was_adopted_since_the_last_emit(tmp_path: Path) -> None:
    host = _host(tmp_path)
    _frame(host, _persisted(host, 1), _emit(1))  # durable: its emit followed
    _frame(host, _persisted(host, 2))
    _frame(host, _persisted(host, 3))  # two events with no emit since
    size = sum(host.store.size_of(r, SINK) or 0 for r in (2, 3))
    assert host.store.snapshots_of(SINK) == [1, 2, 3]
    loss = host.expect_lost_writes(SINK, 1)
    assert loss is not None and not loss.done()  # nothing goes before its frames end
    _end(host)
    lost = loss.result(timeout=0)
    assert (lost.objects, lost.size, lost.ended) == (((2, SINK), (3, SINK)), size, True)
    assert host.store.snapshots_of(SINK) == [1]  # no longer listed, as on the simulation
    assert host.store.get(1, SINK) == {"seen": list(range(10))}
    assert SINK in host.suspects  # and the crash is detected as any other


def test_emit_then_persisted_leaves_the_write_unsynced(tmp_path: Path) -> None:
    # lineage/visible-before-durable's order: the output is out, the state behind it lost
    host = _host(tmp_path)
    _frame(host, _emit(1), _persisted(host, 1))
    loss = host.expect_lost_writes(SINK, None)
    assert loss is not None
    _end(host)
    assert loss.result(timeout=0).objects == ((1, SINK),)
    assert host.store.snapshots_of(SINK) == []
    assert host.sinks.records(SINK) == [("w", 1)]  # what was emitted stays visible


def test_a_report_syncs_and_frames_sent_before_the_end_count(tmp_path: Path) -> None:
    host = _host(tmp_path)
    loss = host.expect_lost_writes(SINK, None)
    assert loss is not None
    # sent before the task died, carried out after the fault asked: they count
    _frame(host, _persisted(host, 1), (wire.REPORT, SINK, "done"))
    _frame(host, _persisted(host, 2), _emit(2))
    _end(host)
    assert loss.result(timeout=0).objects == ()
    assert host.store.snapshots_of(SINK) == [1, 2]


def test_a_plain_crash_loses_nothing_and_a_drop_ends_the_frames_too(tmp_path: Path) -> None:
    host = _host(tmp_path)
    _frame(host, _persisted(host, 1))
    _end(host)  # no lose-unsynced: a kill-task's crash; the machine flushes its writes
    assert host.store.snapshots_of(SINK) == [1]
    host._apply(host.kernel.lost(SINK))
    host._drop(SINK, alive=False)
    assert host.durability.take(SINK) == []  # the next incarnation starts afresh
    # a stop the kernel orders (a Fence) ends an incarnation as its connection closing does
    host.live[SINK] = _Task(host.inc[SINK], _Conn(), 1, None, 0.0)  # type: ignore[arg-type]
    _frame(host, _persisted(host, 2))
    loss = host.expect_lost_writes(SINK, None)
    assert loss is not None
    host.kernel._fence(SINK)  # a Stop of the protocol's: the kernel fences it, then
    host._apply([Fence((SINK,))])  # the host drops it
    assert loss.result(timeout=0).objects == ((2, SINK),)
    assert host.store.snapshots_of(SINK) == [1]


def test_a_withdrawn_or_stale_loss_takes_nothing(tmp_path: Path) -> None:
    host = _host(tmp_path, pid=4242)
    assert host.expect_lost_writes(SINK, 999) is None  # another process: not this task
    assert host.expect_lost_writes("count[0]", None) is None  # not running
    _frame(host, _persisted(host, 1))
    loss = host.expect_lost_writes(SINK, 4242)
    assert loss is not None and loss.cancel()
    _end(host)
    assert host.store.snapshots_of(SINK) == [1]
    waiting = host.expect_lost_writes(SINK, None)
    assert waiting is not None
    host.durability.abandon()  # the run ended before its frames did
    assert waiting.result(timeout=0).ended is False


def _ctx(host: SparkHost) -> HostFaultContext:
    return HostFaultContext(clock=lambda: 5.0, instance_ids=list(host.graph.order),
                            task_pids=host.task_pid, store=host.store,
                            lost_writes=host.expect_lost_writes)


def test_the_fault_kills_the_task_and_records_what_its_crash_took(tmp_path: Path) -> None:
    proc = subprocess.Popen(["sleep", "60"])
    try:
        host = _host(tmp_path, pid=proc.pid)
        _frame(host, _emit(1), _persisted(host, 4))
        size = host.store.size_of(4, SINK)
        got: list[InjectRecord] = []
        striking = threading.Thread(target=lambda: got.append(
            LoseUnsynced(SINK, seed=1).inject(_ctx(host))))
        striking.start()
        assert proc.wait(timeout=10) == -9  # SIGKILLed, as kill-task does
        _end(host)  # the driver sees its connection close
        striking.join(timeout=10)
        (record,) = got
        assert (record.fault, record.target, record.t, record.pids) == (
            "lose-unsynced", SINK, 5.0, [proc.pid])
        assert record.details == {"lost": [[4, SINK]], "bytes": size}
        assert host.store.snapshots_of(SINK) == []
    finally:
        proc.kill()
        proc.wait()


def test_the_fault_needs_a_running_target_and_a_host_that_tracks_writes(
        tmp_path: Path) -> None:
    host = _host(tmp_path)
    with pytest.raises(NotRunning):
        LoseUnsynced("count[0]").inject(_ctx(host))
    bare = HostFaultContext(clock=lambda: 0.0, instance_ids=[SINK], task_pids=host.task_pid)
    with pytest.raises(FaultError, match="not durable yet"):
        LoseUnsynced(SINK).inject(bare)
    # a task already gone: nothing killed, and its loss withdrawn
    proc = subprocess.Popen(["true"])
    proc.wait()
    host.live[SINK].pid = proc.pid
    _frame(host, _persisted(host, 1))
    with pytest.raises(FaultError, match="already gone"):
        LoseUnsynced(SINK).inject(_ctx(host))
    _end(host)
    assert host.store.snapshots_of(SINK) == [1]


def test_a_run_of_a_mutant_gets_one_folder(tmp_path: Path) -> None:
    # how visible-before-durable is measured on Spark: ftctl chaos -p lineage/<mutant>
    run = RunStore.create(tmp_path, topology="wordcount",
                          protocol="lineage/visible-before-durable", kind="chaos")
    assert run.path.parent == tmp_path and "lineage-visible-before-durable" in run.path.name
    assert RunStore.open(run.path).meta["protocol"] == "lineage/visible-before-durable"


class _DeadConn:
    """The control connection of a task killed a moment ago: sending finds it gone."""

    def send(self, _frame: Any) -> None:
        raise BrokenPipeError(32, "Broken pipe")


class _Released(_Jobs):
    def __init__(self) -> None:
        super().__init__()
        self.released_as: list[tuple[str, int, bool]] = []

    def released(self, iid: str, inc: int, alive: bool) -> None:
        self.released_as.append((iid, inc, alive))


def test_a_task_killed_just_before_a_rollback_fences_it_is_not_held_against_the_next(
        tmp_path: Path) -> None:
    """A kill lands on a task a moment before another failure's rollback stops it: the
    stop's EXIT finds it dead. That suspicion was of the fenced incarnation; held, it
    would fail the restarted one at the next detection, a second recovery for nothing."""
    host = _host(tmp_path)
    jobs = _Released()
    host.jobs = jobs  # type: ignore[assignment]
    old = host.inc[SINK]
    host.live[SINK] = _Task(old, _DeadConn(), 1, None, 0.0)  # type: ignore[arg-type]
    host.kernel._fence(SINK)  # the rollback's stop: the kernel fences it, the host drops it
    host._apply([Fence((SINK,))])
    assert host.inc[SINK] == old + 1
    assert SINK not in host.suspects and SINK not in host.live
    # its slot died with it: a restart does not wait for it to come back
    assert jobs.released_as == [(SINK, old, False)]
