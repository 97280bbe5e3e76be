"""Runs a topology under a protocol in simulated time, with seeded interleavings and crashes.

Every source step, message delivery, report to the coordinator, failure detection and
instance start is an event on one heap ordered by simulated time. Network delays are
random per message but FIFO per channel (as over TCP). A crash kills an instance's
memory and everything in flight to or from it; the coordinator hears of it after a
detection delay and answers with a plan that the host carries out. Same seed, same trace.
"""

from __future__ import annotations

import hashlib
import heapq
import random
from collections import Counter, deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ftctl.config.topology import Topology
from ftctl.kernel.commands import (
    CancelCoordinatorTimer,
    Fence,
    HostCommand,
    Log,
    SendControl,
    SetCoordinatorTimer,
    StartGroup,
    Trace,
)
from ftctl.kernel.coordinator import CoordinatorKernel
from ftctl.kernel.legacy import legacy_logic
from ftctl.kernel.outputs import Outputs
from ftctl.kernel.unit import Unit, perform
from ftctl.runtime.graph import ExecutionGraph
from ftctl.runtime.messages import Batch, Message
from ftctl.sim.cluster import ClusterSlots, SimCluster
from ftctl.sim.faults import FailureSchedule
from ftctl.store import MemoryStore, SinkStore
from protocols.base import ProtocolInfo
from protocols.contract.events import (
    BatchIn,
    ControlIn,
    MarkerIn,
    PeerIn,
    SourceReady,
    Started,
    Suspected,
    TimerFired,
)
from protocols.contract.logic import CoordinatorLogic, InstanceLogic
from protocols.contract.messages import Msg
from protocols.contract.params import ProtocolParams
from protocols.contract.spec import ProtocolSpec
from protocols.contract.view import GraphView

# Simulated-time constants (seconds). Small, so runs are short; their ratios are what matter.
NET_DELAY = 0.0004
STEP = 0.001  # between source batches when the topology runs as fast as possible
MAX_EVENTS = 2_000_000  # a schedule that livelocks ends here (the golden run has no cap)


@dataclass
class SimStats:
    events: int = 0
    failures: int = 0
    failed_instances: list[str] = field(default_factory=list)
    recoveries: int = 0
    messages: int = 0
    records_sent: int = 0
    persists: int = 0
    # messages per (kind, from operator, to operator): "data" for batches on channels,
    # the marker's kind for markers, the message class name for peer messages
    kinds: Counter[tuple[str, str, str]] = field(default_factory=Counter)


@dataclass
class SimResult:
    outputs: dict[str, list[tuple[Any, Any]]]
    complete: bool
    stats: SimStats
    trace_hash: str
    trace: list[str]
    events: list[dict[str, Any]]
    end_time: float


def logic_of(protocol: ProtocolInfo | ProtocolSpec[Any],
             ) -> tuple[type[InstanceLogic[Any]], type[CoordinatorLogic[Any]]]:
    """The contract-v2 logic classes of a registered protocol (legacy ones wrapped)."""
    if isinstance(protocol, ProtocolInfo):
        return legacy_logic(protocol)
    return protocol.instance, protocol.coordinator


