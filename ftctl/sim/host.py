"""Runs a topology under a protocol in simulated time, with seeded interleavings and crashes.

Every source step, message delivery, report to the coordinator, failure detection and
instance start is an event on one heap ordered by simulated time. Network delays are
random per message but FIFO per channel (as over TCP). A crash kills an instance's
memory and everything in flight to or from it; the coordinator hears of it after a
detection delay and answers with a plan that the host carries out. Same seed, same trace.

Besides crashes (``Strike``) the host realizes the fault model's other kinds
(``ftctl/sim/faults.py``, ``SimHost.inject``), with the Spark host's meaning:

- pause: the unit handles nothing; what reaches it (deliveries, controls, timers, peer
  messages, its own steps) waits in order. Paused longer than ``hang_timeout`` it is
  declared failed (cause ``heartbeat``) and fenced: when it resumes it handles what waited,
  and everything it does is dropped (a zombie, its incarnation stale; ``zombie-fenced``).
- partition / drop: messages between the two units (both ways, channels and peer messages)
  are lost. Channels are reliable while both ends live, so a receiver that lost one is
  fenced as failed at once (Spark: "frame(s) lost to a channel fault") and detected after
  the crash detection delay; ``fault-skipped`` if the protocol's fault model spares it.
- delay: what the unit sends takes ``extra`` longer; each channel stays FIFO.
- slow: each event the unit handles keeps it busy ``(factor - 1) x`` its cost (a source
  batch: the source step; anything else: ``NET_DELAY``); what arrives meanwhile waits.
- node loss: ``node_down``/``node_up`` with a ``SimCluster``.

Each fault is logged (``fault-injected``, ``fault-healed``; crashes as ``fault``), and a
fault whose target is not running is logged ``fault-skipped`` with the reason.
"""

from __future__ import annotations

import hashlib
import heapq
import random
from collections import Counter, deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, cast

from ftctl.config.topology import Topology
from ftctl.kernel.commands import (
    CancelCoordinatorTimer,
    Fence,
    HostCommand,
    Log,
    RollBackUnit,
    SendControl,
    SetCoordinatorTimer,
    StartGroup,
    Trace,
)
from ftctl.kernel.coordinator import CoordinatorKernel
from ftctl.kernel.history import History, HistoryEvent
from ftctl.kernel.outputs import Outputs
from ftctl.kernel.piggyback import Piggyback
from ftctl.kernel.unit import Unit, perform
from ftctl.runtime.graph import ExecutionGraph
from ftctl.runtime.messages import Batch, Message
from ftctl.sim.cluster import ClusterSlots, SimCluster
from ftctl.sim.faults import (
    HANG_TIMEOUT,
    NET_DELAY,
    Delay,
    Drop,
    FailureSchedule,
    NodeLoss,
    Partition,
    Pause,
    SimFault,
    Slow,
    Strike,
)
from ftctl.store import MemoryStore, SinkStore
from protocols.contract.events import (
    BatchIn,
    ControlIn,
    FailureCause,
    InstanceEvent,
    MarkerIn,
    PeerIn,
    SourceReady,
    Started,
    Suspected,
    TimerFired,
)
from protocols.contract.messages import Msg
from protocols.contract.params import ProtocolParams
from protocols.contract.spec import ProtocolSpec
from protocols.contract.view import GraphView

# Simulated-time constants (seconds). Small, so runs are short; their ratios are what matter.
# NET_DELAY (a message's nominal latency) and HANG_TIMEOUT live in ftctl/sim/faults.py.
STEP = 0.001  # between source batches when the topology runs as fast as possible
MAX_EVENTS = 2_000_000  # a schedule that livelocks ends here (the golden run has no cap)


@dataclass
class SimStats:
    events: int = 0
    failures: int = 0
    failed_instances: list[str] = field(default_factory=list)
    recoveries: int = 0
    rollbacks: int = 0  # in-place rollbacks carried out (RollBack)
    messages: int = 0
    records_sent: int = 0
    persists: int = 0
    # messages per (kind, from operator, to operator): "data" for batches on channels,
    # the marker's kind for markers, the message class name for peer messages
    kinds: Counter[tuple[str, str, str]] = field(default_factory=Counter)
    injected: int = 0  # faults of any kind that struck (crashes included)
    skipped: int = 0  # faults logged fault-skipped
    zombie_actions: Counter[str] = field(default_factory=Counter)  # dropped, by action
    # batches' protocol piggyback and clock-only batches, over all units (kernel/piggyback)
    piggyback: Piggyback = field(default_factory=Piggyback)


@dataclass(eq=False)
class _Gate:
    """What holds one unit back (pauses, slowness) and what waits for it meanwhile."""

    unit: Unit
    pauses: set[int] = field(default_factory=set)  # ids of the pauses under way
    slows: dict[int, float] = field(default_factory=dict)  # slow id -> factor
    busy_until: float = 0.0
    backlog: deque[tuple[str, Any]] = field(default_factory=deque)
    waking: bool = False
    zombie: bool = False  # fenced while paused: what it does after resuming is dropped

    @property
    def factor(self) -> float:
        return max(self.slows.values(), default=1.0)


