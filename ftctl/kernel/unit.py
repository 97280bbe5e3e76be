"""The instance side of the kernel: a unit's cores and logic, and its actions' effects.

A unit hosts one slot (more after a takeover). ``Unit.handle`` runs the protocol's
``InstanceLogic``; ``perform`` turns the actions it returns into calls on the host's
``UnitPorts`` (transport, stable storage, timers), in order.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import replace
from typing import Any, Protocol

from ftctl.kernel.clocks import UnitClock
from ftctl.runtime.graph import ExecutionGraph
from ftctl.runtime.instance import InstanceCore
from protocols.contract.actions import (
    AdoptSlot,
    CancelTimer,
    DeclarePhase,
    Emit,
    InstanceAction,
    Note,
    Persist,
    ReleaseSlot,
    Report,
    Route,
    Send,
    SendPeer,
    SetTimer,
    StageOutput,
    Suspect,
)
from protocols.contract.events import InstanceEvent, SourceReady, TimerFired
from protocols.contract.logic import InstanceLogic
from protocols.contract.messages import Msg
from protocols.contract.names import InstanceId
from protocols.contract.params import ProtocolParams
from protocols.contract.view import InstanceView


class UnitPorts(Protocol):
    """What a host offers a unit. Sends and reports keep their order per destination."""

    def send(self, channel: int, msg: Any) -> None: ...
    def emit(self, slot: str, records: Sequence[tuple[Any, Any]],
             uid: Hashable | None = None) -> None: ...
    def stage(self, slot: str, epoch: int, records: Sequence[tuple[Any, Any]]) -> None: ...
    def persist(self, slot: str, ref: int, blob: Any) -> None: ...
    def report(self, slot: str, msg: Msg, unit: Unit | None = None) -> None: ...
    def send_peer(self, sender: str, to: str, msg: Msg, unit: str | None = None) -> None: ...
    def set_timer(self, unit: Unit, key: str, after: float) -> None: ...
    def cancel_timer(self, unit: Unit, key: str) -> None: ...
    def note(self, kind: str, data: Mapping[str, Any]) -> None: ...
    def phase(self, phase: str, on: bool, key: int | None, holder: str | None = None) -> None:
        """``holder``: the unit declaring it (the sim host's phase set records who holds
        it; the Spark task's frames name their unit anyway)."""
    def suspect(self, instance: str, reason: str, by: Unit | None = None) -> None: ...
    # routing (ftctl/kernel/routing.py): a takeover moves a slot to another unit
    def route(self, slot: str, to: str) -> None: ...
    def adopt(self, unit: Unit, slot: str, restore: int | None) -> None: ...


class Unit:
    """One running incarnation: its cores (one per hosted slot) and its logic."""

    __slots__ = ("clock", "cores", "graph", "id", "inc", "logic")

    def __init__(self, logic_cls: type[InstanceLogic[Any]], graph: ExecutionGraph, slot: str,
                 params: ProtocolParams, incarnation: int):
        self.id = slot
        self.inc = incarnation
        self.graph = graph
        self.cores: dict[InstanceId, InstanceCore] = {InstanceId(slot): InstanceCore(graph, slot)}
        self.logic = logic_cls(InstanceView.of(graph, slot), self.cores, params)
        # The unit's clock under clock faults (the host sets it); None: the host's time.
        self.clock: UnitClock | None = None

    @property
    def core(self) -> InstanceCore:
        return self.cores[InstanceId(self.id)]

    def handle(self, ev: InstanceEvent, now: float) -> list[InstanceAction]:
        """Run the logic on ``ev`` at the host's time ``now``: the protocol sees it, and
        the times events carry, on the unit's clock."""
        if self.clock is not None:
            now = self.clock.read(now)
            if type(ev) is SourceReady or type(ev) is TimerFired:
                ev = replace(ev, now=now)
        return self.logic.handle(ev, now)

    def local_due(self, now: float, after: float) -> tuple[float, float]:
        """A timer set at host time ``now`` for ``after`` seconds of the unit's clock: the
        unit's reading it is due at, and the host time that reading comes (``inf``:
        never)."""
        if self.clock is None:
            return now + after, now + after
        due = self.clock.read(now) + after
        return due, self.clock.when(due, now)

    def adopt(self, slot: str) -> None:
        """Host ``slot`` too (``AdoptSlot``): a fresh core the logic sees at once."""
        self.cores[InstanceId(slot)] = InstanceCore(self.graph, slot)

    def release(self, slot: str) -> None:
        """Stop hosting an adopted slot (``ReleaseSlot``); the own slot stays."""
        if slot != self.id:
            self.cores.pop(InstanceId(slot), None)


def perform(unit: Unit, acts: list[InstanceAction], ports: UnitPorts) -> None:
    """Carry out ``acts`` in order. Dispatch by exact type, sends first: they are most
    of them, and this loop is the simulator's hot path."""
    # A host whose store has a fault (the simulation's store-unavailable, store-full,
    # store-slow) takes the actions of an event that writes: it fails the unit before any
    # of them takes effect, as a Spark task whose write fails sends none of the event's
    # actions (they travel in one frame), or carries them out once the slow write is done.
    if getattr(ports, "store_faulty", False) and any(type(a) is Persist for a in acts):
        ports.store_write(unit, acts)  # type: ignore[attr-defined]
        return
    a: Any
    for a in acts:
        t = type(a)
        if t is Send:
            ports.send(a.channel, a.msg)
        elif t is Report:
            if a.slot is None or a.slot == unit.id:
                ports.report(unit.id, a.msg)
            else:
                ports.report(a.slot, a.msg, unit)  # for a slot this unit adopted
        elif t is Emit:
            if a.uid is None:
                ports.emit(a.slot, a.records)
            else:
                ports.emit(a.slot, a.records, a.uid)
        elif t is Persist:
            ports.persist(a.slot, a.ref, a.blob)
        elif t is StageOutput:
            ports.stage(a.slot, a.epoch, a.records)
        elif t is SendPeer:
            if a.unit is None:
                ports.send_peer(a.sender or unit.id, a.to, a.msg)
            else:
                ports.send_peer(a.sender or unit.id, a.to, a.msg, a.unit)
        elif t is SetTimer:
            ports.set_timer(unit, a.key, a.after)
        elif t is CancelTimer:
            ports.cancel_timer(unit, a.key)
        elif t is Note:
            ports.note(a.kind, a.data)
        elif t is DeclarePhase:
            ports.phase(a.phase, a.on, a.key, unit.id)
        elif t is Suspect:
            ports.suspect(a.instance, a.reason, unit)
        elif t is Route:
            ports.route(a.slot, a.to)
        elif t is AdoptSlot:
            ports.adopt(unit, a.slot, a.restore)
        elif t is ReleaseSlot:
            unit.release(a.slot)
        else:
            raise TypeError(f"not an instance action: {a!r}")
