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
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Literal

from ftctl.config.topology import Topology
from ftctl.runtime.actions import Emit, Persist, Report, Send
from ftctl.runtime.graph import ExecutionGraph
from ftctl.runtime.instance import InstanceCore
from ftctl.runtime.messages import Batch, Message
from ftctl.sim.faults import FailureSchedule
from ftctl.store import MemoryStore, SinkStore, SnapshotStore, start_blob
from protocols.base import (
    Commit,
    Control,
    CoordinatorProtocol,
    Discard,
    Event,
    InstanceProtocol,
    PlanStep,
    ProtocolInfo,
    Start,
    Stop,
)
from protocols.contract.params import ProtocolParams

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


@dataclass
class SimResult:
    outputs: dict[str, list[tuple[Any, Any]]]
    complete: bool
    stats: SimStats
    trace_hash: str
    trace: list[str]
    events: list[dict[str, Any]]
    end_time: float


class _Live:
    """A running incarnation of an instance."""

    __slots__ = ("core", "inc", "proto")

    def __init__(self, core: InstanceCore, proto: InstanceProtocol, inc: int):
        self.core, self.proto, self.inc = core, proto, inc


class SimHost:
    def __init__(self, graph: ExecutionGraph, protocol: ProtocolInfo, params: ProtocolParams,
                 seed: int, schedule: FailureSchedule | None = None, trace: bool = False,
                 hash_trace: bool = False,
                 max_events: int | Literal["default"] | None = "default"):
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
        self.live: dict[str, _Live] = {}
        self.inc = dict.fromkeys(graph.order, 0)
        n = len(graph.channels)
        self.queues: list[deque[Message]] = [deque() for _ in range(n)]
        self.chan_epoch = [0] * n
        self.last_delivery = [0.0] * n
        self.last_report: dict[str, float] = {}
        self.held_controls: dict[str, list[Any]] = {}
        self.store = MemoryStore()
        self.sinks = SinkStore()
        self.coordinator: CoordinatorProtocol = protocol.coordinator(graph, params)
        self.stats = SimStats()
        self.step_dt = source_step(graph.topology)

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
        self._apply(self.coordinator.initial_plan())
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
        complete = self.coordinator.finished()
        return SimResult(self.sinks.by_operator(), complete, self.stats,
                         self.hasher.hexdigest() if self.hasher else "", self.trace,
                         self.events, self.now)

    # ------------------------------------------------------------------ events

    def _on_step(self, data: tuple[str, int]) -> None:
        iid, inc = data
        live = self.live.get(iid)
        if live is None or live.inc != inc:
            return
        more = live.proto.on_step(self.now)
        self._note(f"step {iid} offset={live.core.offset}")
        self._perform(live)
        if more:
            jitter = self.step_dt * (0.5 + self.rng.random())
            self._push(self.now + jitter, "step", (iid, inc))

    def _on_deliver(self, data: tuple[int, int]) -> None:
        ch, epoch = data
        if epoch != self.chan_epoch[ch]:
            return
        msg = self.queues[ch].popleft()
        dst = self.graph.channels[ch].dst
        live = self.live.get(dst)
        if live is None:
            return  # the receiver is dead: the message is lost with it
        self._note(f"deliver ch{ch} {_describe(msg)} -> {dst}")
        live.proto.on_message(ch, msg)
        self._perform(live)

    def _on_report(self, data: tuple[str, int, Report]) -> None:
        iid, inc, rep = data
        if self.inc[iid] != inc:
            return  # from an incarnation that has been stopped since
        self._note(f"report {iid} {rep.kind} {rep.data}")
        self._apply(self.coordinator.on_report(iid, rep.kind, rep.data, self.now))

    def _on_detect(self, failed: frozenset[str]) -> None:
        self._log("detected", instances=sorted(failed))
        self.stats.recoveries += 1
        self._apply(self.coordinator.on_failure(set(failed), self.now))

    def _on_start(self, data: list[tuple[Start, int]]) -> None:
        # A plan's instances start together: a job resumes once its replacements are deployed.
        started = [self._start(step, inc) for step, inc in data]
        for live in started:
            if live is not None:
                self._perform(live)

    def _start(self, step: Start, inc: int) -> _Live | None:
        iid = step.instance
        if self.inc[iid] != inc or iid in self.live:
            return None  # superseded by a later stop
        blob = start_blob(self.store, iid, step.restore, step.also)
        core = InstanceCore(self.graph, iid)
        proto = self.info.instance(core, self.params, blob, step.init)
        live = _Live(core, proto, inc)
        self.live[iid] = live
        self._note(f"start {iid} restore={step.restore}")
        if inc > 0:
            self._log("restarted", instance=iid, restore=step.restore)
        for payload in self.held_controls.pop(iid, []):
            proto.on_control(payload)
        if core.is_source:
            self._push(self.now + self.step_dt * self.rng.random(), "step", (iid, inc))
        return live

    def _on_control(self, data: tuple[str, int, Any]) -> None:
        iid, inc, payload = data
        if self.inc[iid] != inc:
            return
        live = self.live.get(iid)
        if live is None:
            # Its start is still pending: the control waits for the new incarnation.
            self.held_controls.setdefault(iid, []).append(payload)
            return
        live.proto.on_control(payload)
        self._perform(live)

    # ------------------------------------------------------------------ failures

    def _strike(self, strike: Any) -> None:
        alive = sorted(self.live)
        if strike.targets:
            victims = [t for t in strike.targets if t in self.live]
        else:
            victims = self.rng.sample(alive, min(strike.count, len(alive)))
        if not victims:
            return
        self.stats.failures += 1
        self.stats.failed_instances.extend(victims)
        self._log("fault", instances=sorted(victims), at_event=self.stats.events)
        for v in victims:
            self._kill(v)
        detect = self.now + 0.002 + 0.004 * self.rng.random()
        self._push(detect, "detect", frozenset(victims))

    def _kill(self, iid: str) -> None:
        self.live.pop(iid, None)
        self.held_controls.pop(iid, None)
        self.inc[iid] += 1
        for ch in self._touching(iid):
            self.queues[ch].clear()
            self.chan_epoch[ch] += 1

    def _touching(self, iid: str) -> list[int]:
        spec = self.graph.instances[iid]
        return [*spec.inputs, *self.graph.out_channels(iid)]

    # ------------------------------------------------------------------ actions

    def _perform(self, live: _Live) -> None:
        acts = live.core.actions
        if not acts:
            return
        live.core.actions = []
        for a in acts:
            if type(a) is Send:
                self._send(a.channel, a.msg)
            elif type(a) is Emit:
                self.sinks.append(a.instance, a.records)
            elif type(a) is Persist:
                self.store.put(a.snapshot, a.instance, a.blob)
                self.stats.persists += 1
            elif type(a) is Report:
                # The control connection is one TCP stream: reports arrive in order.
                iid = live.core.id
                t = max(self.last_report.get(iid, 0.0),
                        self.now + 0.0002 + 0.0008 * self.rng.random())
                self.last_report[iid] = t
                self._push(t, "report", (iid, live.inc, a))

    def _send(self, ch: int, msg: Message) -> None:
        self.stats.messages += 1
        if type(msg) is Batch:
            self.stats.records_sent += len(msg.records)
        t = max(self.last_delivery[ch], self.now + NET_DELAY * (0.2 + 2 * self.rng.random()))
        self.last_delivery[ch] = t
        self.queues[ch].append(msg)
        self._push(t, "deliver", (ch, self.chan_epoch[ch]))

    def _apply(self, steps: list[PlanStep]) -> None:
        starts: list[tuple[Start, int]] = []
        for step in steps:
            if isinstance(step, Stop):
                for iid in step.instances:
                    self._kill(iid)
                self._note(f"stop {step.instances}")
            elif isinstance(step, Start):
                starts.append((step, self.inc[step.instance]))
            elif isinstance(step, Commit):
                self._commit(step.snapshot)
            elif isinstance(step, Discard):
                self.store.discard_after(step.after)
            elif isinstance(step, Control):
                self._push(self.now + 0.0002, "control",
                           (step.instance, self.inc[step.instance], step.payload))
            elif isinstance(step, Event):
                self._log(step.kind, **step.data)
        if starts:
            delay = 0.001 + 0.004 * self.rng.random() if self.now > 0 else 0.0
            self._push(self.now + delay, "start", starts)

    def _commit(self, snapshot: int) -> None:
        for iid in self.graph.sinks:
            commit_epochs(self.store, self.sinks, iid, snapshot)
        self._note(f"commit {snapshot}")


def commit_epochs(store: SnapshotStore, sinks: SinkStore, sink: str, upto: int) -> None:
    """Make a sink's output visible up to snapshot ``upto``, epoch by epoch.

    The sink's part of every snapshot id up to ``upto`` lies before that complete cut,
    including ids whose own global snapshot never completed.
    """
    done = sinks.committed.get(sink, 0)
    for sid in store.snapshots_of(sink):
        if done < sid <= upto:
            sinks.commit(sink, sid, store.get(sid, sink)["output"])


def source_step(topology: Topology) -> float:
    """Simulated seconds between two batches of one source."""
    rate = topology.input.rate
    return topology.input.batch / rate if rate else STEP


def _describe(msg: Message) -> str:
    if type(msg) is Batch:
        return f"batch#{msg.seq}({len(msg.records)})"
    return f"{msg.kind}:{msg.id}"  # type: ignore[union-attr]