class SimHost:
    """Transport, time and storage of the simulation; the kernel drives the protocol."""

    def __init__(self, graph: ExecutionGraph, protocol: ProtocolInfo | ProtocolSpec[Any],
                 params: ProtocolParams,
                 seed: int, schedule: FailureSchedule | None = None, trace: bool = False,
                 hash_trace: bool = False,
                 max_events: int | Literal["default"] | None = "default",
                 cluster: SimCluster | None = None):
        self.graph = graph
        # None: no cap (a fault-free run always ends); read late so tests can lower it.
        self.max_events = MAX_EVENTS if max_events == "default" else max_events
        self.info = protocol
        self.params = params
        self.rng = random.Random(seed)
        self.schedule = list(schedule.strikes) if schedule else []
        self.keep_trace = trace
        self.hasher = hashlib.sha256() if (trace or hash_trace) else None
        self.trace: list[str] = []
        self.events: list[dict[str, Any]] = []
        self.now = 0.0
        self.heap: list[tuple[float, int, str, Any]] = []
        self.seq = 0
        self.live: dict[str, Unit] = {}
        n = len(graph.channels)
        self.queues: list[deque[Message]] = [deque() for _ in range(n)]
        self.chan_epoch = [0] * n
        self.last_delivery = [0.0] * n
        self.last_report: dict[str, float] = {}
        self.timers: dict[tuple[str, str], int] = {}  # (unit, key) -> token
        self.timer_seq = 0
        self.store = MemoryStore()
        self.sinks = SinkStore()
        self.instance_logic, coordinator_logic = logic_of(protocol)
        self.outputs = Outputs(self.sinks, self.store,
                               legacy_blobs=isinstance(protocol, ProtocolInfo))
        # Nodes and slots (node_down/node_up); None: unlimited capacity, no nodes.
        self.cluster = cluster
        slots = (ClusterSlots(cluster, {i: s.op for i, s in graph.instances.items()})
                 if cluster is not None else None)
        self.kernel = CoordinatorKernel(coordinator_logic, graph, params, self.store,
                                        self.outputs, slots)
        self.stats = SimStats()
        self.step_dt = source_step(graph.topology)
        self.routing = self.kernel.routing
        self.op_of = {iid: spec.op for iid, spec in graph.instances.items()}
        self.chan_ops = [(self.op_of[c.src], self.op_of[c.dst]) for c in graph.channels]
        self.last_peer: dict[tuple[str, str], float] = {}  # FIFO per (sender, receiver)
        spared = getattr(protocol, "spared", None)
        self.spared: tuple[frozenset[str], ...] = (spared(GraphView(graph)) if spared
                                                   else ())

    # ------------------------------------------------------------------ event plumbing

    def _push(self, t: float, kind: str, data: Any) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (t, self.seq, kind, data))

    def _note(self, text: str) -> None:
        if self.hasher is not None:
            line = f"{self.now:.6f} {text}"
            self.hasher.update(line.encode())
            if self.keep_trace:
                self.trace.append(line)

    def _log(self, kind: str, **data: Any) -> None:
        self.events.append({"t": round(self.now, 6), "event": kind, **data})
        self._note(f"EVENT {kind} {sorted(data.items())}")

    # ------------------------------------------------------------------ run

    def run(self) -> SimResult:
        self._apply(self.kernel.start(self.now))
        strikes = deque(self.schedule)
        heap = self.heap
        while heap:
            t, _, kind, data = heapq.heappop(heap)
            self.now = t
            self.stats.events += 1
            getattr(self, "_on_" + kind)(data)
            while strikes and self.stats.events >= strikes[0].at_event:
                self._strike(strikes.popleft())
            if self.max_events is not None and self.stats.events > self.max_events:
                break
        complete = self.kernel.finished()
        return SimResult(self.sinks.by_operator(), complete, self.stats,
                         self.hasher.hexdigest() if self.hasher else "", self.trace,
                         self.events, self.now)

    # ------------------------------------------------------------------ events

    def _live(self, iid: str, inc: int) -> Unit | None:
        unit = self.live.get(iid)
        return unit if unit is not None and unit.inc == inc else None

    def _on_step(self, data: tuple[str, int]) -> None:
        iid, inc = data
        unit = self._live(iid, inc)
        if unit is None:
            return
        acts = unit.handle(SourceReady(unit.id, self.now), self.now)  # type: ignore[arg-type]
        self._note(f"step {iid} offset={unit.core.offset}")
        perform(unit, acts, self)
        if unit.logic.more_to_produce(unit.id):  # type: ignore[arg-type]
            jitter = self.step_dt * (0.5 + self.rng.random())
            self._push(self.now + jitter, "step", (iid, inc))

    def _on_deliver(self, data: tuple[int, int] | tuple[int, int, str, int]) -> None:
        ch, epoch = data[0], data[1]
        if epoch != self.chan_epoch[ch]:
            return
        msg = self.queues[ch].popleft()
        dst = self.graph.channels[ch].dst
        if len(data) == 2:
            unit = self.live.get(dst)
        else:  # sent while the slot was routed to another unit (a takeover)
            unit = self._live(data[2], data[3])
            if unit is not None and dst not in unit.cores:
                unit = None
        if unit is None:
            return  # the receiver is dead: the message is lost with it
        self._note(f"deliver ch{ch} {_describe(msg)} -> {dst}"
                   + ("" if unit.id == dst else f"@{unit.id}"))
        ev = BatchIn(dst, ch, msg) if type(msg) is Batch else MarkerIn(dst, ch, msg)  # type: ignore[arg-type]
        perform(unit, unit.handle(ev, self.now), self)

    def _on_report(self, data: tuple[str, int, Msg] | tuple[str, int, Msg, str]) -> None:
        iid, inc, msg = data[0], data[1], data[2]
        if self.kernel.incarnation(iid) != inc:  # type: ignore[arg-type]
            return
        slot = data[3] if len(data) == 4 else None
        self._note(f"report {slot + '@' if slot else ''}{iid} {_report_text(msg)}")
        self._apply(self.kernel.report(iid, inc, msg, self.now, slot))

    def _on_detect(self, failed: frozenset[str]) -> None:
        self._log("detected", instances=sorted(failed))
        self.stats.recoveries += 1
        self._apply(self.kernel.failure(failed, self.now))

    def _on_start(self, starts: tuple[tuple[str, int], ...]) -> None:
        # A plan's instances start together: a job resumes once its replacements are deployed.
        begun = [self._start(iid, inc) for iid, inc in starts]
        for unit, acts in begun:
            if unit is not None:
                perform(unit, acts, self)

    def _start(self, iid: str, inc: int) -> tuple[Unit | None, list[Any]]:
        got = None if iid in self.live else self.kernel.start_unit(iid, inc)
        if got is None:
            return None, []  # superseded by a later stop
        started, held, restart = got
        unit = Unit(self.instance_logic, self.graph, iid, self.params, inc)
        acts = unit.handle(started, self.now)
        self.live[iid] = unit
        self._note(f"start {iid} restore={restart.restore}")
        if inc > 0:
            self._log("restarted", instance=iid, restore=restart.restore)
        for msg in held:
            acts += unit.handle(ControlIn(msg), self.now)
        if unit.core.is_source:
            self._push(self.now + self.step_dt * self.rng.random(), "step", (iid, inc))
        return unit, acts

    def _on_control(self, data: tuple[str, int, Msg] | tuple[str, int, Msg, str]) -> None:
        iid, inc, msg = data[0], data[1], data[2]
        if not self.kernel.control_arrived(iid, inc, msg):
            return  # stale, or held until the new incarnation starts
        unit = self.live[iid]
        slot = data[3] if len(data) == 4 else None
        perform(unit, unit.handle(ControlIn(msg, slot), self.now), self)  # type: ignore[arg-type]

    def _on_timer(self, data: tuple[str, int, str, int]) -> None:
        iid, inc, key, token = data
        unit = self._live(iid, inc)
        if unit is None or self.timers.get((iid, key)) != token:
            return
        del self.timers[(iid, key)]
        perform(unit, unit.handle(TimerFired(key, self.now), self.now), self)

    def _on_peer(self, data: tuple[str, int, str, Msg, str]) -> None:
        dest, inc, sender, msg, to = data
        unit = self._live(dest, inc)
        if unit is None:
            return  # lost with its receiver
        perform(unit, unit.handle(PeerIn(sender, msg, to), self.now), self)  # type: ignore[arg-type]

    def _on_coordinator_timer(self, data: tuple[str, int]) -> None:
        key, token = data
        self._apply(self.kernel.timer_fired(key, token, self.now))

    # ------------------------------------------------------------------ failures

    def _strike(self, strike: Any) -> None:
        alive = sorted(self.live)
        if strike.targets:
            victims = [t for t in strike.targets if t in self.live]
        else:
            victims = self.rng.sample(alive, min(strike.count, len(alive)))
        if self.spared:
            victims = self._spare(victims)
        if not victims:
            return
        self.stats.failures += 1
        self.stats.failed_instances.extend(victims)
        self._log("fault", instances=sorted(victims), at_event=self.stats.events)
        for v in victims:
            self.kernel.lost(v)
            self._kill(v)
        detect = self.now + 0.002 + 0.004 * self.rng.random()
        self._push(detect, "detect", frozenset(victims))

    # ------------------------------------------------------------------ nodes

    def at(self, t: float, fn: Callable[[], object]) -> None:
        """Call ``fn`` at simulated time ``t`` (scenario faults: node_down, node_up)."""
        self._push(t, "call", fn)

    def _on_call(self, fn: Callable[[], object]) -> None:
        fn()

    def node_down(self, node: str) -> list[str]:
        """``node`` leaves: every unit placed on it dies (as ``_kill``), its slots go; the
        coordinator hears ``CapacityChanged`` now and the failure after a detection delay."""
        assert self.cluster is not None, "node_down needs a SimHost with a cluster"
        victims = self.cluster.down(node)
        self._log("node-down", node=node, instances=victims)
        for v in victims:
            self.kernel.lost(v)
            self._kill(v)
        if victims:
            self.stats.failures += 1
            self.stats.failed_instances.extend(victims)
            detect = self.now + 0.002 + 0.004 * self.rng.random()
            self._push(detect, "node_detect", (frozenset(victims), frozenset({node})))
        self._apply(self.kernel.capacity_changed(self.now))
        return victims

    def node_up(self, node: str) -> None:
        """``node`` (or its replacement, same labels) is back with all its slots free."""
        assert self.cluster is not None, "node_up needs a SimHost with a cluster"
        self.cluster.up(node)
        self._log("node-up", node=node)
        self._apply(self.kernel.capacity_changed(self.now))

    def _on_node_detect(self, data: tuple[frozenset[str], frozenset[str]]) -> None:
        failed, nodes = data
        self._log("detected", instances=sorted(failed), nodes=sorted(nodes))
        self.stats.recoveries += 1
        self._apply(self.kernel.failure(failed, self.now, nodes=nodes))

    def _spare(self, victims: list[str]) -> list[str]:
        """The protocol's fault model (``ProtocolSpec.spared``): keep one unit of each
        group up; the victims that would have emptied a group are skipped."""
        kept = list(victims)
        for group in self.spared:
            hit = sorted(v for v in kept if v in group)
            if hit and not any(u in self.live and u not in kept for u in group):
                kept.remove(hit[-1])  # it stays up
        if len(kept) < len(victims):
            self._log("fault-skipped", instances=sorted(set(victims) - set(kept)),
                      reason="would leave no unit of its group up")
        return kept

    def _kill(self, iid: str) -> None:
        unit = self.live.pop(iid, None)
        for slot in unit.cores if unit is not None else (iid,):  # adopted slots die too
            for ch in self._touching(slot):
                self.queues[ch].clear()
                self.chan_epoch[ch] += 1

    def _touching(self, iid: str) -> list[int]:
        spec = self.graph.instances[iid]
        return [*spec.inputs, *self.graph.out_channels(iid)]

    # ------------------------------------------------------------------ unit ports

    def send(self, ch: int, msg: Message) -> None:
        self.stats.messages += 1
        if type(msg) is Batch:
            self.stats.records_sent += len(msg.records)
            self.stats.kinds["data", *self.chan_ops[ch]] += 1
        else:
            self.stats.kinds[msg.kind, *self.chan_ops[ch]] += 1  # type: ignore[union-attr]
        t = max(self.last_delivery[ch], self.now + NET_DELAY * (0.2 + 2 * self.rng.random()))
        self.last_delivery[ch] = t
        self.queues[ch].append(msg)
        dst = self.graph.channels[ch].dst
        to = self.routing.unit_of(dst) if self.routing.moved else dst
        if to == dst:
            self._push(t, "deliver", (ch, self.chan_epoch[ch]))
        else:  # the route is resolved now: a unit that dies meanwhile loses it
            unit = self.live.get(to)
            self._push(t, "deliver", (ch, self.chan_epoch[ch], to, unit.inc if unit else -1))

    def emit(self, slot: str, records: Sequence[tuple[Any, Any]],
             uids: Sequence[Any] | None = None) -> None:
        self.sinks.append(slot, list(records), uids)

    def stage(self, slot: str, epoch: int, records: Sequence[tuple[Any, Any]]) -> None:
        self.outputs.stage(slot, epoch, records)

    def persist(self, slot: str, ref: int, blob: Any) -> None:
        self.store.put(ref, slot, blob)
        self.stats.persists += 1

    def report(self, slot: str, msg: Msg, unit: Unit | None = None) -> None:
        # The control connection is one TCP stream: reports arrive in order.
        key = slot if unit is None else unit.id
        t = max(self.last_report.get(key, 0.0),
                self.now + 0.0002 + 0.0008 * self.rng.random())
        self.last_report[key] = t
        if unit is None:
            self._push(t, "report", (slot, self.live[slot].inc, msg))
        else:  # for a slot ``unit`` adopted: stale with the unit, not the slot
            self._push(t, "report", (unit.id, unit.inc, msg, slot))

    def send_peer(self, sender: str, to: str, msg: Msg, unit: str | None = None) -> None:
        self.stats.messages += 1
        dest = unit if unit is not None else self.routing.unit_of(to)
        self.stats.kinds[type(msg).__name__, self.op_of.get(sender, sender),
                         self.op_of.get(to, to)] += 1
        receiver = self.live.get(dest)
        if receiver is None:
            return  # lost: nobody runs the receiver
        # FIFO per pair of units, as over one connection
        t = self.now + NET_DELAY * (0.2 + 2 * self.rng.random())
        t = max(t, self.last_peer.get((sender, dest), 0.0))
        self.last_peer[sender, dest] = t
        self._push(t, "peer", (dest, receiver.inc, sender, msg, to))

    def set_timer(self, unit: Unit, key: str, after: float) -> None:
        # Timers die with their incarnation; a newer token replaces a pending timer.
        self.timer_seq += 1
        self.timers[(unit.id, key)] = self.timer_seq
        self._push(self.now + after, "timer", (unit.id, unit.inc, key, self.timer_seq))

    def cancel_timer(self, unit: Unit, key: str) -> None:
        self.timers.pop((unit.id, key), None)

    def note(self, kind: str, data: Mapping[str, Any]) -> None:
        self._log(kind, **data)

    def phase(self, phase: str, on: bool, key: int | None) -> None:
        self._log("phase-entered" if on else "phase-left", phase=phase, key=key)

    def suspect(self, instance: str, reason: str, by: Unit | None = None) -> None:
        # travels like a report: the coordinator hears of it a little later
        assert by is not None
        t = self.now + 0.0002 + 0.0008 * self.rng.random()
        self._push(t, "suspect", (instance, by.id, by.inc, reason))

    def _on_suspect(self, data: tuple[str, str, int, str]) -> None:
        instance, by, inc, reason = data
        if self.kernel.incarnation(by) != inc:  # type: ignore[arg-type]
            return  # the suspecting unit died since
        self._log("failure-suspected", instance=instance, by=by, reason=reason)
        self._apply(self.kernel.handle(Suspected(instance, by, reason, self.now)))  # type: ignore[arg-type]

    def route(self, slot: str, to: str) -> None:
        self._apply(self.kernel.route(slot, to))

    def adopt(self, unit: Unit, slot: str, restore: int | None) -> None:
        unit.adopt(slot)
        restored = self.store.get(restore, slot) if restore is not None else None
        self._note(f"adopt {slot}@{unit.id}")
        started = Started(slot, unit.inc, "adopt", restored)  # type: ignore[arg-type]
        perform(unit, unit.handle(started, self.now), self)

    # ------------------------------------------------------------------ coordinator commands

    def _apply(self, cmds: list[HostCommand]) -> None:
        for c in cmds:
            if isinstance(c, Fence):
                for iid in c.instances:
                    self._kill(iid)
                self._note(f"stop {list(c.instances)}")
            elif isinstance(c, StartGroup):
                delay = 0.001 + 0.004 * self.rng.random() if self.now > 0 else 0.0
                self._push(self.now + delay, "start", c.starts)
            elif isinstance(c, SendControl):
                if c.slot is None:
                    self._push(self.now + 0.0002, "control", (c.instance, c.incarnation, c.msg))
                else:
                    self._push(self.now + 0.0002, "control",
                               (c.instance, c.incarnation, c.msg, c.slot))
            elif isinstance(c, Log):
                self._log(c.kind, **c.data)
            elif isinstance(c, Trace):
                self._note(c.text)
            elif isinstance(c, SetCoordinatorTimer):
                self._push(self.now + c.after, "coordinator_timer", (c.key, c.token))
            elif isinstance(c, CancelCoordinatorTimer):
                pass  # the kernel ignores the stale token when it fires


def _report_text(msg: Msg) -> str:
    # Legacy reports keep their old trace form ("kind data").
    kind = getattr(msg, "kind", None)
    if kind is not None:
        return f"{kind} {getattr(msg, 'data', None)}"
    return repr(msg)


def source_step(topology: Topology) -> float:
    """Simulated seconds between two batches of one source."""
    rate = topology.input.rate
    return topology.input.batch / rate if rate else STEP


def _describe(msg: Message) -> str:
    if type(msg) is Batch:
        return f"batch#{msg.seq}({len(msg.records)})"
    return f"{msg.kind}:{msg.id}"  # type: ignore[union-attr]
