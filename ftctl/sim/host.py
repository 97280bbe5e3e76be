"""Runs a topology under a protocol in simulated time, with seeded interleavings and crashes.

Every source step, message delivery, report to the coordinator, failure detection and
instance start is an event on one heap ordered by simulated time. Network delays are
random per message but FIFO per channel (as over TCP). A crash kills an instance's
memory and everything in flight to or from it; the coordinator hears of it after a
detection delay and answers with a plan that the host carries out. Same seed, same trace.

Which fault strikes when is the trigger engine's (``ftctl/sim/nemesis.py``: scenarios,
random schedules, the kit's phase strike); faults enter through ``SimHost.inject``
(``ftctl/sim/striking.py``); the kinds besides
crashes live in ``unit_faults.py`` (pause, slow), ``link_faults.py`` (partition, delay,
drop) and ``node_faults.py`` (node loss, capacity), and what a unit's actions do in
``ports.py``: the bases of ``SimHost``.
"""

from __future__ import annotations

import hashlib
import heapq
import random
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

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
from ftctl.kernel.unit import Unit, perform
from ftctl.runtime.graph import ExecutionGraph
from ftctl.runtime.messages import Batch, Message
from ftctl.sim.cluster import ClusterSlots, SimCluster
from ftctl.sim.correlated import CorrelatedFaults
from ftctl.sim.faults import HANG_TIMEOUT, NET_DELAY, FailureSchedule
from ftctl.sim.gcpolicy import CHECK_EVERY, PausedCollection
from ftctl.sim.link_faults import Link, LinkFaults
from ftctl.sim.nemesis import SimNemesis, drawn_faults, on_progress
from ftctl.sim.ports import UnitPorts
from ftctl.sim.stats import SimStats
from ftctl.sim.store_faults import STORE_RETRY, StoreFaults
from ftctl.sim.unit_faults import FencedPorts, Gate, UnitFaults, delivered
from ftctl.store import MemoryStore, SinkStore
from protocols.contract.events import (
    ControlIn,
    FailureCause,
    PeerIn,
    SourceReady,
    TimerFired,
)
from protocols.contract.messages import Msg
from protocols.contract.params import ProtocolParams
from protocols.contract.spec import ProtocolSpec
from protocols.contract.view import GraphView

# Simulated-time constants (seconds). Small, so runs are short; their ratios are what matter.
# NET_DELAY (a message's nominal latency) and HANG_TIMEOUT live in ftctl/sim/faults.py.
STEP = 0.001  # between source batches when the topology runs as fast as possible
# A paced source's batches further apart than this leave the run idle in between: a
# batch has crossed the graph (a few NET_DELAYs a hop) long before, and only timers
# (pings, snapshots) run. Each costs wall time, so a slow input.rate made a schedule
# cost as much as its simulated seconds; ``ftctl sim``'s runs (``Simulator``) shorten
# the gap to this. Hosts built without ``max_step`` keep the paced clock: figures
# measure latency on it.
MAX_STEP = 0.05
MAX_EVENTS = 2_000_000  # a schedule that livelocks ends here (the golden run has no cap)










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
    # Why the protocol stopped the run (``StopRun``: a stored object it could not trust).
    stopped: str | None = None