@dataclass(eq=False)
class _Link:
    """A channel fault: messages between ``a`` and ``peers`` are lost or delayed."""

    kind: Literal["partition", "delay", "drop"]
    a: str
    peers: frozenset[str] | None  # None: every peer of ``a``
    both_ways: bool
    rng: random.Random
    extra: float = 0.0
    jitter: float = 0.0
    probability: float = 1.0

    def hits(self, src: str, dst: str) -> bool:
        if src == self.a and (self.peers is None or dst in self.peers):
            return True
        return self.both_ways and dst == self.a and (self.peers is None or src in self.peers)


class _Fenced:
    """The ports of a zombie: every action is counted and dropped."""

    def __init__(self, counts: Counter[str]):
        self.counts = counts

    def _drop(self, what: str) -> None:
        self.counts[what] += 1

    def send(self, channel: int, msg: Any) -> None:
        self._drop("Send")

    def emit(self, slot: str, records: Sequence[tuple[Any, Any]],
             uids: Sequence[Any] | None = None) -> None:
        self._drop("Emit")

    def stage(self, slot: str, epoch: int, records: Sequence[tuple[Any, Any]]) -> None:
        self._drop("StageOutput")

    def persist(self, slot: str, ref: int, blob: Any) -> None:
        self._drop("Persist")

    def report(self, slot: str, msg: Msg, unit: Unit | None = None) -> None:
        self._drop("Report")

    def send_peer(self, sender: str, to: str, msg: Msg, unit: str | None = None) -> None:
        self._drop("SendPeer")

    def set_timer(self, unit: Unit, key: str, after: float) -> None:
        self._drop("SetTimer")

    def cancel_timer(self, unit: Unit, key: str) -> None:
        return None

    def note(self, kind: str, data: Mapping[str, Any]) -> None:
        self._drop("Note")

    def phase(self, phase: str, on: bool, key: int | None) -> None:
        self._drop("DeclarePhase")

    def suspect(self, instance: str, reason: str, by: Unit | None = None) -> None:
        self._drop("Suspect")

    def route(self, slot: str, to: str) -> None:
        self._drop("Route")

    def adopt(self, unit: Unit, slot: str, restore: int | None) -> None:
        self._drop("AdoptSlot")


@dataclass
class SimResult:
    outputs: dict[str, list[tuple[Any, Any]]]
    complete: bool
    stats: SimStats
    trace_hash: str
    trace: list[str]
    events: list[HistoryEvent]  # the run's history (ftctl.kernel.history)
    end_time: float
    # When sinks emitted (not staged) output, in order, once per instant.
    output_times: list[float] = field(default_factory=list)


