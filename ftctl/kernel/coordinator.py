"""The driver side of the kernel: applies a protocol's coordinator actions.

The kernel owns what both hosts used to keep each on their own: the incarnation of every
instance (an event of an older incarnation is dropped before the protocol sees it), the
controls held for an incarnation that has not started yet, the release groups of
restarts, per-sink commits and per-instance discards. The host reports what happened
(a unit started, a report or control arrived, a unit was lost, a failure was detected)
and carries out the ``commands`` it gets back.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

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
from ftctl.kernel.lifecycle import Lifecycle, stopped
from ftctl.kernel.outputs import Outputs
from ftctl.kernel.phases import Phases
from ftctl.kernel.placement import Placement, Slots
from ftctl.kernel.routing import Routing
from ftctl.runtime.graph import ExecutionGraph
from ftctl.store import (
    MissingObject,
    NeverStored,
    SnapshotStore,
    StoreError,
    StoreUnavailable,
)
from protocols.contract.actions import (
    CancelTimer,
    CommitOutput,
    Control,
    CoordinatorAction,
    DeclarePhase,
    DiscardSnapshots,
    DiscardStaged,
    Note,
    Restart,
    RollBack,
    Route,
    SetTimer,
    Stop,
    StopRun,
)
from protocols.contract.events import (
    CapacityChanged,
    CoordinatorEvent,
    FailureCause,
    FailureDetected,
    ReportIn,
    RollBackTo,
    RunStarted,
    Started,
    StoreFault,
    TimerFired,
)
from protocols.contract.logic import CoordinatorLogic
from protocols.contract.messages import Msg
from protocols.contract.names import InstanceId, UnitId
from protocols.contract.params import ProtocolParams
from protocols.contract.view import Capacity, GraphView, Status


class CoordinatorKernel:
    """One run's coordinator: the protocol's ``CoordinatorLogic`` plus the bookkeeping."""

    def __init__(self, logic_cls: type[CoordinatorLogic[Any]], graph: ExecutionGraph,
                 params: ProtocolParams, store: SnapshotStore, outputs: Outputs,
                 slots: Slots | None = None):
        self.graph_view = GraphView(graph)
        self.logic = logic_cls(self.graph_view, params)
        self.store = store
        self.outputs = outputs
        self.inc: dict[str, int] = dict.fromkeys(graph.order, 0)
        # In-place rollbacks per instance, over all its incarnations (see ``epoch``).
        self.rollbacks: dict[str, int] = dict.fromkeys(graph.order, 0)
        self._status: dict[str, Status] = dict.fromkeys(graph.order, "stopped")
        self.pending: dict[str, Restart] = {}  # restarts not yet started by the host
        self.held: dict[str, list[Msg]] = {}
        self.timers: dict[str, int] = {}
        self.timer_seq = 0
        self._now = 0.0
        # Without slots (a host that models no nodes) every restart starts at once.
        self.placement = Placement(slots)
        self.routing = Routing()
        # Open phase occurrences and who holds them (``recovering``: the lifecycle's).
        self.open_phases = Phases()
        # When a recovery starts and ends: the lifecycle records of both hosts.
        self.lifecycle = Lifecycle(phases=self.open_phases)
        # Why the protocol stopped the run (``StopRun``); None while it goes on.
        self.halted: str | None = None

    # ------------------------------------------------------------ ClusterView

    @property
    def now(self) -> float:
        return self._now

    @property
    def graph(self) -> GraphView:
        return self.graph_view

    @property
    def capacity(self) -> Capacity:
        return self.placement.capacity()

    @property
    def phases(self) -> frozenset[str]:
        return self.open_phases.names()

    def status(self, i: InstanceId) -> Status:
        return self._status[i]

    def incarnation(self, i: InstanceId) -> int:
        return self.inc[i]

    def unit_of(self, slot: InstanceId) -> UnitId:
        return UnitId(self.routing.unit_of(slot))

    def epoch(self, i: str) -> int:
        """The data epoch of ``i``: what fences its channels. A stop or a restart (a new
        incarnation) and an in-place rollback each raise it; data sent by or to an older
        epoch is dropped. Equal to the incarnation until ``i`` is first rolled back."""
        return self.inc[i] + self.rollbacks[i]

    def stored(self, i: InstanceId) -> tuple[int, ...]:
        return tuple(self.store.snapshots_of(i))

    def committed(self, sink: InstanceId) -> int:
        return self.outputs.committed(sink)

    # ------------------------------------------------------------ host events

    def start(self, now: float) -> list[HostCommand]:
        """The run begins: the protocol's initial actions, then ``RunStarted``."""
        self._now = now
        cmds: list[HostCommand] = [Log("run-started", {"instances": list(self.graph.order)})]
        cmds += self._apply(self.logic.initial(self))
        return cmds + self._apply(self.logic.handle(RunStarted(now), self))

    def finished(self) -> bool:
        return self.logic.finished(self)

    def report(self, instance: str, incarnation: int, msg: Msg, now: float,
               slot: str | None = None) -> list[HostCommand]:
        """A report of unit ``instance``; ``slot``: the adopted slot it reports for."""
        if self.inc[instance] != incarnation:
            return []  # from an incarnation that has been stopped since
        self._now = now
        about = slot or instance
        ev = ReportIn(InstanceId(about), self.inc[about], msg, now)
        return self._apply(self.logic.handle(ev, self))

    def lost(self, instance: str) -> list[HostCommand]:
        """A unit died (crash, kill): its incarnation is stale from now on, and the
        phases it held are left (the records to write)."""
        return self._fence(instance)

    def declare(self, holder: str | None, a: DeclarePhase) -> list[HostCommand]:
        """A ``DeclarePhase`` of unit ``holder`` (None: the coordinator's own, held by
        ``a.holder``): the phase set changes; the record to write."""
        return list(self.open_phases.declare(a.phase, a.on, a.key, a.holder or holder))

    def failure(self, instances: frozenset[str], now: float,
                cause: FailureCause = "exit",
                nodes: frozenset[str] = frozenset()) -> list[HostCommand]:
        self._now = now
        cmds: list[HostCommand] = list(self.lifecycle.detected(now))
        ev = FailureDetected(frozenset(InstanceId(i) for i in instances), now, cause,
                             nodes=nodes)
        return cmds + self._apply(self.logic.handle(ev, self))

    def capacity_changed(self, now: float) -> list[HostCommand]:
        """Nodes left or came back: the protocol hears it, waiting restarts get slots."""
        self._now = now
        return self._apply(self.logic.handle(CapacityChanged(self.capacity, now), self))

    def timer_fired(self, key: str, token: int, now: float) -> list[HostCommand]:
        if self.timers.get(key) != token:
            return []  # cancelled or replaced since
        del self.timers[key]
        self._now = now
        return self._apply(self.logic.handle(TimerFired(key, now), self))

    def route(self, slot: str, unit: str) -> list[HostCommand]:
        """``Route(slot, unit)``, from either side: later sends to ``slot`` reach ``unit``."""
        if not self.routing.set(slot, unit):
            return []
        return [Log("route-changed", {"slot": slot, "to": unit})]

    def handle(self, ev: CoordinatorEvent) -> list[HostCommand]:
        """Any other coordinator event (capacity, suspicion, ...), passed on as is."""
        return self._apply(self.logic.handle(ev, self))

    def start_unit(self, instance: str,
                   incarnation: int) -> tuple[Started, list[Msg], Restart] | None:
        """The host starts ``instance``: its ``Started`` event, the controls held for it
        and the restart that asked for it; None when a later stop superseded it."""
        restart = self.pending.get(instance)
        if restart is None or self.inc[instance] != incarnation:
            return None
        restored, extra = self._read(instance, restart)  # before any change: it may raise
        del self.pending[instance]
        self._status[instance] = "running"
        started = Started(InstanceId(instance), incarnation,
                          "initial" if incarnation == 0 else "restart", restored, extra,
                          restart.init)
        return started, self.held.pop(instance, []), restart

    def _read(self, instance: str, restart: Restart) -> tuple[Any, Mapping[int, Any]]:
        """The blobs ``restart`` restores; raises ``StoreError`` for an unreadable one."""
        extra: Mapping[int, Any] = {}
        if restart.extra:
            present = set(self.store.snapshots_of(instance))
            extra = {r: self.store.get(r, instance) if r in present else None
                     for r in restart.extra}
        restored = (self.store.get(restart.restore, instance)
                    if restart.restore is not None else None)
        return restored, extra

    def _check(self, instance: str, restart: Restart) -> None:
        """Raise what ``_read`` would for ``restart``'s objects, checking their frames
        without decoding them: the start decodes each once."""
        if restart.extra:
            present = set(self.store.snapshots_of(instance))
            for r in restart.extra:
                if r in present:
                    self.store.check(r, instance)
        if restart.restore is not None:
            self.store.check(restart.restore, instance)

    def unreadable(self, starts: tuple[tuple[str, int], ...]) -> StoreError | None:
        """The first object a start of ``starts`` needs and cannot read, checked before
        any of them starts: a group starts whole or not at all. An object never stored
        (``NeverStored``) raises: asking for it is the protocol's bug, not a store fault."""
        for instance, incarnation in starts:
            restart = self.pending.get(instance)
            if restart is not None and self.inc[instance] == incarnation:
                try:
                    self._check(instance, restart)
                except NeverStored:
                    raise  # the protocol asked for what it never stored: its bug
                except StoreError as exc:
                    return exc
        return None

    def store_fault(self, err: StoreError, starts: tuple[tuple[str, int], ...],
                    now: float) -> list[HostCommand]:
        """``starts`` cannot start, ``err`` says why: they are stopped, not started, and
        the protocol hears ``StoreFault`` (it re-plans their recovery or stops the run)."""
        self._now = now
        fenced = tuple(i for i, inc in starts if i in self.pending and self.inc[i] == inc)
        for i in fenced:
            self._fence(i)
        cmds: list[HostCommand] = [Fence(fenced), stopped(fenced)] if fenced else []
        return cmds + self._store_fault(err, fenced)

    def _store_fault(self, err: StoreError, fenced: tuple[str, ...]) -> list[HostCommand]:
        kind: Literal["corrupt", "missing", "unavailable"] = (
            "missing" if isinstance(err, MissingObject)
            else "unavailable" if isinstance(err, StoreUnavailable) else "corrupt")
        ev = StoreFault(InstanceId(err.instance), err.snapshot, kind, err.why, self._now,
                        frozenset(InstanceId(i) for i in fenced))
        cmds: list[HostCommand] = [Log("store-read-failed", {
            "instance": err.instance, "snapshot": err.snapshot, "problem": kind,
            "why": err.why, "fenced": list(fenced)})]
        return cmds + self._apply(self.logic.handle(ev, self))

    def control_arrived(self, instance: str, incarnation: int, msg: Msg) -> bool:
        """A control reached ``instance``: True to deliver it now; False when it is stale
        or held for an incarnation that has not started yet."""
        if self.inc[instance] != incarnation:
            return False
        if self._status[instance] != "running":
            self.held.setdefault(instance, []).append(msg)
            return False
        return True

    # ------------------------------------------------------------ actions

    def _fence(self, instance: str) -> list[HostCommand]:
        self.inc[instance] += 1
        self._status[instance] = "stopped"
        self.held.pop(instance, None)
        self.pending.pop(instance, None)
        self.placement.stopped(instance)
        return list(self.open_phases.drop_holder(instance, "stopped"))

    def _apply(self, actions: list[CoordinatorAction]) -> list[HostCommand]:
        cmds: list[HostCommand] = []
        groups: dict[str, list[tuple[str, int]]] = {}
        for a in actions:
            if self.halted is not None:
                break  # the run was stopped: nothing more starts, commits or restores
            if isinstance(a, Stop):
                left = [c for i in a.instances for c in self._fence(i)]
                cmds += [Fence(tuple(a.instances)), stopped(a.instances), *left]
            elif isinstance(a, Restart):
                cmds += self._restart(a, groups)
            elif isinstance(a, Control):
                unit = self.routing.unit_of(a.instance)  # an adopted slot: its host
                cmds.append(SendControl(unit, self.inc[unit], a.msg,
                                        None if unit == a.instance else a.instance))
            elif isinstance(a, CommitOutput):
                records = self.outputs.commit(a.sink, a.upto)
                cmds.append(Trace(f"commit {a.sink} {a.upto}"))
                if records is not None:  # a commit with nothing staged up to it shows nothing
                    cmds.append(Log("output-committed",
                                    {"sink": a.sink, "upto": a.upto, "records": records}))
            elif isinstance(a, DiscardSnapshots):
                self._discard(a)
            elif isinstance(a, DiscardStaged):
                self.outputs.discard(a.sink, a.after)
            elif isinstance(a, Note):
                cmds.append(Log("protocol", {"name": a.kind, "data": dict(a.data)}))
            elif isinstance(a, SetTimer):
                self.timer_seq += 1
                self.timers[a.key] = self.timer_seq
                cmds.append(SetCoordinatorTimer(a.key, a.after, self.timer_seq))
            elif isinstance(a, CancelTimer):
                self.timers.pop(a.key, None)
                cmds.append(CancelCoordinatorTimer(a.key))
            elif isinstance(a, Route):
                cmds += self.route(a.slot, a.to)
            elif isinstance(a, RollBack):
                cmds += self._rollback(a)
            elif isinstance(a, DeclarePhase):
                cmds += self.declare(None, a)
            elif isinstance(a, StopRun):
                cmds += self._stop_run(a)
            else:
                raise TypeError(f"not a coordinator action: {a!r}")
        # A plan's restarts start together: a job resumes once its replacements are up.
        cmds += [StartGroup(tuple(g)) for g in groups.values()]
        if self.placement.limited:
            cmds += self._place()
        return cmds

    def _place(self) -> list[HostCommand]:
        """Waiting restarts that found a slot start (with those of their group placed now);
        the others are recorded once as ``restart-deferred``."""
        placed, deferred = self.placement.place()
        groups: dict[str, list[tuple[str, int]]] = {}
        for w in placed:
            groups.setdefault(w.group, []).append((w.instance, w.incarnation))
        cmds: list[HostCommand] = [StartGroup(tuple(g)) for g in groups.values()]
        cmds += [Log("restart-deferred", {"instance": w.instance, "priority": w.priority})
                 for w in deferred]
        return cmds

    def _restart(self, a: Restart, groups: dict[str, list[tuple[str, int]]]) -> list[HostCommand]:
        i = a.instance
        if i in self.pending:
            self.pending[i] = a  # a second Restart of a pending start only updates it
            return []
        cmds: list[HostCommand] = []
        if self._status[i] == "running":
            # restarting a running instance stops it first
            left = self._fence(i)
            cmds += [Fence((i,)), stopped((i,)), *left]
        self.pending[i] = a
        self._status[i] = "pending"
        key = "plan" if a.release == "plan" else (a.release or f"alone:{i}")
        if self.placement.limited:
            self.placement.enqueue(i, self.inc[i], a.priority, key)
        else:
            groups.setdefault(key, []).append((i, self.inc[i]))
        return cmds

    def _rollback(self, a: RollBack) -> list[HostCommand]:
        """``RollBack``: a running instance restores ``a.restore`` in place. Its channels
        get a new data epoch; incarnation, controls, reports and timers carry on. One that
        is not running (lost, stopped, its restart pending) is skipped: its failure, or
        its restart, is the coordinator's to handle."""
        i = a.instance
        record = {"instance": i, "to": a.to, "restore": a.restore}
        if self._status[i] != "running":
            why = f"{i} is {self._status[i]}"
            return [Log("instance-rolled-back", {**record, "skipped": why})]
        try:
            restored = self.store.get(a.restore, i) if a.restore is not None else None
        except NeverStored:
            raise  # the protocol asked for what it never stored: its bug
        except StoreError as exc:  # not rolled back on a bad object: stopped, as a start
            self._fence(i)
            return [Fence((i,)), stopped((i,)), *self._store_fault(exc, (i,))]
        self.rollbacks[i] += 1
        return [RollBackUnit(i, self.inc[i], self.epoch(i), RollBackTo(i, a.to, restored)),
                Log("instance-rolled-back", {**record, "incarnation": self.inc[i]})]

    def _stop_run(self, a: StopRun) -> list[HostCommand]:
        """``StopRun``: every instance is stopped and the run ends; the history names why
        (and the object, when one is the cause)."""
        running = tuple(i for i in self.graph.order if self._status[i] != "stopped")
        for i in running:
            self._fence(i)
        self.halted = a.reason
        cmds: list[HostCommand] = [Fence(running), stopped(running)] if running else []
        cmds.append(Log("run-stopped", {"reason": a.reason, "instance": a.instance,
                                        "snapshot": a.snapshot}))
        return cmds

    def _discard(self, a: DiscardSnapshots) -> None:
        if a.instance is None:
            if a.after is not None:
                self.store.discard_after(a.after)  # one listing, not one per instance
            if a.below is not None:
                for i in self.graph_view.order:
                    self._discard(DiscardSnapshots(i, below=a.below))
            return
        for ref in self.store.snapshots_of(a.instance):
            if (a.after is not None and ref > a.after) or (a.below is not None
                                                           and ref < a.below):
                self.store.delete(ref, a.instance)


__all__ = ["CoordinatorKernel", "Trace"]
