"""What runs inside a Spark task: one operator instance, for as long as the coordinator wants.

The task registers with the coordinator over an authenticated control connection, waits
for ``go`` (every instance a plan starts is up, and the task knows its downstream
addresses), then runs the instance: sources step, inner instances process the frames
that arrive on their data listener. A heartbeat thread keeps reporting while the main
thread is blocked on a full downstream (backpressure), so a slow instance is not
mistaken for a hung one. The task returns only when told to exit; its Spark job ending
early is a failure to the coordinator.
"""

from __future__ import annotations

import collections
import contextlib
import os
import queue
import threading
import time
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any

from ftctl.config.topology import Topology
from ftctl.kernel.clocks import ClockFault, UnitClock
from ftctl.kernel.piggyback import Piggyback
from ftctl.kernel.unit import Unit, perform
from ftctl.kernel.writes import fewer_writes
from ftctl.runtime.graph import ExecutionGraph
from ftctl.runtime.messages import Batch
from ftctl.runtime.pace import Pace
from ftctl.spark import agent, identity, wire
from ftctl.spark.gcpolicy import ManualGC
from ftctl.spark.latency import LatencyProbe
from ftctl.spark.links import LinkFaults, is_link_payload
from ftctl.spark.placement import where_this_runs
from ftctl.spill import PickledChunk
from ftctl.store import DirectoryStore, StoreError, seal
from protocols.contract.events import (
    BatchIn,
    ControlIn,
    MarkerIn,
    PeerIn,
    RollBackTo,
    SourceReady,
    Started,
    TimerFired,
)
from protocols.contract.messages import Msg
from protocols.contract.names import InstanceId
from protocols.registry import get_protocol

HEARTBEAT = 0.5  # seconds between heartbeats
INBOX_FRAMES = 64  # bounded: a full inbox stops the readers, TCP then stops the senders
DRAIN_FRAMES = 8  # frames processed before outputs are flushed (coalesces sends)
# ... or fewer, once they carried this many records: what a drain produces is held until
# the flush, and the output of eight large frames (a wordcount split's 64,000 records)
# no longer fits the caches it is encoded from (``docs/protocols.md``, "Frames").
DRAIN_RECORDS = 512
SOURCE_FLUSH = 0.004  # seconds of source steps coalesced into one flush
GC_EVERY = 10.0  # seconds between garbage collections (``ftctl.spark.gcpolicy``)
_WAKE = ("wake",)


@dataclass
class TaskPayload:
    """Everything a task needs; shipped to the executor inside the single-task job."""

    run_id: str
    instance: str
    inc: int
    protocol: str
    params: dict[str, Any]  # the run's resolved ProtocolParams, dumped
    topology: dict[str, Any]
    started: Started  # the kernel's start event: restored blobs, init message
    coordinator: wire.Address
    token: bytes
    rate: float | None = None
    # The coordinator's snapshot directory and its key (``DirectoryStore.key``): a task
    # that sees the same directory writes its snapshots there itself.
    store_dir: str | None = None
    store_key: str | None = None
    held: list[Msg] = field(default_factory=list)  # controls that came before the start
    epoch: int = 0  # its data epoch (``CoordinatorKernel.epoch``): ``inc`` until rolled back


@dataclass
class SparePayload:
    """A slot: a long-lived task that hosts instances one after another for the whole run.

    It runs ``first`` at once when it was started for an instance that no idle slot could
    take; otherwise, and after every instance it hosted ends (fenced, or let go at the
    end), it registers with the coordinator and waits to be handed the next one. A
    restart handed to a waiting slot skips Spark's job start (about a second on a warm
    cluster, 10-35 s on a loaded one: scheduling, a fresh Python worker, imports)."""

    run_id: str
    spare: int  # the slot's id
    coordinator: wire.Address
    token: bytes
    first: TaskPayload | None = None
    once: bool = False  # end with the first instance it hosts (``--start job``)


Runner = Callable[[TaskPayload], dict[str, Any]]


def run_partition(payloads: Iterable[TaskPayload | SparePayload]) -> Iterator[dict[str, Any]]:
    """The ``mapPartitions`` function of an instance's (or a slot's) job."""
    for p in payloads:
        if isinstance(p, SparePayload):
            yield run_slot(p, lambda t: InstanceTask(t).run())
        else:
            yield InstanceTask(p).run()