class SimHost:
    """Transport, time and storage of the simulation; the kernel drives the protocol."""

    def __init__(self, graph: ExecutionGraph, protocol: ProtocolSpec[Any],
                 params: ProtocolParams,
                 seed: int, schedule: FailureSchedule | None = None, trace: bool = False,
                 hash_trace: bool = False,
                 max_events: int | Literal["default"] | None = "default",
                 cluster: SimCluster | None = None, hang_timeout: float = HANG_TIMEOUT):
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
        self.now = 0.0
        self.history = History("sim", lambda: self.now)
        self.events: list[HistoryEvent] = self.history.events
        self.heap: list[tuple[float, int, str, Any]] = []
        self.capacity_moved = False  # a node left or returned: plan when the instant ends
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
        self.instance_logic, coordinator_logic = protocol.instance, protocol.coordinator
        self.outputs = Outputs(self.sinks)
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
        # Non-crash faults: empty in a crash-only run, which then takes no new code path.
        self.hang_timeout = hang_timeout
        self.gates: dict[str, _Gate] = {}  # unit id -> its gate, while a fault holds it
        self.links: dict[int, _Link] = {}  # fault id -> channel fault under way
        self.fault_ids = 0
        self.fenced = _Fenced(self.stats.zombie_actions)
        # Scenario triggers: called after each detection, and at the first Persist of
        # each snapshot id (the Spark host's "snapshot in progress" rule).
        self.on_detected: list[Callable[[], object]] = []
        # Called with a phase's name when DeclarePhase opens it and no key of it was open.
        self.on_phase: list[Callable[[str], object]] = []
        self.open_phases: dict[str, set[int | None]] = {}
        self.on_snapshot: list[Callable[[], object]] = []
        self.snapshots_seen: set[int] = set()
        # Lifecycle records (ftctl/kernel/lifecycle.py): start groups pushed but not yet
        # started, each source's furthest offset, and when sinks made output visible.
        self.lifecycle = self.kernel.lifecycle
        self.lifecycle.digits = 6  # simulated times are milliseconds
        self.starting = 0
        self.offsets: dict[str, int] = {}
        self.output_times: list[float] = []

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

    def _log(self, kind: str, *, instance: str | None = None,
             incarnation: int | None = None, fault: str | None = None,
             caused_by: int | None = None, **data: Any) -> HistoryEvent:
        ev = self.history.write(kind, instance=instance, incarnation=incarnation,
                                fault=fault, caused_by=caused_by, **data)
        self._note(f"EVENT {kind} {instance} {sorted(data.items())}")
        return ev

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
            self._settle_capacity()
            while strikes and self.stats.events >= strikes[0].at_event:
                self.inject(strikes.popleft())
                self._settle_capacity()
            if self.max_events is not None and self.stats.events > self.max_events:
                break
        complete = self.kernel.finished()
        self._log("run-finished", complete=complete, seconds=round(self.now, 4))
        return SimResult(self.sinks.by_operator(), complete, self.stats,
                         self.hasher.hexdigest() if self.hasher else "", self.trace,
                         self.events, self.now, self.output_times)

    # ------------------------------------------------------------------ events

    def _live(self, iid: str, inc: int) -> Unit | None:
        unit = self.live.get(iid)
        return unit if unit is not None and unit.inc == inc else None

    def _on_step(self, data: tuple[str, int]) -> None:
        iid, inc = data
        unit = self._live(iid, inc)
        if unit is None:
            return
        if self.gates and self._held(unit, "step", None):
            return
        self._do_step(unit, None)

    def _do_step(self, unit: Unit, _: None) -> None:
        acts = unit.handle(SourceReady(unit.id, self.now), self.now)  # type: ignore[arg-type]
        self._note(f"step {unit.id} offset={unit.core.offset}")
        self.offsets[unit.id] = max(self.offsets.get(unit.id, 0), unit.core.offset)
        perform(unit, acts, self)
        free = self.now
        if self.gates:
            free = self._busy(unit, self.step_dt)
        if unit.logic.more_to_produce(unit.id):  # type: ignore[arg-type]
            jitter = self.step_dt * (0.5 + self.rng.random())
            self._push(free + jitter, "step", (unit.id, unit.inc))

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
        if self.gates and self._held(unit, "deliver", (ch, epoch, msg, dst)):
            return
        self._do_deliver(unit, (ch, epoch, msg, dst))

    def _do_deliver(self, unit: Unit, data: tuple[int, int, Message, str]) -> None:
        ch, epoch, msg, dst = data
        if epoch != self.chan_epoch[ch]:
            return  # waited while the sender died: lost with it, as in flight
        self._note(f"deliver ch{ch} {_describe(msg)} -> {dst}"
                   + ("" if unit.id == dst else f"@{unit.id}"))
        perform(unit, unit.handle(_delivered(msg, dst, ch), self.now), self)
        if self.gates:
            self._busy(unit, NET_DELAY)

    def _on_report(self, data: tuple[str, int, Msg] | tuple[str, int, Msg, str]) -> None:
        iid, inc, msg = data[0], data[1], data[2]
        if self.kernel.incarnation(iid) != inc:  # type: ignore[arg-type]
            return
        slot = data[3] if len(data) == 4 else None
        self._note(f"report {slot + '@' if slot else ''}{iid} {_report_text(msg)}")
        self._apply(self.kernel.report(iid, inc, msg, self.now, slot))

    def _on_detect(self, data: tuple[frozenset[str], int]) -> None:
        failed, crash = data
        self._log("failure-detected", caused_by=crash, instances=sorted(failed))
        self.stats.recoveries += 1
        self._apply(self.kernel.failure(failed, self.now))
        self._hooks(self.on_detected)

    def _on_fence_detect(self, data: tuple[frozenset[str], FailureCause,
                                           dict[str, str], int]) -> None:
        failed, cause, reasons, lost = data
        self._detected(failed, cause, reasons, lost)

    def _detected(self, failed: frozenset[str], cause: FailureCause,
                  reasons: dict[str, str], caused_by: int | None = None) -> None:
        self._log("failure-detected", caused_by=caused_by, instances=sorted(failed),
                  cause=cause, reasons=reasons)
        self.stats.recoveries += 1
        self._apply(self.kernel.failure(failed, self.now, cause=cause))
        self._hooks(self.on_detected)

    def _hooks(self, hooks: list[Callable[[], object]]) -> None:
        for hook in list(hooks):
            hook()

    def _on_start(self, starts: tuple[tuple[str, int], ...]) -> None:
        # A plan's instances start together: a job resumes once its replacements are deployed.
        self.starting -= 1
        begun = [self._start(iid, inc) for iid, inc in starts]
        members = [unit.id for unit, _ in begun if unit is not None]
        if members:
            where = self.cluster.where if self.cluster is not None else {}
            self._apply([self.lifecycle.running(
                members, {i: where[i] for i in sorted(members) if i in where})])
        for unit, acts in begun:
            if unit is not None:
                perform(unit, acts, self)
        self._apply(self.lifecycle.settled(self.now, not self.starting))

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
            self._log("instance-started", instance=iid, incarnation=inc, reason="restart",
                      restore=restart.restore)
            if unit.core.is_source:  # it reads again from where it restored to
                lo, _hi = self.graph.source_range(iid)
                self.lifecycle.source_restarted(iid, inc, self.offsets.get(iid, lo))
                rewound = self.lifecycle.source_resumed(iid, inc, unit.core.offset)
                self._apply([rewound] if rewound is not None else [])
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
        if self.gates and self._held(unit, "control", (msg, slot)):
            return
        self._do_control(unit, (msg, slot))

    def _do_control(self, unit: Unit, data: tuple[Msg, str | None]) -> None:
        msg, slot = data
        perform(unit, unit.handle(ControlIn(msg, slot), self.now), self)  # type: ignore[arg-type]
        if self.gates:
            self._busy(unit, NET_DELAY)

    def _on_rollback(self, c: RollBackUnit) -> None:
        """A ``RollBack`` reaches its unit, in order with the controls sent before it."""
        unit = self._live(c.instance, c.incarnation)
        if unit is None:
            return  # lost meanwhile: the coordinator hears of its failure instead
        if self.gates and self._held(unit, "rollback", c):
            return
        self._do_rollback(unit, c)

    def _do_rollback(self, unit: Unit, c: RollBackUnit) -> None:
        # What is in flight on its channels, both ways, is lost: it belongs to the state
        # being undone (a receiver keeps only what it already handled).
        for ch in self._touching(c.instance):
            self.queues[ch].clear()
            self.chan_epoch[ch] += 1
        self.stats.rollbacks += 1
        self._note(f"rollback {c.instance} to={c.event.to}")
        slot = c.event.slot
        # A source whose steps had stopped (it had produced everything) steps again.
        idle = unit.core.is_source and not unit.logic.more_to_produce(slot)
        perform(unit, unit.handle(c.event, self.now), self)
        if idle and unit.logic.more_to_produce(slot):
            self._push(self.now + self.step_dt * self.rng.random(), "step", (unit.id, unit.inc))
        if self.gates:
            self._busy(unit, NET_DELAY)

    def _on_timer(self, data: tuple[str, int, str, int]) -> None:
        iid, inc, key, token = data
        unit = self._live(iid, inc)
        if unit is None or self.timers.get((iid, key)) != token:
            return
        if self.gates and self._held(unit, "timer", (key, token)):
            return
        self._do_timer(unit, (key, token))

    def _do_timer(self, unit: Unit, data: tuple[str, int]) -> None:
        key, token = data
        if self.timers.get((unit.id, key)) != token:
            return  # replaced or cancelled while it waited
        del self.timers[(unit.id, key)]
        perform(unit, unit.handle(TimerFired(key, self.now), self.now), self)
        if self.gates:
            self._busy(unit, NET_DELAY)

    def _on_peer(self, data: tuple[str, int, str, Msg, str]) -> None:
        dest, inc, sender, msg, to = data
        unit = self._live(dest, inc)
        if unit is None:
            return  # lost with its receiver
        if self.gates and self._held(unit, "peer", (sender, msg, to)):
            return
        self._do_peer(unit, (sender, msg, to))

    def _do_peer(self, unit: Unit, data: tuple[str, Msg, str]) -> None:
        sender, msg, to = data
        perform(unit, unit.handle(PeerIn(sender, msg, to), self.now), self)  # type: ignore[arg-type]
        if self.gates:
            self._busy(unit, NET_DELAY)

    def _on_coordinator_timer(self, data: tuple[str, int]) -> None:
        key, token = data
        self._apply(self.kernel.timer_fired(key, token, self.now))

    # ------------------------------------------------------------------ failures

    def _strike(self, strike: Any) -> None:
        alive = sorted(self.live)
        if strike.targets:
            victims = [t for t in strike.targets if t in self.live]
            for t in strike.targets:
                if t not in self.live:
                    self.skip_fault("crash", t, self._not_running(t))
        else:
            victims = self.rng.sample(alive, min(strike.count, len(alive)))
            if not victims:
                self.skip_fault("crash", None, "no live instance")
        if self.spared:
            victims = self._spare(victims)
        if not victims:
            return
        self.stats.injected += 1
        self.stats.failures += 1
        self.stats.failed_instances.extend(victims)
        crash = self._log("fault-injected", type="crash", instances=sorted(victims),
                          at_event=self.stats.events)
        for v in victims:
            self.kernel.lost(v)
            self._kill(v)
        detect = self.now + 0.002 + 0.004 * self.rng.random()
        self._push(detect, "detect", (frozenset(victims), crash.seq))

    # ------------------------------------------------------------------ other fault kinds

    def inject(self, fault: SimFault) -> None:
        """Strike with ``fault`` now (a schedule's, a scenario's or a test's)."""
        if isinstance(fault, Strike):
            self._strike(fault)
        elif isinstance(fault, Pause):
            self._pause(fault)
        elif isinstance(fault, Slow):
            self._slow(fault)
        elif isinstance(fault, Partition | Delay | Drop):
            self._link_fault(fault)
        elif isinstance(fault, NodeLoss):
            self._node_loss(fault)
        else:
            raise TypeError(f"not a fault: {fault!r}")

    def skip_fault(self, kind: str, target: str | None, reason: str) -> None:
        self.stats.skipped += 1
        self._log("fault-skipped", type=kind, target=target, reason=reason,
                  at_event=self.stats.events)

    def _not_running(self, iid: str) -> str:
        if iid not in self.kernel.inc:
            return f"no instance {iid}"
        status = self.kernel.status(iid)  # type: ignore[arg-type]
        return f"{iid} is restarting" if status == "pending" else f"{iid} is not running"

    def _target(self, kind: str, target: str | None) -> Unit | None:
        """The live unit a fault strikes (drawn when ``target`` is None); None: skipped."""
        if target is None:
            if not self.live:
                self.skip_fault(kind, None, "no live instance")
                return None
            return self.live[self.rng.choice(sorted(self.live))]
        unit = self.live.get(target)
        if unit is None:
            self.skip_fault(kind, target, self._not_running(target))
        return unit

    def fault_injected(self, kind: str, target: str, duration: float | None,
                  **data: Any) -> int:
        self.fault_ids += 1
        self.stats.injected += 1
        self._log("fault-injected", fault=str(self.fault_ids), type=kind, target=target,
                  duration=None if duration is None else round(duration, 6), **data)
        return self.fault_ids

    def fault_healed(self, fid: int, kind: str, target: str) -> None:
        self._log("fault-healed", fault=str(fid), type=kind, target=target)

    def _gate(self, unit: Unit) -> _Gate:
        gate = self.gates.get(unit.id)
        if gate is None or gate.unit is not unit:
            gate = self.gates[unit.id] = _Gate(unit)
        return gate

    def _pause(self, f: Pause) -> None:
        unit = self._target("pause", f.target)
        if unit is None:
            return
        fid = self.fault_injected("pause", unit.id, f.duration)
        gate = self._gate(unit)
        gate.pauses.add(fid)
        hang = self.hang_timeout if f.hang_after is None else f.hang_after
        self.at(self.now + hang, lambda: self._hang(gate, fid, hang))
        self.at(self.now + f.duration, lambda: self._resume(gate, fid))

    def _resume(self, gate: _Gate, fid: int) -> None:
        gate.pauses.discard(fid)
        self.fault_healed(fid, "pause", gate.unit.id)
        if gate.pauses:
            return
        if self.live.get(gate.unit.id) is gate.unit:
            self._drain(gate)
        elif gate.zombie:
            self._zombie(gate)

    def _hang(self, gate: _Gate, fid: int, after: float) -> None:
        """The pause ``fid`` is still on after the hang timeout: the unit is declared
        failed, as the Spark host does with a task whose heartbeats stopped."""
        unit = gate.unit
        if fid not in gate.pauses or self.live.get(unit.id) is not unit:
            return
        if self.spared and not self._spare([unit.id], "pause"):
            return  # the protocol's fault model keeps it: it resumes when the pause ends
        self.kernel.lost(unit.id)
        self._kill(unit.id, crashed=False)
        self.stats.failures += 1
        self.stats.failed_instances.append(unit.id)
        self._detected(frozenset({unit.id}), "heartbeat",
                       {unit.id: f"missed heartbeats (paused {after:g} s)"})

    def _zombie(self, gate: _Gate) -> None:
        """A fenced unit resumes: it handles what waited for it; nothing it does counts."""
        unit, handled = gate.unit, 0
        before = sum(self.stats.zombie_actions.values())
        while gate.backlog:
            kind, data = gate.backlog.popleft()
            ev = _zombie_event(unit, kind, data, self.now)
            if ev is not None:
                handled += 1
                perform(unit, unit.handle(ev, self.now), self.fenced)
        self._log("zombie-fenced", instance=unit.id, incarnation=unit.inc, events=handled,
                  dropped=sum(self.stats.zombie_actions.values()) - before)

    def _slow(self, f: Slow) -> None:
        unit = self._target("slow", f.target)
        if unit is None:
            return
        fid = self.fault_injected("slow", unit.id, f.duration, factor=round(f.factor, 3))
        gate = self._gate(unit)
        gate.slows[fid] = f.factor

        def heal() -> None:
            gate.slows.pop(fid, None)
            self.fault_healed(fid, "slow", unit.id)
            self._retire(gate)

        self.at(self.now + f.duration, heal)

    def _held(self, unit: Unit, kind: str, data: Any) -> bool:
        """Whether the event for ``unit`` must wait (paused, busy, or others wait)."""
        gate = self.gates.get(unit.id)
        if gate is None or gate.unit is not unit:
            return False
        if not gate.backlog and not gate.pauses and gate.busy_until <= self.now:
            return False
        gate.backlog.append((kind, data))
        self._wake_later(gate)
        return True

    def _busy(self, unit: Unit, cost: float) -> float:
        """A slow unit handled an event costing ``cost``: when it is free again."""
        gate = self.gates.get(unit.id)
        if gate is None or gate.unit is not unit or not gate.slows:
            return self.now
        gate.busy_until = self.now + (gate.factor - 1.0) * cost
        return gate.busy_until

    def _wake_later(self, gate: _Gate) -> None:
        if not gate.pauses and not gate.waking:
            gate.waking = True
            self._push(max(self.now, gate.busy_until), "wake", gate)

    def _on_wake(self, gate: _Gate) -> None:
        gate.waking = False
        self._drain(gate)

    def _drain(self, gate: _Gate) -> None:
        """Hand a free unit what waited for it, in order, while it stays free."""
        unit = gate.unit
        while gate.backlog:
            if self.live.get(unit.id) is not unit:
                gate.backlog.clear()
                return
            if gate.pauses:
                return
            if gate.busy_until > self.now:
                self._wake_later(gate)
                return
            kind, data = gate.backlog.popleft()
            getattr(self, "_do_" + kind)(unit, data)
        self._retire(gate)

    def _retire(self, gate: _Gate) -> None:
        if (not gate.pauses and not gate.slows and not gate.backlog
                and self.gates.get(gate.unit.id) is gate):
            del self.gates[gate.unit.id]

    def _link_fault(self, f: Partition | Delay | Drop) -> None:
        kind = cast(Literal["partition", "delay", "drop"], type(f).__name__.lower())
        unit = self._target(kind, f.target)
        if unit is None:
            return
        peers: frozenset[str] | None = frozenset(f.peers) if f.peers else None
        if isinstance(f, Partition) and peers is None and f.draw_peer:
            near = sorted(set(self.graph.upstream(unit.id)) | set(self.graph.downstream(unit.id)))
            if near:
                peers = frozenset({self.rng.choice(near)})
        link = _Link(kind, unit.id, peers, not isinstance(f, Delay) or f.both_ways,
                     random.Random(self.rng.getrandbits(32)))
        data: dict[str, Any] = {"peers": sorted(peers) if peers else "all"}
        if isinstance(f, Delay):
            link.extra, link.jitter = f.extra, f.jitter
            data["extra"] = round(f.extra, 6)
        elif isinstance(f, Drop):
            link.probability = data["probability"] = f.probability
        fid = self.fault_injected(kind, unit.id, f.duration, **data)
        self.links[fid] = link

        def heal() -> None:
            del self.links[fid]
            self.fault_healed(fid, kind, unit.id)

        self.at(self.now + f.duration, heal)

    def _through_links(self, src: str, dst: str, unit: str | None = None) -> float | None:
        """The extra delay channel faults put on a message from ``src`` to slot ``dst``
        (hosted by ``unit``); None: it is lost, and its receiver fenced."""
        extra = 0.0
        for link in self.links.values():
            if not link.hits(src, dst):
                continue
            if link.kind == "delay":
                extra += link.extra + link.jitter * link.rng.random()
            elif link.kind == "partition" or link.rng.random() < link.probability:
                to = unit or (self.routing.unit_of(dst) if self.routing.moved else dst)
                if self._frame_lost(src, to):
                    return None
        return extra

    def _frame_lost(self, src: str, to: str) -> bool:
        """A message from ``src`` to the live unit ``to`` is lost: channels are reliable
        while both ends live, so ``to`` is fenced as failed (Spark: "frame(s) lost to a
        channel fault"). False when the protocol's fault model spares it: then the
        message goes through."""
        if to not in self.live:
            return True  # lost with its receiver anyway
        if self.spared and not self._spare([to], "frame-lost"):
            return False
        self.kernel.lost(to)
        self._kill(to, crashed=False)
        self.stats.failures += 1
        self.stats.failed_instances.append(to)
        lost = self._log("frame-lost", instance=to, sender=src)
        detect = self.now + 0.002 + 0.004 * self.rng.random()
        self._push(detect, "fence_detect", (frozenset({to}), "heartbeat",
                                            {to: f"frame(s) from {src} lost to a channel "
                                                 "fault"}, lost.seq))
        return True

    def _node_loss(self, f: NodeLoss) -> None:
        if self.cluster is None:
            self.skip_fault("node", f.node, "no cluster (SimHost without nodes)")
            return
        up = [n.id for n in self.cluster.nodes.values() if n.alive]
        if self.spared:  # the protocol's fault model keeps one unit of each group up
            up = [n for n in up if not self._empties_group(self.cluster.on(n))]
        node = f.node if f.node is not None else (self.rng.choice(up) if up else None)
        if node is None or node not in up:
            why = ("no live node" if node is None and not self.spared
                   else "no live node whose loss leaves a unit of each group up"
                   if node is None else f"{node} is down or holds a group's last units")
            self.skip_fault("node", node, why)
            return
        fid = self.fault_injected("node", node, f.down_for)
        self.node_down(node)

        def heal() -> None:
            self.node_up(node)
            self.fault_healed(fid, "node", node)

        self.at(self.now + f.down_for, heal)

    # ------------------------------------------------------------------ nodes

    def at(self, t: float, fn: Callable[[], object]) -> None:
        """Call ``fn`` at simulated time ``t`` (scenario faults: node_down, node_up)."""
        self._push(t, "call", fn)

    def _on_call(self, fn: Callable[[], object]) -> None:
        fn()

    def node_down(self, node: str) -> list[str]:
        """``node`` leaves: every unit placed on it dies (as ``_kill``), its slots go; the
        coordinator hears ``CapacityChanged`` at the end of this instant (with every other
        node that leaves or returns in it) and the failure after a detection delay."""
        assert self.cluster is not None, "node_down needs a SimHost with a cluster"
        victims = self.cluster.down(node)
        down = self._log("node-down", node=node, instances=victims)
        for v in victims:
            self.kernel.lost(v)
            self._kill(v)
        if victims:
            self.stats.failures += 1
            self.stats.failed_instances.extend(victims)
            detect = self.now + 0.002 + 0.004 * self.rng.random()
            self._push(detect, "node_detect", (frozenset(victims), frozenset({node}), down.seq))
        self.capacity_moved = True
        return victims

    def node_up(self, node: str) -> None:
        """``node`` (or its replacement, same labels) is back with all its slots free."""
        assert self.cluster is not None, "node_up needs a SimHost with a cluster"
        self.cluster.up(node)
        self._log("node-up", node=node)
        self.capacity_moved = True

    def _settle_capacity(self) -> None:
        """Once the nodes that leave or return at this instant all have: the coordinator
        hears ``CapacityChanged`` once, and plans once for them together."""
        if self.capacity_moved and (not self.heap or self.heap[0][0] > self.now):
            self.capacity_moved = False
            self._apply(self.kernel.capacity_changed(self.now))

    def _on_node_detect(self, data: tuple[frozenset[str], frozenset[str], int]) -> None:
        failed, nodes, down = data
        self._log("failure-detected", caused_by=down, instances=sorted(failed),
                  nodes=sorted(nodes))
        self.stats.recoveries += 1
        self._apply(self.kernel.failure(failed, self.now, nodes=nodes))

    def _empties_group(self, victims: list[str]) -> bool:
        """Whether losing ``victims`` leaves a group of ``spared`` with no unit up."""
        lost = set(victims)
        return any(lost & group and not any(u in self.live and u not in lost for u in group)
                   for group in self.spared)

    def _spare(self, victims: list[str], kind: str = "crash") -> list[str]:
        """The protocol's fault model (``ProtocolSpec.spared``): keep one unit of each
        group up; the victims that would have emptied a group are skipped."""
        kept = list(victims)
        for group in self.spared:
            hit = sorted(v for v in kept if v in group)
            if hit and not any(u in self.live and u not in kept for u in group):
                kept.remove(hit[-1])  # it stays up
        if len(kept) < len(victims):
            self._log("fault-skipped", type=kind,
                      instances=sorted(set(victims) - set(kept)),
                      reason="would leave no unit of its group up")
        return kept

    def _kill(self, iid: str, crashed: bool = True) -> None:
        """``iid``'s unit is gone: crashed (its memory lost), or fenced (``crashed`` False:
        the process lives on; a paused one is a zombie when it resumes)."""
        unit = self.live.pop(iid, None)
        if self.gates:
            gate = self.gates.get(iid)
            if gate is not None and gate.unit is unit:
                del self.gates[iid]
                gate.zombie = not crashed and bool(gate.pauses)
                if not gate.zombie:
                    gate.backlog.clear()
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
            self.stats.piggyback.observe(ch, msg)
            self.stats.kinds["data", *self.chan_ops[ch]] += 1
        else:
            self.stats.kinds[msg.kind, *self.chan_ops[ch]] += 1  # type: ignore[union-attr]
        t = self.now + NET_DELAY * (0.2 + 2 * self.rng.random())
        t += self._transfer(self.graph.channels[ch].src, msg)
        if self.links:
            c = self.graph.channels[ch]
            extra = self._through_links(c.src, c.dst)
            if extra is None:
                return  # lost to a channel fault (its receiver is fenced)
            t += extra
        t = max(self.last_delivery[ch], t)
        self.last_delivery[ch] = t
        self.queues[ch].append(msg)
        dst = self.graph.channels[ch].dst
        to = self.routing.unit_of(dst) if self.routing.moved else dst
        if to == dst and to in self.live:
            self._push(t, "deliver", (ch, self.chan_epoch[ch]))
        else:  # the route is resolved now: a unit that dies meanwhile loses it, and one
            # not running now (dead, its replacement not started) never gets it: a
            # replacement that starts before a slow message arrives must not see it
            unit = self.live.get(to)
            self._push(t, "deliver", (ch, self.chan_epoch[ch], to, unit.inc if unit else -1))

    def emit(self, slot: str, records: Sequence[tuple[Any, Any]],
             uids: Sequence[Any] | None = None) -> None:
        self.sinks.append(slot, list(records), uids)
        if records and (not self.output_times or self.output_times[-1] != self.now):
            self.output_times.append(self.now)

    def stage(self, slot: str, epoch: int, records: Sequence[tuple[Any, Any]]) -> None:
        self.outputs.stage(slot, epoch, records)

    def persist(self, slot: str, ref: int, blob: Any) -> None:
        self.store.put(ref, slot, blob)
        self.stats.persists += 1
        if self.on_snapshot and isinstance(ref, int) and ref not in self.snapshots_seen:
            self.snapshots_seen.add(ref)
            # after the unit's actions: a fault must not strike it halfway through them
            self.at(self.now, lambda: self._hooks(self.on_snapshot))

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
        t += self._transfer(sender, msg)
        if self.links:
            extra = self._through_links(sender, to, dest)
            if extra is None:
                return
            t += extra
        t = max(t, self.last_peer.get((sender, dest), 0.0))
        self.last_peer[sender, dest] = t
        self._push(t, "peer", (dest, receiver.inc, sender, msg, to))

    def _transfer(self, sender: str, msg: Any) -> float:
        """Seconds ``msg`` from slot ``sender`` spends on the wire beyond NET_DELAY's draw.
        None here (every message costs the same); ``ftctl/sim/wire.py`` models bandwidth."""
        return 0.0

    def set_timer(self, unit: Unit, key: str, after: float) -> None:
        # Timers die with their incarnation; a newer token replaces a pending timer.
        self.timer_seq += 1
        self.timers[(unit.id, key)] = self.timer_seq
        self._push(self.now + after, "timer", (unit.id, unit.inc, key, self.timer_seq))

    def cancel_timer(self, unit: Unit, key: str) -> None:
        self.timers.pop((unit.id, key), None)

    def note(self, kind: str, data: Mapping[str, Any]) -> None:
        self._log("protocol", name=kind, data=dict(data))

    def phase(self, phase: str, on: bool, key: int | None) -> None:
        self._log("phase-entered" if on else "phase-left", phase=phase, key=key)
        keys = self.open_phases.setdefault(phase, set())
        entered = on and not keys
        (keys.add if on else keys.discard)(key)
        if entered and self.on_phase:
            # after the unit's actions, as for on_snapshot
            self.at(self.now, lambda: [hook(phase) for hook in list(self.on_phase)])

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

    def _apply(self, cmds: Sequence[HostCommand]) -> None:
        for c in cmds:
            if isinstance(c, Fence):
                for iid in c.instances:
                    self._kill(iid, crashed=False)
                self._note(f"stop {list(c.instances)}")
            elif isinstance(c, StartGroup):
                delay = 0.001 + 0.004 * self.rng.random() if self.now > 0 else 0.0
                self.starting += 1
                self._push(self.now + delay, "start", c.starts)
            elif isinstance(c, SendControl):
                if c.slot is None:
                    self._push(self.now + 0.0002, "control", (c.instance, c.incarnation, c.msg))
                else:
                    self._push(self.now + 0.0002, "control",
                               (c.instance, c.incarnation, c.msg, c.slot))
            elif isinstance(c, RollBackUnit):
                self._push(self.now + 0.0002, "rollback", c)  # as a control travels
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


def _delivered(msg: Message, dst: str, ch: int) -> InstanceEvent:
    if type(msg) is Batch:
        return BatchIn(dst, ch, msg)  # type: ignore[arg-type]
    return MarkerIn(dst, ch, msg)  # type: ignore[arg-type]


def _zombie_event(unit: Unit, kind: str, data: Any, now: float) -> InstanceEvent | None:
    """What a zombie handles for an event that waited for it."""
    if kind == "step":
        return SourceReady(unit.id, now)  # type: ignore[arg-type]
    if kind == "deliver":
        ch, _epoch, msg, dst = data
        return _delivered(msg, dst, ch)
    if kind == "control":
        return ControlIn(data[0], data[1])
    if kind == "timer":
        return TimerFired(data[0], now)
    if kind == "peer":
        return PeerIn(data[0], data[1], data[2])
    if kind == "rollback":
        return cast(RollBackUnit, data).event
    return None


def _describe(msg: Message) -> str:
    if type(msg) is Batch:
        return f"batch#{msg.seq}({len(msg.records)})"
    return f"{msg.kind}:{msg.id}"  # type: ignore[union-attr]
