"""The Spark host: runs a topology under a protocol, one long-running Spark task per unit.

The same kernel as the simulation host's (``ftctl.kernel``) drives the protocol: its
``CoordinatorKernel`` runs here, in the driver, and each task runs a ``Unit``
(``ftctl.spark.task``). This host keeps only transport (control connections, data
connections between tasks, their wiring), time, stable storage and process control
(Spark jobs, fencing). Everything the coordinator sees passes through one event queue
consumed by ``run()``'s loop: registrations, reports, snapshots and sink output from the
tasks' control connections, and job completions and failures from Spark.

Incarnations are the kernel's: every Stop and every detected failure bumps one; frames,
reports and job events of an older incarnation are dropped.
"""

from __future__ import annotations

import contextlib
import heapq
import queue
import time
from collections import Counter
from collections.abc import Callable, Collection, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import psutil

from chaos.context import ChannelFault
from ftctl.kernel.commands import (
    Fence,
    HostCommand,
    Log,
    RollBackUnit,
    SendControl,
    SetCoordinatorTimer,
    StartGroup,
)
from ftctl.kernel.coordinator import CoordinatorKernel
from ftctl.kernel.history import History, HistoryEvent
from ftctl.kernel.outputs import Outputs
from ftctl.kernel.piggyback import merge
from ftctl.runtime.graph import ExecutionGraph
from ftctl.spark import allocator, links, wire
from ftctl.spark.capacity import SparkCapacity, Worker
from ftctl.spark.driver import (
    EV_JOB_DONE,
    EV_JOB_FAILED,
    EV_LOST,
    EV_MSG,
    EV_REG,
    ControlServer,
    JobRunner,
)
from ftctl.spark.durability import Durability
from ftctl.spark.identity import Identity, is_local, mismatch
from ftctl.spark.placement import live_executors, placement
from ftctl.spark.task import TaskPayload
from ftctl.spill import PickledChunk, RowLog
from ftctl.store import (
    DirectoryStore,
    LostWrites,
    Sealed,
    SinkStore,
    StoreError,
    StoreUnavailable,
)
from protocols.contract.actions import DeclarePhase
from protocols.contract.events import Suspected
from protocols.contract.messages import Msg
from protocols.contract.names import InstanceId
from protocols.contract.params import ProtocolParams
from protocols.contract.spec import ProtocolSpec
from protocols.contract.view import GraphView

# Silence (heartbeats are 0.5 s apart) before an instance counts as hung. Judged by the
# sender's stamp of the newest heartbeat read, and only when no heartbeat bytes wait
# unread: on a loaded 2-core machine the driver's heartbeat readers wait for the GIL behind
# threads unpickling large sink frames (gaps up to 1.8 s at 600k lines), which must not
# look like a paused task. A paused (SIGSTOPped) task is then found within 1.0-1.5 s.
HEARTBEAT_TIMEOUT = 1.5
# The task's own heartbeat thread can starve too (its process holding the GIL in a long
# unpickle, or short of CPU on a loaded machine: 1.5 s gaps measured at 600k lines). So a
# silent task is declared hung at HEARTBEAT_TIMEOUT only when the OS shows its process
# stopped; a running one gets until HANG_TIMEOUT.
HANG_TIMEOUT = 4.5
DETECT_WINDOW = 0.05  # failures this close together are one detection (correlated faults)
REGISTER_TIMEOUT = 90.0  # a started task that never registers counts as failed
CANCEL_AFTER = 1.0  # a stopped task that has not exited by then has its job cancelled
SAMPLE_EVERY = 0.5
EVENT_QUEUE = 512
# (EV_CHAOS, "apply" | "clear" | "agent", ChannelFault | fault id | (iid, agent payload)):
# from the nemesis
EV_CHAOS = "chaos"
EV_CAPACITY = "capacity"  # (EV_CAPACITY, [Worker]): the cluster's workers changed
EV_SLOT = "slot"  # (EV_SLOT, worker host:port): a slot waits on that worker
# A returning worker's capacity is announced to the protocol once a slot waits on it, or
# after this long (its executor never came: announce what there is).
WARM_TIMEOUT = 30.0
# Seconds a start whose restore the unavailable store cannot give waits before trying again.
STORE_RETRY = 0.1


@dataclass
class _Task:
    """A registered incarnation."""

    inc: int
    conn: Connection
    pid: int
    address: wire.Address | None
    last_hb: float
    # Where it runs and what it is (None: it did not say): its pid is signalled, or read,
    # on this machine only when ``identity.mismatch`` finds nothing wrong.
    identity: Identity | None = None
    gone: bool = False  # received ``go``
    records_in: int = 0
    records_out: int = 0


@dataclass
class HostResult:
    # Per sink operator; read from the run's spill as iterated when it has one (``len``
    # needs no read), so iterate before that folder goes.
    outputs: Mapping[str, Collection[tuple[Any, Any]]]
    complete: bool
    seconds: float
    # The run's history (ftctl.kernel.history) but its phase records, which only its
    # events.jsonl has (``ROUTINE_KINDS``).
    events: list[HistoryEvent]
    metrics: list[dict[str, Any]]
    records_in: dict[str, int]
    records_out: dict[str, int]
    started_at: float = 0.0  # when the initial plan's instances were all up (go)
    restarts: int = 0
    detections: int = 0
    snapshot_bytes: int = 0
    stats: dict[str, Any] = field(default_factory=dict)
    # Sink output latency samples (sink instance, host time, seconds); empty without a rate.
    latency: list[tuple[str, float, float]] = field(default_factory=list)
    # Why the protocol stopped the run (``StopRun``: a stored object it could not trust).
    stopped: str | None = None


Progress = Callable[[dict[str, tuple[int, int]], float], None]