def run_slot(p: SparePayload, run: Runner) -> dict[str, Any]:
    """Host instances until the coordinator lets the slot go; the result of the last one
    (its final counters), or ``{"spare": id, "instance": None}`` if it hosted none."""
    last: dict[str, Any] = {"spare": p.spare, "instance": None}
    task, fresh = p.first, True
    while True:
        if task is None:
            task = wait_for_assignment(p, fresh)
            if task is None:  # let go: the run is over
                return last
        last = run(task)
        if p.once:
            return last
        task, fresh = None, False


def wait_for_assignment(p: SparePayload, fresh: bool = True) -> TaskPayload | None:
    """Register as a waiting slot and block until the coordinator hands it an instance
    or lets it go. ``fresh``: the slot has hosted nothing yet in this attempt (a fresh
    registration of a slot the coordinator thinks busy is Spark retrying its task)."""
    try:
        conn = wire.connect(p.coordinator, p.token)
    except OSError:
        return None  # the coordinator is gone
    executor, worker = where_this_runs()
    try:
        wire.send(conn, (wire.SPARE, p.spare, os.getpid(), fresh, executor, worker))
        frame = wire.recv(conn)
    except (EOFError, OSError):
        return None
    finally:
        conn.close()
    return frame[1] if frame[0] == wire.ASSIGN else None