class SimHost(UnitPorts, UnitFaults, LinkFaults, CorrelatedFaults, StoreFaults):
    """Transport, time and storage of the simulation; the kernel drives the protocol."""

    def __init__(self, graph: ExecutionGraph, protocol: ProtocolSpec[Any],
                 params: ProtocolParams,
                 seed: int, schedule: FailureSchedule | None = None, trace: bool = False,
                 hash_trace: bool = False,
                 max_events: int | Literal["default"] | None = "default",
                 cluster: SimCluster | None = None, hang_timeout: float = HANG_TIMEOUT,
                 max_step: float | None = None):
        self.graph = graph
        # None: no cap (a fault-free run always ends); read late so tests can lower it.
        self.max_events = MAX_EVENTS if max_events == "default" else max_events
        self.info = protocol
        self.params = params
        self.rng = random.Random(seed)
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
        self.timer_due: dict[tuple[str, str], tuple[int, float]] = {}  # -> (inc, unit clock)
        self.store = MemoryStore()
        self.restores_read: set[tuple[tuple[str, int], ...]] = set()  # store-slow waits
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
        self.step_dt = source_step(graph.topology, max_step)
        self.routing = self.kernel.routing
        self.op_of = {iid: spec.op for iid, spec in graph.instances.items()}
        self.chan_ops = [(self.op_of[c.src], self.op_of[c.dst]) for c in graph.channels]
        self.last_peer: dict[tuple[str, str], float] = {}  # FIFO per (sender, receiver)
        spared = getattr(protocol, "spared", None)
        self.spared: tuple[frozenset[str], ...] = (spared(GraphView(graph)) if spared
                                                   else ())
        self.unsettled: tuple[str, ...] = tuple(getattr(protocol, "unsettled", ()) or ())
        # Non-crash faults: empty in a crash-only run, which then takes no new code path.
        self.hang_timeout = hang_timeout
        self.gates: dict[str, Gate] = {}  # unit id -> its gate, while a fault holds it
        self.links: dict[int, Link] = {}  # fault id -> channel fault under way
        self.fault_ids = 0
        self.fenced = FencedPorts(self.stats.zombie_actions)
        # Scenario triggers: called after each detection, and at the first Persist of
        # each snapshot id (the Spark host's "snapshot in progress" rule).
        self.on_detected: list[Callable[[], object]] = []
        # Called with a phase's name when DeclarePhase opens it and no occurrence of it
        # was open (the kernel's phase set, ``kernel.open_phases``).
        self.on_phase: list[Callable[[str], object]] = []
        self.on_restart: list[Callable[[str], object]] = []  # correlated faults' follow-ups
        self.openings_seen: dict[str, int] = {}
        # Lifecycle records (ftctl/kernel/lifecycle.py): start groups pushed but not yet
        # started, each source's furthest offset, and when sinks made output visible.
        self.lifecycle = self.kernel.lifecycle
        self.lifecycle.digits = 6  # simulated times are milliseconds
        self.starting = 0
        self.offsets: dict[str, int] = {}
        self.output_times: list[float] = []
        # The nemesis's progress trigger (``ftctl/sim/nemesis.py``): once this many events
        # are processed, ``on_progress(events)`` strikes what is due and says what is next.
        self.progress_due: int | None = None
        self.on_progress: Callable[[int], int | None] = lambda events: None
        if schedule is not None and schedule.strikes:  # a schedule of its own (tests)
            drawn = drawn_faults(schedule.strikes)
            SimNemesis(self, on_progress(drawn), drawn=drawn).install()

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
        if self.hasher is not None:
            self._note(f"EVENT {kind} {instance} {sorted(data.items())}")
        return ev

    # ------------------------------------------------------------------ run

    def run(self) -> SimResult:
        with PausedCollection() as collection:  # ftctl/sim/gcpolicy.py
            self._run(collection)
        complete = self.kernel.finished()
        self._log("run-finished", complete=complete, seconds=round(self.now, 4))
        return SimResult(self.sinks.by_operator(), complete, self.stats,
                         self.hasher.hexdigest() if self.hasher else "", self.trace,
                         self.events, self.now, self.output_times, self.kernel.halted)

    def release(self) -> None:
        """Drop the run's units and visible output once its result is taken (``run``
        copies the output). The host is full of cycles, so it waits for the collection
        after its schedule; what it holds, dropped first, is freed by reference counting
        instead of walked by that collection (a Nexmark sink's million counts and
        records: a tenth of a schedule; the store's parts hold as many)."""
        self.live.clear()
        self.sinks.visible.clear()
        self.store.clear()

    def _run(self, collection: PausedCollection) -> None:
        self._apply(self.kernel.start(self.now))
        heap = self.heap
        stats = self.stats
        while heap:
            t, _, kind, data = heapq.heappop(heap)
            self.now = t
            stats.events += 1
            getattr(self, "_on_" + kind)(data)
            self._settle_capacity()
            if self.progress_due is not None and stats.events >= self.progress_due:
                self.progress_due = self.on_progress(stats.events)
            if self.max_events is not None and stats.events > self.max_events:
                break
            if self.kernel.halted is not None:
                break  # the protocol stopped the run (StopRun)
            if not stats.events % CHECK_EVERY:
                collection.check()

    def watch_progress(self, due: int, then: Callable[[int], int | None]) -> None:
        """Call ``then(events)`` once ``due`` events are processed (after the event and
        its capacity settled); it returns the next count to wait for, or None."""
        self.progress_due, self.on_progress = due, then

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
        if self.hasher is not None:  # (the text costs more than a step of a small batch)
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
        if self.hasher is not None:  # a trace's text only when one is kept or hashed
            self._note(f"deliver ch{ch} {_describe(msg)} -> {dst}"
                       + ("" if unit.id == dst else f"@{unit.id}"))
        perform(unit, unit.handle(delivered(msg, dst, ch), self.now), self)
        if self.gates:
            self._busy(unit, NET_DELAY)

    def _on_report(self, data: tuple[str, int, Msg] | tuple[str, int, Msg, str]) -> None:
        iid, inc, msg = data[0], data[1], data[2]
        if self.kernel.incarnation(iid) != inc:  # type: ignore[arg-type]
            return
        slot = data[3] if len(data) == 4 else None
        if self.hasher is not None:
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

    def _opened(self, phase: str) -> None:
        """A phase-entered record: the phase was opened anew if its openings grew."""
        opened = self.kernel.open_phases.openings.get(phase, 0)
        if opened > self.openings_seen.get(phase, 0):
            self.openings_seen[phase] = opened
            self._phase_opened(phase)

    def _hooks(self, hooks: list[Callable[[], object]]) -> None:
        for hook in list(hooks):
            hook()

    def _on_start(self, starts: tuple[tuple[str, int], ...]) -> None:
        # A plan's instances start together: a job resumes once its replacements are deployed.
        if self.store.unavailable:  # their restores cannot be read yet: try again later
            self._note(f"start waits for the store {[i for i, _ in starts]}")
            self._push(self.now + STORE_RETRY, "start", starts)
            return
        wait = self.restore_wait(starts)
        if wait:  # a slow store: the restores take that long to read
            self._note(f"start reads a slow store {[i for i, _ in starts]}")
            self._push(self.now + wait, "start", starts)
            return
        bad = self.kernel.unreadable(starts)
        if bad is not None:  # the group starts whole or not at all; the protocol re-plans
            self.starting -= 1
            self._apply(self.kernel.store_fault(bad, starts, self.now))
            self._apply(self.lifecycle.settled(self.now, not self.starting))
            return
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
            for hook in list(self.on_restart):
                hook(iid)
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

    # ------------------------------------------------------------------ failures and nodes

    def at(self, t: float, fn: Callable[[], object]) -> None:
        """Call ``fn`` at simulated time ``t`` (scenario faults: node_down, node_up)."""
        self._push(t, "call", fn)

    def _on_call(self, fn: Callable[[], object]) -> None:
        fn()

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
                if c.kind == "phase-entered":
                    self._opened(str(c.data["phase"]))
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


def source_step(topology: Topology, max_step: float | None = None) -> float:
    """Simulated seconds between two batches of one source: the pace, idle time beyond
    ``max_step`` (when given) skipped."""
    rate = topology.input.rate
    if not rate:
        return STEP
    step = topology.input.batch / rate
    return step if max_step is None else min(step, max_step)




def _describe(msg: Message) -> str:
    if type(msg) is Batch:
        return f"batch#{msg.seq}({len(msg.records)})"
    return f"{msg.kind}:{msg.id}"  # type: ignore[union-attr]