class SparkHost:
    def __init__(self, sc: Any, graph: ExecutionGraph,
                 protocol: ProtocolSpec[Any],
                 params: ProtocolParams, run_id: str, store_dir: Path | str,
                 rate: float | None = None, history: History | None = None,
                 progress: Progress | None = None, timeout: float = 3600.0,
                 on_start: Callable[[], None] | None = None, spares: int = 0,
                 start: str = "slot",
                 bind: str = wire.HOST,
                 workers: Callable[[], list[Worker] | None] | None = None,
                 spill: Path | None = None):
        self.sc = sc
        self.bind = bind  # the control channel's listen address (``--bind``)
        self.spares = spares
        self.start_mode = start  # "job": a Spark job per instance incarnation
        self.graph = graph
        self.info = protocol
        self.params = params
        self.run_id = run_id
        self.rate = rate
        self.progress = progress
        self.timeout = timeout
        self.on_start = on_start
        self.token = wire.new_token()
        # Bounded: when the driver falls behind the sinks' output, the control readers
        # stop reading and TCP pushes back on the tasks.
        self.events_q: queue.Queue[tuple[Any, ...]] = queue.Queue(maxsize=EVENT_QUEUE)
        self.topology_data = graph.topology.model_dump(by_alias=True)
        self.store = DirectoryStore(store_dir)
        # What each unit wrote and has not synced yet, for ``lose-unsynced``
        # (``ftctl.spark.durability``).
        self.durability = Durability()
        # ``spill``: a directory for what grows with the run's length (committed output,
        # latency samples, metrics) beyond a bounded tail, so a long run's driver does not
        # hold it all in memory. It is read back once, when the run is over.
        self.spill = spill
        self.sinks = SinkStore(spill)
        self.outputs = Outputs(self.sinks)
        # ``workers``: the cluster's workers (ftctl.spark.capacity), when the host can read
        # them: the kernel then places restarts on free cores, by the protocol's priority.
        # Idle spares reserve no core: a restart handed to one runs on the spare's core.
        self.capacity = (SparkCapacity.of(workers, len(graph.order), 0,
                                          lambda ws: self.events_q.put((EV_CAPACITY, ws)))
                         if workers is not None else None)
        self.kernel = CoordinatorKernel(protocol.coordinator, graph, params, self.store,
                                        self.outputs,
                                        self.capacity.slots if self.capacity else None)
        self.routing = self.kernel.routing
        # The kernel's incarnations (the same dict): it bumps them, this host reads them.
        self.inc = self.kernel.inc
        self.live: dict[str, _Task] = {}
        self.pending: dict[str, tuple[int, float]] = {}  # started, not registered: inc, when
        # (instance, inc) handed to a slot on a worker that is gone (JobRunner.workers_gone)
        self.stranded: set[tuple[str, int]] = set()
        self.groups: list[dict[str, int]] = []  # each plan's starts, released together
        # Controls for a unit that has registered but not been released yet: (inc, frame).
        self.held_controls: dict[str, list[tuple[int, tuple[Any, ...]]]] = {}
        self.timers: list[tuple[float, int, str]] = []  # coordinator timers: (due, token, key)
        # Starts waiting for the unavailable store to give their restores: (due, group).
        self.store_waits: list[tuple[float, tuple[tuple[str, int], ...]]] = []
        # Open DeclarePhase occurrences and their holders: the kernel's (thread-safe).
        self.phases = self.kernel.open_phases
        self.suspects: dict[str, str] = {}
        self.first_suspect = 0.0
        # The run's history: a run directory's (RunStore.history: one seq and clock with
        # the fault layer's records) or the host's own, on its clock.
        self.history = history or History("spark", self.now, digits=4)
        self.events: list[HistoryEvent] = self.history.events
        # (t, instance, records in, out, in and out over all incarnations) per sample
        self.metrics = RowLog(spill / "metrics.pickle" if spill is not None else None)
        self.counts: dict[str, tuple[int, int]] = {i: (0, 0) for i in graph.order}
        # Counts of the incarnations that are gone, so series over the run never go back.
        self.done_counts: dict[str, tuple[int, int]] = {i: (0, 0) for i in graph.order}
        self.pids: dict[str, int] = {}
        self.placed: dict[str, str] = {}  # instance -> the worker its newest task runs on
        # Returning workers (host:port) not warm yet -> when they came back.
        self.warming: dict[str, float] = {}
        self.restarts = 0
        self.detections = 0
        self.peer_kinds: Counter[str] = Counter()  # peer messages relayed, by class
        # Peer messages relayed, not yet sent: per receiving unit, in relay order. One
        # frame per receiver per pass of the loop, not one per message: a ring's records,
        # acks and fetches are thousands a second, and the driver, sending each on its
        # own, fell so far behind on a busy machine that pongs came after the ping
        # timeout, live replicas were fenced, and the resends that followed never let it
        # catch up.
        self.peer_out: dict[str, list[tuple[str, Msg, str]]] = {}
        # (instance, incarnation) -> its batches' piggyback counts as its job returned
        # them at the end: newer than its last heartbeat's.
        self.final_piggyback: dict[tuple[str, int], dict[str, int]] = {}
        self.t0 = time.monotonic()
        self.finishing = False
        self.started_at = 0.0
        self._loop_at = time.monotonic()
        self.server: ControlServer | None = None
        self.jobs: JobRunner | None = None
        self.anchor: float | None = None  # monotonic time the sources' schedule starts at
        # Channel faults in force: id -> [(instance, set-payload)], re-sent to replacements.
        self.link_faults: dict[str, list[tuple[str, dict[str, Any]]]] = {}
        self.offsets: dict[str, int] = {}  # sources: the furthest offset a heartbeat showed
        # The kernel's lifecycle (recovery under way, restarted sources' rewinds).
        self.lifecycle = self.kernel.lifecycle
        self.drops_seen: dict[tuple[str, int], dict[str, int]] = {}

    # ------------------------------------------------------------------ for chaos (any thread)

    def task_pid(self, iid: str) -> int | None:
        task = self.live.get(iid)
        return task.pid if task is not None else None

    def pid_mismatch(self, iid: str, pid: int) -> str | None:
        """Why ``pid`` is not ``iid``'s task on this machine (host and PID namespace, start
        time, command line as it registered); None if it is."""
        task = self.live.get(iid)
        if task is None or task.pid != pid:
            return "it is not the task that registered"
        return mismatch(task.identity, pid)

    def snapshot_in_progress(self) -> bool:
        """Whether a snapshot is being taken: the kernel's phase set has ``snapshotting``
        open (an instance's part, or checkpoint's global snapshot from its first part
        persisted until it is complete). Persisting alone is no snapshot: lineage and
        causal persist all the time."""
        return self.phases.active("snapshotting")

    def recovery_in_progress(self) -> bool:
        return self.lifecycle.recovering

    def apply_channel(self, spec: ChannelFault) -> None:
        self.events_q.put((EV_CHAOS, "apply", spec))

    def clear_channel(self, fault_id: str) -> None:
        self.events_q.put((EV_CHAOS, "clear", fault_id))

    def expect_lost_writes(self, iid: str, pid: int | None) -> Future[LostWrites] | None:
        """A ``lose-unsynced`` of ``iid``'s running task (``pid``, when given, must be
        its): its unsynced writes vanish when its frames end (``_writes_end``). None if it
        is not running now."""
        task = self.live.get(iid)
        if task is None or (pid is not None and task.pid != pid):
            return None
        return self.durability.expect(iid, task.inc)

    def agent_fault(self, iid: str, payload: dict[str, Any]) -> bool:
        """Have ``iid``'s task carry out a process fault on itself (``ftctl.spark.agent``);
        False if it is not running now."""
        if iid not in self.live:
            return False
        self.events_q.put((EV_CHAOS, "agent", (iid, payload)))
        return True

    # ------------------------------------------------------------------ helpers

    def _worker(self, address: str | None) -> Worker | None:
        if address is None or self.capacity is None:
            return None
        for w in self.capacity.slots.workers:
            if w.address == address:
                return w
        return None

    def worker_name(self, address: str) -> str:
        """A worker's name (``w0``) where the cluster ftctl started says so."""
        w = self._worker(address)
        return w.id if w is not None else address

    def domain_of(self, address: str | None) -> str | None:
        """A worker's failure domain: its labels (``rack=a``), else the worker itself."""
        w = self._worker(address)
        if w is not None and w.labels:
            return ",".join(f"{k}={v}" for k, v in sorted(w.labels.items()))
        return address

    def now(self) -> float:
        return time.monotonic() - self.t0

    def log(self, kind: str, *, instance: str | None = None,
            incarnation: int | None = None, **data: Any) -> None:
        self.history.write(kind, instance=instance, incarnation=incarnation, **data)

    def _tell(self, iid: str, frame: tuple[Any, ...]) -> None:
        if iid in self.peer_out:
            self._send_peers(iid)  # what was relayed to it before this frame goes first
        self._send(iid, frame)

    def _send(self, iid: str, frame: tuple[Any, ...]) -> None:
        task = self.live.get(iid)
        if task is None:
            return
        try:
            task.conn.send(frame)
        except (OSError, ValueError):
            self._suspect(iid, "control connection lost")

    # ------------------------------------------------------------------ run

    def run(self) -> HostResult:
        self.t0 = time.monotonic()
        self.server = ControlServer(self.token, self.events_q, self.bind,
                                    lambda peer: self.log("connection-refused", peer=peer),
                                    self.spill / "latency.pickle" if self.spill else None)
        self.jobs = JobRunner(self.sc, self.run_id, self.events_q, self.spares,
                              recycle=self.start_mode == "slot")
        self.server.on_spare = self.jobs.spare_ready
        alive = (sum(1 for w in self.capacity.slots.workers if w.alive)
                 if self.capacity is not None else 0)
        self.jobs.locations = placement(self.sc, self.info, GraphView(self.graph),
                                        workers=alive)
        self.jobs.executors = lambda: live_executors(self.sc)
        self.jobs.domain = lambda slot: self.domain_of(slot.worker)
        self.jobs.connect_to(self.server.address, self.token)
        self.jobs.on_ready = lambda worker: self.events_q.put((EV_SLOT, worker))
        complete = False
        try:
            self._apply(self.kernel.start(self.now()))
            self.jobs.start_spares(self.server.address, self.token)
            if self.capacity is not None:
                self.capacity.start()
            last_sample = last_progress = 0.0
            trimmer = allocator.Trimmer()
            while not self.kernel.finished() and self.kernel.halted is None:
                try:
                    ev = self.events_q.get(timeout=0.05)
                    self._handle(ev)
                    # Drain what is queued before the periodic checks: under load the
                    # queue holds many sink frames.
                    for _ in range(256):
                        self._handle(self.events_q.get_nowait())
                except queue.Empty:
                    pass
                self._flush_peers()
                now = self.now()
                self._fire_timers(now)
                self._retry_starts(now)
                self._check_timeouts(now)
                self._loop_at = time.monotonic()
                if self.suspects and now - self.first_suspect >= DETECT_WINDOW:
                    self._detect()
                late = [a for a, since in self.warming.items() if now - since > WARM_TIMEOUT]
                if late:
                    self._announce_capacity(late, cold=True)
                if now - last_sample >= SAMPLE_EVERY:
                    last_sample = now
                    self._sample(now)
                trimmer.tick(time.monotonic())
                if self.progress is not None and now - last_progress >= 0.25:
                    last_progress = now
                    self._refresh_counts()
                    self.progress(dict(self.counts), now)
                if now > self.timeout:
                    self.log("timeout", seconds=self.timeout)
                    break
            complete = self.kernel.finished()
        finally:
            self._shutdown()
            self.store.close()  # its open segment and catalog: a sweep runs many hosts
        seconds = self.now()
        self._sample(seconds)
        # Before the output is read back (from the spill, if any): readers of the history
        # (the soak benchmark) know from here on the run no longer streams.
        self.log("run-finished", complete=complete, seconds=round(seconds, 2))
        if self.progress is not None:
            self.progress(dict(self.counts), seconds)
        return HostResult(
            # Spilled: streamed from the spill by whoever reads it, never whole in memory.
            outputs=self.sinks.streamed() if self.spill is not None
            else self.sinks.by_operator(), complete=complete, seconds=seconds,
            events=self.events, metrics=self._metrics(),
            records_in={i: c[0] for i, c in self.counts.items()},
            records_out={i: c[1] for i, c in self.counts.items()},
            started_at=self.started_at, restarts=self.restarts, detections=self.detections,
            snapshot_bytes=self.store.bytes_written(), latency=self._latency(),
            stats=self._traffic(), stopped=self.kernel.halted)

    def _traffic(self) -> dict[str, Any]:
        """Messages of the run: peer messages this driver relayed, by class, channel
        messages every incarnation had sent as of its last heartbeat, and the batches'
        piggyback (``ftctl.kernel.piggyback``) over all incarnations, as of the end of
        their jobs where they ran to the end."""
        extras = self.server.extras if self.server is not None else {}
        piggyback = {k: e.get("piggyback") for k, e in extras.items()}
        piggyback.update(self.final_piggyback)
        return {"peer_messages": dict(self.peer_kinds),
                "channel_messages": sum(int(e.get("sent", 0)) for e in extras.values()),
                "piggyback": merge(piggyback.values())}

    def _latency(self) -> list[tuple[str, float, float]]:
        if self.server is None:
            return []
        return self.server.latency.rows(self.t0)

    def _shutdown(self) -> None:
        """Tell every task to exit, give their jobs a moment, cancel what is left."""
        self.finishing = True
        if self.capacity is not None:
            self.capacity.stop()
        for iid in list(self.live):
            self._tell(iid, (wire.EXIT,))
        assert self.jobs is not None and self.server is not None
        self.jobs.release_spares()
        if not self.jobs.wait_all(3.0):
            self.jobs.cancel_all()
            self.jobs.wait_all(5.0)
        self.server.close()
        self.durability.abandon()
        # The tasks' final counters come back as their jobs' results.
        while True:
            try:
                ev = self.events_q.get_nowait()
            except queue.Empty:
                break
            if ev[0] == EV_JOB_DONE and ev[3] and ev[2] == self.inc[ev[1]]:
                self.counts[ev[1]] = (ev[3]["records_in"], ev[3]["records_out"])
                if "piggyback" in ev[3]:
                    self.final_piggyback[ev[1], ev[2]] = ev[3]["piggyback"]

    def _refresh_counts(self) -> None:
        """Counters from the heartbeat connections (newer than any seen on a frame)."""
        if self.server is not None:
            for iid, task in self.live.items():
                got = self.server.counters.get((iid, task.inc))
                if got is not None and got[0] + got[1] >= sum(self.counts[iid]):
                    self.counts[iid] = got

    def _sample(self, now: float) -> None:
        self._refresh_counts()
        for iid, (rin, rout) in self.counts.items():
            din, dout = self.done_counts[iid]
            self.metrics.append((round(now, 3), iid, rin, rout, din + rin, dout + rout))

    def _metrics(self) -> list[dict[str, Any]]:
        keys = ("t", "instance", "records_in", "records_out", "total_in", "total_out")
        return [dict(zip(keys, row, strict=True)) for row in self.metrics.rows()]

    # ------------------------------------------------------------------ events

    def _handle(self, ev: tuple[Any, ...]) -> None:
        kind = ev[0]
        if kind == EV_MSG:
            self._on_msg(ev[1], ev[2])
        elif kind == EV_REG:
            self._on_reg(*ev[1:])
        elif kind == EV_LOST:
            _, iid, inc = ev
            if inc == self.inc[iid]:
                self._writes_end(iid, inc)  # nothing more of it comes
            if inc == self.inc[iid] and not self.finishing:
                self._suspect(iid, "control connection lost")
        elif kind == EV_JOB_FAILED:
            _, iid, inc, reason = ev
            if inc == self.inc[iid] and not self.finishing:
                self._suspect(iid, f"job failed: {reason}")
        elif kind == EV_JOB_DONE:
            _, iid, inc, _result = ev
            if inc == self.inc[iid] and not self.finishing:
                self._suspect(iid, "task ended unexpectedly")
        elif kind == EV_CAPACITY:
            self._capacity_changed(ev[1])
        elif kind == EV_SLOT:
            if ev[1] in self.warming:
                self._announce_capacity([ev[1]])
        elif kind == EV_CHAOS:
            if ev[1] == "apply":
                self._link_fault(ev[2])
            elif ev[1] == "agent":
                self._tell(ev[2][0], (wire.CONTROL, ev[2][1]))
            else:
                self._link_clear(ev[2])

    def _on_msg(self, iid: str, frame: tuple[Any, ...]) -> None:
        task = self.live.get(iid)
        inc = frame[1]
        if task is None or inc != task.inc or inc != self.inc[iid]:
            return  # from an incarnation that has been stopped since
        kind = frame[0]
        if kind == wire.MULTI:
            self.counts[iid] = (frame[3], frame[4])
            # A frame is one event's actions: all of them count, or none after the one
            # that ends the incarnation. A unit already suspected (its worker gone, a
            # send to it failed) is not stopped yet, and what it sent before it died is
            # as real as any output: cutting its frame after the first item adopted a
            # sink's persisted visible counts and dropped the output they count.
            for item in frame[2]:
                if not self._on_item(iid, item) or self.inc[iid] != inc:
                    return  # a write failed, or the coordinator stopped this very unit
        elif kind == wire.HB:
            task.last_hb = time.monotonic()
            task.records_in, task.records_out = frame[2], frame[3]
            self.counts[iid] = (frame[2], frame[3])

    def _on_item(self, iid: str, item: tuple[Any, ...]) -> bool:
        """One action of unit ``iid``, carried out in the order the unit took it; False
        when nothing more of its incarnation may count (a write of it failed)."""
        k = item[0]
        if k == wire.OUTPUT:
            self.durability.synced(iid)  # the contract: an emit waits for its writes
            self.sinks.append_pickled(item[1], PickledChunk(item[2], item[3]))
        elif k == wire.EMIT:
            self.durability.synced(iid)
            self.sinks.append(item[1], item[2], item[3])
        elif k == wire.PERSIST:
            try:
                self.store.put(item[2], item[1], Sealed(item[3]))
            except (OSError, StoreError) as exc:
                # As a task whose own write fails: nothing more of it may count.
                self._suspect(iid, f"snapshot {item[2]} not written: {exc}")
                return False
            self.durability.adopted(iid, item[2], item[1])
        elif k == wire.PERSISTED:  # written by the task; ours once it is current
            try:
                self.store.adopt(item[2], item[1], item[3], item[4])
            except (OSError, ValueError, StoreError) as exc:
                self._suspect(iid, f"snapshot {item[2]} not adoptable: {exc}")
                return False
            self.durability.adopted(iid, item[2], item[1])
        elif k == wire.REPORT:
            self.durability.synced(iid)  # as an emit: its writes are durable now
            slot = item[1] if item[1] != iid else None
            self._apply(self.kernel.report(iid, self.inc[iid], item[2], self.now(), slot))
        elif k == wire.STAGE:
            self.outputs.stage_pickled(item[1], item[2], PickledChunk(item[3], item[4]))
        elif k == wire.PEER:
            self._relay_peer(item[1], item[2], item[3], item[4])
        elif k == wire.NOTE:
            self.history.note(item[1], item[2])
        elif k == wire.PHASE:
            _, phase, on, key = item  # held by the unit that declared it
            self._apply(self.kernel.declare(iid, DeclarePhase(phase, on, key)))
        elif k == wire.SUSPECT:
            self.log("failure-suspected", instance=item[1], by=iid, reason=item[2])
            self._apply(self.kernel.handle(
                Suspected(InstanceId(item[1]), InstanceId(iid), item[2], self.now())))
        elif k == wire.ROUTE:
            self._apply(self.kernel.route(item[1], item[2]))
            self._rewire(item[1])
        return True

    def _relay_peer(self, sender: str, to: str, msg: Msg, unit: str | None) -> None:
        """A peer message goes to the unit that hosts ``to`` now (or the named unit);
        lost when that unit is not running, as over a connection to a dead process."""
        self.peer_kinds[type(msg).__name__] += 1
        dest = unit if unit is not None else self.routing.unit_of(to)
        task = self.live.get(dest)
        if task is not None and task.gone:
            self.peer_out.setdefault(dest, []).append((sender, msg, to))

    def _send_peers(self, iid: str) -> None:
        self._send(iid, (wire.PEERS, self.peer_out.pop(iid)))

    def _flush_peers(self) -> None:
        pending, self.peer_out = self.peer_out, {}
        for iid, msgs in pending.items():
            self._send(iid, (wire.PEERS, msgs))

    def _rewire(self, slot: str) -> None:
        """``slot`` moved to another unit: its upstream tasks connect to that unit."""
        unit = self.routing.unit_of(slot)
        task = self.live.get(unit)
        addr = task.address if task is not None else None
        epoch = self.kernel.epoch(unit)
        for up in self.graph.upstream(slot):
            sender = self.routing.unit_of(up)
            if sender in self.live and self.live[sender].gone:
                self._tell(sender, (wire.CONNECT, slot, addr, epoch))

    def _on_reg(self, iid: str, inc: int, pid: int, addr: wire.Address | None,
                conn: Connection, executor: str | None = None,
                who: Identity | None = None, worker: str | None = None,
                restore_s: float | None = None) -> None:
        if inc != self.inc[iid] or iid in self.live:
            # A stopped incarnation that came up late: send it away.
            with contextlib.suppress(OSError, ValueError):
                conn.send((wire.EXIT,))
            return
        self.pending.pop(iid, None)
        self.live[iid] = _Task(inc, conn, pid, addr, time.monotonic(), identity=who)
        self.pids[iid] = pid
        where: dict[str, Any] = {"executor": executor} if executor is not None else {}
        if worker is not None:
            where["worker"] = self.worker_name(worker)
        if restore_s is not None and inc > 0:
            where["restore_s"] = restore_s
        self.log("instance-registered", instance=iid, incarnation=inc, pid=pid, **where)
        if worker is not None:
            self.placed[iid] = where["worker"]
        self._release_groups()

    def _release_groups(self) -> None:
        """Send ``go`` to every plan whose instances are all up (or superseded)."""
        for group in list(self.groups):
            members = [i for i, inc in group.items() if self.inc[i] == inc]
            if any(i not in self.live for i in members):
                continue
            self.groups.remove(group)
            first = not self.started_at
            if first:
                self.started_at = self.now()
                self.anchor = time.monotonic()
            where = {i: self.placed[i] for i in sorted(members) if i in self.placed}
            self._write(self.lifecycle.running(members, where))
            for iid in members:
                self._go(iid)
            for iid in members:
                task = self.live[iid]
                if self.routing.unit_of(iid) == iid:  # not taken over meanwhile
                    for up in self.graph.upstream(iid):
                        sender = self.routing.unit_of(up)
                        if (sender not in group and sender in self.live
                                and self.live[sender].gone):
                            self._tell(sender, (wire.CONNECT, iid, task.address,
                                                self.kernel.epoch(iid)))
                for frame_inc, frame in self.held_controls.pop(iid, []):
                    if frame_inc == task.inc:
                        self._tell(iid, frame)
            if first and self.on_start is not None:
                self.on_start()
        for c in self.lifecycle.settled(self.now(), not self.groups and not self.pending):
            self._write(c)

    def _go(self, iid: str) -> None:
        wiring = {}
        for d in self.graph.downstream(iid):
            t = self.live.get(self.routing.unit_of(d))
            if t is not None:
                wiring[d] = (t.address, self.kernel.epoch(self.routing.unit_of(d)))
        incs = {u: self.kernel.epoch(u) for u in self.graph.upstream(iid)}
        self.live[iid].gone = True
        self._tell(iid, (wire.GO, wiring, incs, self.anchor))
        for targets in self.link_faults.values():
            for who, payload in targets:
                if who == iid:
                    self._tell(iid, (wire.CONTROL, payload))

    # ------------------------------------------------------------------ failures

    def _suspect(self, iid: str, reason: str) -> None:
        if iid in self.suspects:
            return
        if not self.suspects:
            self.first_suspect = self.now()
        self.suspects[iid] = reason

    def _check_timeouts(self, now: float) -> None:
        mono = time.monotonic()
        server = self.server
        assert server is not None
        seen, blocked, stamps = server.last_seen, server.blocked, server.stamps
        for iid, task in list(self.live.items()):
            key = (iid, task.inc)
            # The newest sign of life: a frame's arrival, or a heartbeat's send stamp.
            last = max(task.last_hb, seen.get(key, 0.0), stamps.get(key, 0.0))
            silent = mono - last
            if (task.gone and silent > HEARTBEAT_TIMEOUT and key not in blocked
                    and not server.heartbeat_pending(key)
                    and (silent > HANG_TIMEOUT or _stopped(task))):
                self._suspect(iid, f"missed heartbeats (silent {silent:.1f} s, "
                                   f"loop {mono - self._loop_at:.2f} s)")
            extra = server.extras.get(key)
            if extra:
                self._check_extra(iid, key, extra)
        for iid, (inc, started) in self.pending.items():
            if now - started > REGISTER_TIMEOUT:
                self._suspect(iid, "never registered")
            elif (iid, inc) in self.stranded:
                self._suspect(iid, "its worker was lost before it registered")

    def _detect(self) -> None:
        failed = dict(self.suspects)
        self.suspects.clear()
        self.detections += 1
        self.log("failure-detected", instances=sorted(failed), reasons=failed,
                 pids={i: self.live[i].pid for i in failed if i in self.live})
        for c in self.lifecycle.detected(self.now()):
            self._write(c)
        for iid in failed:
            self._apply(self.kernel.lost(iid))
            self._drop(iid, alive=False)
        if self.capacity is not None:  # a lost worker's cores go before the plan
            fresh = self.capacity.poll_now()
            if fresh is not None:
                self._capacity_changed(fresh)
        self._apply(self.kernel.failure(frozenset(failed), self.now()))

    def _capacity_changed(self, workers: list[Worker]) -> None:
        """A reading of the cluster: the protocol plans on it at once, unless a worker
        returned: then as each returning worker gets a waiting slot (``warm``), so that
        what it plans on is usable at once, not after a Spark job start. Until then the
        worker is cold: its cores are not offered, and workers that come back apart are
        announced apart, each as soon as it is warm (capacity returning in steps)."""
        assert self.capacity is not None and self.jobs is not None
        # Starts handed to slots on workers now gone: if one has not registered, it never
        # will (``_check_timeouts``), rather than stalling the recovery REGISTER_TIMEOUT.
        self.stranded.update(
            self.jobs.workers_gone({w.address for w in workers if not w.alive and w.address}))
        change = self.capacity.update(workers)
        if change is None:
            return
        self.log("capacity-changed", **change)
        # A worker that went again is not waited for (the master's listing of a dying
        # worker can flap: gone, back, gone within a second).
        up = {w.address for w in workers if w.alive}
        for address in [a for a in self.warming if a not in up]:
            del self.warming[address]
        self.capacity.slots.cold = frozenset(self.warming)
        back = [w for w in workers if w.id in change["joined"] and w.address]
        if back and self.started_at and not self.finishing:
            now = self.now()
            for w in back:
                self.warming.setdefault(w.address, now)
            self.capacity.slots.cold = frozenset(self.warming)
            alive = max(1, sum(1 for w in workers if w.alive))
            per = max(1, min(min(w.cores for w in back),
                             -(-len(self.graph.order) // alive) + 1))
            self.jobs.warm(per, len(back))
            return
        self._apply(self.kernel.capacity_changed(self.now()))

    def _announce_capacity(self, addresses: list[str], cold: bool = False) -> None:
        """Tell the protocol of these returning workers' cores: a slot waits on each, or
        (``cold``) they were waited for long enough."""
        assert self.capacity is not None
        since = min(self.warming.pop(a) for a in addresses)
        self.capacity.slots.cold = frozenset(self.warming)
        names = sorted(self.worker_name(a) for a in addresses)
        data: dict[str, Any] = {"workers": names, "seconds": round(self.now() - since, 4)}
        if cold:
            data["cold"] = names
        self.log("capacity-warm", **data)
        self._apply(self.kernel.capacity_changed(self.now()))

    def _drop(self, iid: str, alive: bool = True) -> None:
        """Carry out a fence the kernel made (a new incarnation number): the task is told
        to go (its slot then waits for the next instance, unless ``alive`` is False: it
        failed), its job cancelled if it lingers, its peers told."""
        old = self.inc[iid] - 1
        self._writes_end(iid, old)
        # A plain crash or stop loses nothing: the machine flushes what the task wrote.
        self.durability.synced(iid)
        self._refresh_counts()
        (din, dout), (rin, rout) = self.done_counts[iid], self.counts[iid]
        self.done_counts[iid] = (din + rin, dout + rout)
        self.counts[iid] = (0, 0)
        alive = alive and (iid in self.live or iid in self.pending)
        self.pending.pop(iid, None)
        if iid in self.live:
            self._tell(iid, (wire.EXIT,))
            del self.live[iid]
        # What was suspected of the fenced incarnation (the EXIT above finds it dead, say,
        # killed a moment before the fence) is not held against the next one; its slot is
        # not counted on to come back.
        if self.suspects.pop(iid, None) is not None:
            alive = False
        assert self.jobs is not None
        self.jobs.released(iid, old, alive)
        self.jobs.cancel_later(iid, old, CANCEL_AFTER)
        hosted = [s for s in self.graph.order if self.routing.unit_of(s) == iid]
        self._fence_channels(iid, hosted, None)

    def _writes_end(self, iid: str, inc: int) -> None:
        """Incarnation ``inc`` of ``iid`` sends nothing more (its control connection
        closed, or it was dropped): a ``lose-unsynced`` waiting for it removes what it
        adopted and had not synced from the store, which no longer lists it."""
        future = self.durability.ended(iid, inc)
        if future is None or not future.set_running_or_notify_cancel():
            return
        objects: list[tuple[int, str]] = []
        size = 0
        try:
            for snapshot, instance in self.durability.take(iid):
                n = self.store.size_of(snapshot, instance)
                if n is None:
                    continue  # discarded by the coordinator meanwhile
                self.store.delete(snapshot, instance)
                objects.append((snapshot, instance))
                size += n
        except OSError as exc:
            future.set_exception(exc)
            return
        future.set_result(LostWrites(tuple(objects), size))

    def _fence_channels(self, unit: str, slots: list[str], addr: wire.Address | None) -> None:
        """``unit``'s data epoch moved on: its receivers drop what it sent before, and the
        senders to ``slots`` reconnect (to ``addr``; None: nobody runs them now) and stamp
        the new epoch, so the unit drops what they sent before."""
        epoch = self.kernel.epoch(unit)
        receivers = {self.routing.unit_of(d) for s in slots for d in self.graph.downstream(s)}
        for d in sorted(receivers):
            if d in self.live and self.live[d].gone:
                self._tell(d, (wire.FENCE, unit, epoch))
        for slot in slots:  # its own slot, and any it had adopted
            for u in self.graph.upstream(slot):
                sender = self.routing.unit_of(u)
                if sender in self.live and self.live[sender].gone:
                    self._tell(sender, (wire.CONNECT, slot, addr, epoch))

    def _roll_back(self, c: RollBackUnit) -> None:
        """``RollBack``: the running task restores in place (``wire.ROLLBACK``, after the
        controls sent before it), its channels fenced by its new data epoch."""
        task = self.live.get(c.instance)
        if task is None or not task.gone or task.inc != c.incarnation:
            return  # lost meanwhile: the coordinator hears of its failure instead
        ev = c.event
        self._tell(c.instance, (wire.ROLLBACK, c.epoch, ev.slot, ev.to, ev.restored))
        self._fence_channels(c.instance, [c.instance], task.address)

    # ------------------------------------------------------------------ kernel commands

    def _apply(self, cmds: list[HostCommand]) -> None:
        for c in cmds:
            if isinstance(c, Fence):
                for iid in c.instances:
                    self._drop(iid)  # the kernel's instance-stopped follows
            elif isinstance(c, StartGroup):
                if not self._readable(c.starts):
                    continue
                starts = {}
                for iid, inc in c.starts:
                    if self._start(iid, inc):
                        starts[iid] = inc
                if starts:
                    self.groups.append(starts)
            elif isinstance(c, SendControl):
                if self.kernel.control_arrived(c.instance, c.incarnation, c.msg):
                    frame = ((wire.CONTROL, c.msg) if c.slot is None
                             else (wire.CONTROL, c.msg, c.slot))
                    self._control(c.instance, frame)
            elif isinstance(c, RollBackUnit):
                self._roll_back(c)
            elif isinstance(c, Log):
                self.log(c.kind, **c.data)
            elif isinstance(c, SetCoordinatorTimer):
                heapq.heappush(self.timers, (self.now() + c.after, c.token, c.key))
            # Trace lines serve the simulation's replay; a cancelled timer's token is
            # stale when it fires (the kernel drops it).

    def _readable(self, group: tuple[tuple[str, int], ...]) -> bool:
        """Whether every restore of a start group reads back, checked before any of them
        starts (a group starts whole or not at all), as on the simulation host: while the
        store is unavailable the group waits; an object that does not check is the
        protocol's to handle (``store-read-failed``, ``StoreFault``: it re-plans or stops
        the run)."""
        bad = self.kernel.unreadable(group)
        if bad is None:
            return True
        if isinstance(bad, StoreUnavailable):
            if not any(g == group for _, g in self.store_waits):
                self.store_waits.append((self.now() + STORE_RETRY, group))
            return False
        self._apply(self.kernel.store_fault(bad, group, self.now()))
        for c in self.lifecycle.settled(self.now(), not self.groups and not self.pending):
            self._write(c)
        return False

    def _retry_starts(self, now: float) -> None:
        due = [g for t, g in self.store_waits if t <= now]
        self.store_waits = [(t, g) for t, g in self.store_waits if t > now]
        for group in due:
            self._apply([StartGroup(group)])

    def _fire_timers(self, now: float) -> None:
        while self.timers and self.timers[0][0] <= now:
            _, token, key = heapq.heappop(self.timers)
            self._apply(self.kernel.timer_fired(key, token, now))

    def _start(self, iid: str, inc: int) -> bool:
        got = self.kernel.start_unit(iid, inc)
        if got is None:
            return False  # superseded by a later stop
        started, held, restart = got
        payload = TaskPayload(
            run_id=self.run_id, instance=iid, inc=inc, protocol=self.info.name,
            params=self.params.model_dump(mode="json"), topology=self.topology_data,
            started=started, held=held, epoch=self.kernel.epoch(iid),
            coordinator=self.server.address if self.server else ("127.0.0.1", 0),
            token=self.token, rate=self.rate, store_dir=str(self.store.root),
            store_key=self.store.key())
        self.pending[iid] = (inc, self.now())
        assert self.jobs is not None
        how = self.jobs.submit(payload)
        if inc > 0:
            self.restarts += 1
            # ``spare``: served by a slot that was up already, no Spark job to wait for.
            size = (self.store.size_of(restart.restore, iid)
                    if isinstance(restart.restore, int) else None)
            self.log("instance-started", instance=iid, incarnation=inc, reason="restart",
                     restore=restart.restore, spare=how != "job", start=how,
                     **({"restore_bytes": size} if size is not None else {}))
            if iid in self.graph.sources:
                lo, _hi = self.graph.source_range(iid)
                self.lifecycle.source_restarted(iid, inc, self.offsets.get(iid, lo))
        return True

    def _log_replay(self, iid: str, inc: int, start: int) -> None:
        """The source range a restarted source reads again: [where its task says it
        resumes, the furthest offset seen before the restart)."""
        rewound = self.lifecycle.source_resumed(iid, inc, start)
        if rewound is not None:
            self._write(rewound)

    def _write(self, c: Log) -> None:
        self.log(c.kind, **c.data)

    def _check_extra(self, iid: str, key: tuple[str, int], extra: dict[str, Any]) -> None:
        """What a heartbeat carried: a source's offset, frames a channel fault dropped."""
        if self.lifecycle.waiting(*key) and extra.get("resumed") is not None:
            self._log_replay(iid, key[1], int(extra["resumed"]))
        if "offset" in extra:
            self.offsets[iid] = max(self.offsets.get(iid, 0), int(extra["offset"]))
        dropped = extra.get("dropped")
        if not dropped:
            return
        seen = self.drops_seen.setdefault(key, {})
        for dst, n in dropped.items():
            if n > seen.get(dst, 0):
                seen[dst] = n
                # Frames lost between live instances: the receiver's input is incomplete,
                # which the failure model only allows for a crashed receiver.
                if dst in self.live:
                    self._suspect(dst, f"{n} frame(s) from {iid} lost to a channel fault")

    # ------------------------------------------------------------------ channel faults

    def _link_fault(self, spec: ChannelFault) -> None:
        """Tell the sending side of every affected link to drop, delay or cut it."""
        neighbours = set(self.graph.upstream(spec.src)) | set(self.graph.downstream(spec.src))
        peers = set(spec.dst) if spec.dst else neighbours
        params = dict(spec.params)
        targets = [(spec.src, links.set_payload(spec.id, spec.kind, spec.dst or None, params,
                                                spec.seed))]
        if spec.both_ways:
            targets += [(p, links.set_payload(spec.id, spec.kind, [spec.src], params,
                                              spec.seed + k + 1))
                        for k, p in enumerate(sorted(peers)) if p in self.inc]
        self.link_faults[spec.id] = targets
        for iid, payload in targets:
            if iid in self.live and self.live[iid].gone:
                self._tell(iid, (wire.CONTROL, payload))
        self.log("channel-fault", id=spec.id, channel=spec.kind, src=spec.src,
                 peers=sorted(peers), params=params)

    def _link_clear(self, fault_id: str) -> None:
        targets = self.link_faults.pop(fault_id, [])
        for iid, _payload in targets:
            if iid in self.live and self.live[iid].gone:
                self._tell(iid, (wire.CONTROL, links.clear_payload(fault_id)))
        if targets:
            self.log("channel-fault-cleared", id=fault_id)

    def _control(self, iid: str, frame: tuple[Any, ...]) -> None:
        task = self.live.get(iid)
        if task is not None and task.gone:
            self._tell(iid, frame)
        else:
            # Started but not released yet: deliver once its group is released.
            self.held_controls.setdefault(iid, []).append((self.inc[iid], frame))


def _stopped(task: _Task) -> bool:
    """Whether the OS shows the task's process stopped (SIGSTOP) or gone.

    Only for a task on this machine's process table (this host, this PID namespace): a
    pid from elsewhere (a remote cluster, a container of its own) names another process
    here, so it gives no verdict; only HANG_TIMEOUT does.
    """
    if not is_local(task.identity):
        return False
    try:
        return psutil.Process(task.pid).status() in (psutil.STATUS_STOPPED, psutil.STATUS_ZOMBIE,
                                                 psutil.STATUS_DEAD, psutil.STATUS_TRACING_STOP)
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False