class InstanceTask:
    """One incarnation of a unit: the kernel's ``Unit`` driven by frames and source steps.

    The protocol is the same ``InstanceLogic`` the simulation host runs; this class is the
    ``UnitPorts`` of ``ftctl.kernel.unit``: it turns actions into data frames to the
    downstream tasks and control frames to the driver, and keeps the unit's timers.
    """

    def __init__(self, p: TaskPayload):
        self.p = p
        self.iid = p.instance
        self.inc = p.inc
        # Data frames carry this (a rollback in place raises it) and the receiver's, as
        # each receiver's was given in GO or CONNECT: either older is dropped.
        self.epoch = p.epoch
        self.out_epoch: dict[str, int] = {}
        self.resume_source = False  # a rollback gave a finished source more to produce
        begun = time.monotonic()
        topology = Topology.model_validate(p.topology)
        graph = ExecutionGraph(topology)
        protocol = get_protocol(p.protocol)
        self.unit = Unit(protocol.instance, graph, p.instance, protocol.resolve(p.params), p.inc)
        self.core = self.unit.core
        self.dst_of = {k: InstanceId(c.dst) for k, c in enumerate(graph.channels)}
        self.inbox: queue.Queue[tuple[Any, ...]] = queue.Queue(maxsize=INBOX_FRAMES)
        self.ctl: collections.deque[tuple[Any, ...]] = collections.deque()
        self.out: dict[str, Connection | None] = {}
        self.min_inc: dict[str, int] = {}
        self.stopping = threading.Event()
        self.go = threading.Event()
        self.go_msg: tuple[Any, ...] | None = None
        self.ctrl_lock = threading.Lock()
        self.readers: list[Connection] = []
        # What ``perform`` produced since the last flush.
        self.sends: dict[str, list[tuple[int, Any]]] = {}
        self.sent = 0  # channel messages (batches, markers) sent, for the run's traffic
        self.piggyback = Piggyback()  # batches' protocol piggyback, for the run's traffic
        self.frames: list[tuple[Any, ...]] = []
        # key -> due, on the unit's clock (monotonic unless a clock fault set it); one per key
        self.timers: dict[str, float] = {}
        # Chaos and measurement: channel faults on outgoing links, sink output latency.
        self.links = LinkFaults(self.stopping)
        self.pace = Pace.of(topology.input) if p.rate else None
        self.probe = LatencyProbe(graph, p.rate) if self.core.is_sink else None
        if self.probe is not None:
            self.core.on_sink_output = self.probe.observe
        self.anchor: float | None = None
        self.gc = ManualGC(GC_EVERY)
        # Snapshots go straight to the coordinator's store when this task shares its disk:
        # a sink's held output then never crosses the control connection.
        self.store = (DirectoryStore.shared(p.store_dir, p.store_key)
                      if p.store_dir and p.store_key else None)
        # The protocol may already act when it starts (replaying channel state, ending
        # inputs that ended before); those actions wait for ``go``.
        now = time.monotonic()
        self.first = self.unit.handle(p.started, now)
        for msg in p.held:
            self.first += self.unit.handle(ControlIn(msg), now)
        # Where a source reads on, as its protocol restored it: the driver records the
        # range a restarted source reads again from this, not from the stored blob, whose
        # form is the protocol's own.
        self.resumed = self.core.offset if self.core.is_source else None
        # Building the instance and restoring its state: the restore in a recovery's start.
        self.restore_s = time.monotonic() - begun
        self.ctrl = wire.connect(p.coordinator, p.token)
        # Upstream peers connect on the address this host reaches the driver from: the
        # loopback by default, the cluster's network when the driver binds there.
        self.listener = (wire.listen(p.token, wire.local_host(self.ctrl))
                         if self.core.inputs else None)

    # ------------------------------------------------------------------ lifecycle

    def run(self) -> dict[str, Any]:
        started = time.monotonic()
        with self.gc:
            return self._run(started)

    def _run(self, started: float) -> dict[str, Any]:
        try:
            addr = self.listener.address if self.listener is not None else None
            me = identity.this_process()
            executor, worker = where_this_runs()
            self._ctrl_send((wire.REG, self.inc, self.iid, os.getpid(), addr,
                             executor, me.to_wire() if me is not None else None, worker,
                             round(self.restore_s, 4)))
            for target in (self._control_reader, self._heartbeat):
                threading.Thread(target=target, daemon=True).start()
            if self.listener is not None:
                threading.Thread(target=self._acceptor, daemon=True).start()
            if self._wait_go():
                self._do(self.first)
                if self.core.is_source:
                    self._source_loop()
                else:
                    self._inner_loop()
                # Finished instances stay until told (timers and peers still run): the
                # job ending means failure.
                while not self.stopping.is_set():
                    self._handle_ctl()
                    self._fire_timers()
                    if self.resume_source:
                        self.resume_source = False
                        self._source_loop()
                    self.stopping.wait(0.05)
        finally:
            self._close()
        return {"instance": self.iid, "inc": self.inc, "records_in": self.core.records_in,
                "records_out": self.core.records_out,
                "piggyback": self.piggyback.to_dict(),
                "seconds": round(time.monotonic() - started, 3)}

    def _close(self) -> None:
        self.stopping.set()
        for conn in [*self.out.values(), *self.readers, self.ctrl]:
            wire.shutdown(conn)
        if self.listener is not None:
            with contextlib.suppress(OSError):
                self.listener.close()

    def _wait_go(self) -> bool:
        while not self.go.wait(0.05):
            if self.stopping.is_set():
                return False
        assert self.go_msg is not None
        wiring, incs = self.go_msg[1], self.go_msg[2]
        # The run's schedule anchor (driver monotonic time) when the run is rate-paced.
        self.anchor = self.go_msg[3] if len(self.go_msg) > 3 else None
        if self.probe is not None:
            self.probe.anchor = self.anchor
        self.min_inc.update(incs)
        for dst, (addr, epoch) in wiring.items():
            self._connect(dst, addr, epoch)
        return not self.stopping.is_set()

    # ------------------------------------------------------------------ threads

    def _control_reader(self) -> None:
        try:
            while True:
                msg = wire.recv(self.ctrl)
                if msg[0] == wire.EXIT:
                    break
                if msg[0] == wire.GO:
                    self.go_msg = msg
                    self.go.set()
                elif msg[0] == wire.CONTROL and agent.is_agent_payload(msg[1]):
                    # A fault the driver may not deliver by signal: carried out here and
                    # now, even while the main thread is blocked on a full downstream.
                    agent.carry_out(msg[1], self._clock_fault)
                else:
                    self.ctl.append(msg)
                self._wake()
        except (EOFError, OSError):
            pass  # the coordinator is gone: nothing left to do
        self.stopping.set()
        # A main thread blocked on a send to a slow peer must notice the stop now.
        for conn in list(self.out.values()):
            wire.shutdown(conn)
        self._wake()

    def _wake(self) -> None:
        # A full inbox means the main thread has work queued and will look at ``ctl`` soon.
        with contextlib.suppress(queue.Full):
            self.inbox.put_nowait(_WAKE)

    def _heartbeat(self) -> None:
        # A connection of its own: heartbeats never wait behind the main thread's output
        # (locks are not fair, and a sink flushes back to back).
        try:
            hb = wire.connect(self.p.coordinator, self.p.token)
            hb.send((wire.HBREG, self.inc, self.iid))
            while not self.stopping.wait(HEARTBEAT):
                self.gc.tick(time.monotonic())
                # Stamped with the sender's monotonic clock (system-wide on Linux): the
                # driver judges liveness by when a heartbeat was sent, not when it got
                # around to reading it.
                hb.send((wire.HB, self.inc, self.core.records_in, self.core.records_out,
                         time.monotonic(), self._hb_extra()))
        except (OSError, ValueError):
            return
        wire.shutdown(hb)

    def _hb_extra(self) -> dict[str, Any]:
        extra: dict[str, Any] = {"sent": self.sent, "piggyback": self.piggyback.to_dict()}
        if self.core.is_source:
            extra["offset"] = self.core.offset
            extra["resumed"] = self.resumed
        if self.links.dropped:
            extra["dropped"] = dict(self.links.dropped)
        if self.probe is not None:
            samples = self.probe.drain()
            if samples:
                extra["latency"] = samples
        return extra

    def _acceptor(self) -> None:
        assert self.listener is not None
        while not self.stopping.is_set():
            try:
                conn = wire.accept(self.listener)
            except (OSError, EOFError):
                if self.stopping.is_set():
                    return
                continue  # a peer that failed authentication or went away mid-handshake
            self.readers.append(conn)
            threading.Thread(target=self._reader, args=(conn,), daemon=True).start()

    def _reader(self, conn: Connection) -> None:
        put, recv, decode = self.inbox.put, conn.recv_bytes, wire.decode_data
        try:
            while not self.stopping.is_set():
                put(decode(recv()))
        except (EOFError, OSError):
            pass

    # ------------------------------------------------------------------ control

    def _handle_ctl(self) -> None:
        while self.ctl:
            msg = self.ctl.popleft()
            kind = msg[0]
            if kind == wire.CONNECT:
                self._connect(msg[1], msg[2], msg[3])
            elif kind == wire.FENCE:
                self.min_inc[msg[1]] = max(self.min_inc.get(msg[1], 0), msg[2])
            elif kind == wire.ROLLBACK:
                self._roll_back(msg[1], RollBackTo(msg[2], msg[3], msg[4]))
            elif kind == wire.CONTROL and is_link_payload(msg[1]):
                self.links.control(msg[1])
            elif kind == wire.CONTROL:
                slot = msg[2] if len(msg) > 2 else None
                self._do(self.unit.handle(ControlIn(msg[1], slot), time.monotonic()))
            elif kind == wire.PEERS:
                # one frame of the driver's relays: carried out in order, sent as one
                for sender, payload, to in msg[1]:
                    acts = self.unit.handle(PeerIn(sender, payload, to), time.monotonic())
                    if acts:
                        perform(self.unit, fewer_writes(acts), self)
                self._flush()

    def _roll_back(self, epoch: int, ev: RollBackTo) -> None:
        """``RollBack`` in place: from now on this unit's frames carry ``epoch``, and the
        frames in flight to it (addressed to an older epoch) are dropped on arrival."""
        self.epoch = epoch
        slot = ev.slot
        idle = self.core.is_source and not self.unit.logic.more_to_produce(slot)
        self._do(self.unit.handle(ev, time.monotonic()))
        if idle and self.unit.logic.more_to_produce(slot):
            self.resume_source = True

    def _await_epoch(self, epoch: int) -> None:
        """A frame addressed to ``epoch`` came before the rollback that leads there: the
        rollback is on its way on the control connection; take it first."""
        while self.epoch < epoch and not self.stopping.is_set():
            if self.ctl:
                self._handle_ctl()
            else:
                time.sleep(0.002)

    def _connect(self, dst: str, addr: wire.Address | None, epoch: int) -> None:
        wire.shutdown(self.out.get(dst))
        self.out[dst] = None
        self.out_epoch[dst] = epoch
        if addr is None:
            return  # the receiver is gone: what we send it is lost until it comes back
        try:
            self.out[dst] = wire.connect(addr, self.p.token)
        except OSError:
            self.out[dst] = None

    def _fire_timers(self) -> None:
        if not self.timers:
            return
        now = time.monotonic()
        clock = self.unit.clock
        local = now if clock is None else clock.read(now)
        for key in sorted((k for k, due in self.timers.items() if due <= local),
                          key=self.timers.__getitem__):
            if key in self.timers and self.timers[key] <= local:  # not replaced meanwhile
                del self.timers[key]
                self._do(self.unit.handle(TimerFired(key, now), now))

    def _wait_for(self, most: float) -> float:
        """How long the main thread may block: ``most``, or less if a timer is due."""
        if not self.timers:
            return most
        now, due = time.monotonic(), min(self.timers.values())
        clock = self.unit.clock
        return max(0.0, min(most, (due if clock is None else clock.when(due, now)) - now))

    def _clock_fault(self, fault: ClockFault) -> None:
        """The agent's ``clock`` op: from now on this unit's events and timers go by a
        clock with ``fault`` (set from the control reader; the main thread is woken)."""
        self.unit.clock = (self.unit.clock or UnitClock()).apply(fault, time.monotonic())

    # ------------------------------------------------------------------ loops

    def _inner_loop(self) -> None:
        get, get_nowait = self.inbox.get, self.inbox.get_nowait
        handle, min_inc, dst_of = self.unit.handle, self.min_inc, self.dst_of
        monotonic = time.monotonic
        while not self.stopping.is_set():
            if self.ctl:
                self._handle_ctl()
            self._fire_timers()
            try:
                frame = get(timeout=self._wait_for(0.2))
            except queue.Empty:
                continue
            n = records = 0
            acts: list[Any] = []
            while True:
                if len(frame) == 4:
                    src, epoch, items, to = frame
                    if to > self.epoch:  # sent after a rollback this unit has yet to take
                        self._do(acts)
                        acts = []
                        self._await_epoch(to)
                    # frames from a stopped or rolled-back sender, or sent to this unit
                    # before it rolled back, are dropped
                    if epoch >= min_inc.get(src, 0) and to == self.epoch:
                        now = monotonic()
                        for ch, msg in items:
                            if type(msg) is Batch:
                                records += len(msg.records)
                                acts += handle(BatchIn(dst_of[ch], ch, msg), now)
                            else:
                                acts += handle(MarkerIn(dst_of[ch], ch, msg), now)
                n += 1
                if n >= DRAIN_FRAMES or records >= DRAIN_RECORDS:
                    break
                try:
                    frame = get_nowait()
                except queue.Empty:
                    break
            self._do(acts)

    def _source_loop(self) -> None:
        pace, lo = self.pace, self.core.lo
        unit, slot = self.unit, InstanceId(self.iid)
        # Paced on the run's schedule, like a topic being written at `rate`: a source
        # restarted behind it reads its backlog at full speed, then keeps the pace.
        base = self.anchor
        if base is None:
            base = time.monotonic() - (pace.due(self.core.offset - lo) if pace else 0.0)
        more = True
        while more and not self.stopping.is_set():
            if self.ctl:
                self._handle_ctl()
            self._fire_timers()
            flush_at = time.monotonic() + SOURCE_FLUSH
            acts: list[Any] = []
            while more:
                if pace is not None:
                    due = base + pace.due(self.core.offset - lo)
                    delay = due - time.monotonic()
                    if delay > 0:
                        time.sleep(self._wait_for(delay))
                        if due > time.monotonic():
                            break  # woken early for a timer: the outer loop fires it
                now = time.monotonic()
                acts += unit.handle(SourceReady(slot, now), now)
                more = unit.logic.more_to_produce(slot)
                if pace is not None or time.monotonic() >= flush_at:
                    break
            self._do(acts)

    # ------------------------------------------------------------------ actions

    def _do(self, acts: list[Any]) -> None:
        """Carry out ``acts`` (``perform`` calls the ports below), then send what they
        produced: data frames first, then one control frame to the driver."""
        if not acts:
            return
        perform(self.unit, fewer_writes(acts), self)
        self._flush()

    def _flush(self) -> None:
        sends, self.sends = self.sends, {}
        for dst, items in sends.items():
            conn = self.out.get(dst)
            if conn is None:
                continue  # lost, as a message to a dead instance is
            frame = (self.iid, self.epoch, items, self.out_epoch.get(dst, 0))
            if self.links.active and self.links.intercept(dst, conn, frame):
                continue  # dropped or held by a channel fault
            try:
                conn.send_bytes(wire.encode_data(*frame))
                self.sent += len(items)
            except (OSError, ValueError):
                wire.shutdown(conn)
                self.out[dst] = None
        if self.frames:
            frames, self.frames = self.frames, []
            try:
                self._ctrl_send((wire.MULTI, self.inc, frames, self.core.records_in,
                                 self.core.records_out))
            except (OSError, ValueError):
                self.stopping.set()

    # UnitPorts (ftctl/kernel/unit.py): what ``perform`` calls, in action order.

    def send(self, channel: int, msg: Any) -> None:
        if type(msg) is Batch:
            self.piggyback.observe(channel, msg)
        self.sends.setdefault(self.dst_of[channel], []).append((channel, msg))

    def emit(self, slot: str, records: Sequence[tuple[Any, Any]],
             uid: Hashable | None = None) -> None:
        if uid is None:
            # Pickled here, once: the driver appends these bytes to its spill as they are
            # instead of decoding the records and pickling them again (``SinkStore``).
            self.frames += [(wire.OUTPUT, slot, c.blob, c.count)
                            for c in PickledChunk.pieces(records)]
        else:  # the driver needs the name to drop a second emit of it
            self.frames.append((wire.EMIT, slot, records, uid))

    def stage(self, slot: str, epoch: int, records: Sequence[tuple[Any, Any]]) -> None:
        # In pieces, all in this frame: the driver appends them to the epoch in order.
        self.frames += [(wire.STAGE, slot, epoch, c.blob, c.count)
                        for c in PickledChunk.pieces(list(records))]

    def persist(self, slot: str, ref: int, blob: Any) -> None:
        if self.store is None:
            # Framed here: a blob crossing as a frame would be marshalled (``codec``).
            self.frames.append((wire.PERSIST, slot, ref, seal(blob)))
            return
        try:
            name, size = self.store.write_pending(ref, slot, blob)
        except (OSError, StoreError):
            # A snapshot that cannot be written must not be reported: fail this task, the
            # protocol recovers it as any other failure.
            self.stopping.set()
            raise
        self.frames.append((wire.PERSISTED, slot, ref, name, size))

    def report(self, slot: str, msg: Msg, unit: Unit | None = None) -> None:
        self.frames.append((wire.REPORT, slot, msg))

    def send_peer(self, sender: str, to: str, msg: Msg, unit: str | None = None) -> None:
        # Relayed by the driver, which knows the routing table: FIFO per pair of units,
        # as both hops are one ordered connection each.
        self.frames.append((wire.PEER, sender, to, msg, unit))

    def set_timer(self, unit: Unit, key: str, after: float) -> None:
        self.timers[key] = unit.local_due(time.monotonic(), after)[0]

    def cancel_timer(self, unit: Unit, key: str) -> None:
        self.timers.pop(key, None)

    def note(self, kind: str, data: Mapping[str, Any]) -> None:
        self.frames.append((wire.NOTE, kind, dict(data)))

    def phase(self, phase: str, on: bool, key: int | None, holder: str | None = None) -> None:
        self.frames.append((wire.PHASE, phase, on, key))

    def suspect(self, instance: str, reason: str, by: Unit | None = None) -> None:
        self.frames.append((wire.SUSPECT, instance, reason))

    def route(self, slot: str, to: str) -> None:
        self.frames.append((wire.ROUTE, slot, to))

    def adopt(self, unit: Unit, slot: str, restore: int | None) -> None:
        unit.adopt(slot)
        restored = None
        if restore is not None:
            if self.store is None:
                raise RuntimeError(f"{slot}: adopting from snapshot {restore} needs the "
                                   "snapshot store on this executor")
            restored = self.store.get(restore, slot)
        started = Started(InstanceId(slot), unit.inc, "adopt", restored)
        perform(unit, unit.handle(started, time.monotonic()), self)

    def _ctrl_send(self, frame: tuple[Any, ...]) -> None:
        data = wire.encode(frame)  # outside the lock: the heavy part
        with self.ctrl_lock:
            self.ctrl.send_bytes(data)
