"""Faults that hold one unit back (``SimHost.inject``: pause, slow), as on Spark.

- pause: the unit handles nothing; what reaches it (deliveries, controls, timers, peer
  messages, its own steps) waits in order. Paused longer than ``hang_timeout`` it is
  declared failed (cause ``heartbeat``) and fenced: when it resumes it handles what waited,
  and everything it does is dropped (a zombie, its incarnation stale; ``zombie-fenced``).
- slow: each event the unit handles keeps it busy ``(factor - 1) x`` its cost (a source
  batch: the source step; anything else: ``NET_DELAY``); what arrives meanwhile waits.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from ftctl.kernel.commands import RollBackUnit
from ftctl.kernel.unit import Unit, perform
from ftctl.runtime.messages import Batch, Message
from ftctl.sim.faults import Pause, Slow
from ftctl.sim.striking import Striking
from protocols.contract.events import (
    BatchIn,
    ControlIn,
    InstanceEvent,
    MarkerIn,
    PeerIn,
    SourceReady,
    TimerFired,
)
from protocols.contract.messages import Msg


@dataclass(eq=False)
class Gate:
    """What holds one unit back (pauses, slowness) and what waits for it meanwhile."""

    unit: Unit
    pauses: set[int] = field(default_factory=set)  # ids of the pauses under way
    slows: dict[int, float] = field(default_factory=dict)  # slow id -> factor
    busy_until: float = 0.0
    writing: int = 0  # slow store writes under way (``ftctl/sim/store_faults.py``)
    backlog: deque[tuple[str, Any]] = field(default_factory=deque)
    waking: bool = False
    zombie: bool = False  # fenced while paused: what it does after resuming is dropped

    @property
    def factor(self) -> float:
        return max(self.slows.values(), default=1.0)


class FencedPorts:
    """The ports of a zombie: every action is counted and dropped."""

    def __init__(self, counts: Counter[str]):
        self.counts = counts

    def _drop(self, what: str) -> None:
        self.counts[what] += 1

    def send(self, channel: int, msg: Any) -> None:
        self._drop("Send")

    def emit(self, slot: str, records: Sequence[tuple[Any, Any]],
             uid: Hashable | None = None) -> None:
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

    def phase(self, phase: str, on: bool, key: int | None, holder: str | None = None) -> None:
        self._drop("DeclarePhase")

    def suspect(self, instance: str, reason: str, by: Unit | None = None) -> None:
        self._drop("Suspect")

    def route(self, slot: str, to: str) -> None:
        self._drop("Route")

    def adopt(self, unit: Unit, slot: str, restore: int | None) -> None:
        self._drop("AdoptSlot")


def delivered(msg: Message, dst: str, ch: int) -> InstanceEvent:
    if type(msg) is Batch:
        return BatchIn(dst, ch, msg)  # type: ignore[arg-type]
    return MarkerIn(dst, ch, msg)  # type: ignore[arg-type]


def _zombie_event(unit: Unit, kind: str, data: Any, now: float) -> InstanceEvent | None:
    """What a zombie handles for an event that waited for it."""
    if kind == "step":
        return SourceReady(unit.id, now)  # type: ignore[arg-type]
    if kind == "deliver":
        ch, _epoch, msg, dst = data
        return delivered(msg, dst, ch)
    if kind == "control":
        return ControlIn(data[0], data[1])
    if kind == "timer":
        return TimerFired(data[0], now)
    if kind == "peer":
        return PeerIn(data[0], data[1], data[2])
    if kind == "rollback":
        return cast(RollBackUnit, data).event
    return None


class UnitFaults(Striking):
    """Pauses and slowness: a ``Gate`` per unit held back, while a fault holds it."""

    gates: dict[str, Gate]
    hang_timeout: float
    fenced: FencedPorts

    def _gate(self, unit: Unit) -> Gate:
        gate = self.gates.get(unit.id)
        if gate is None or gate.unit is not unit:
            gate = self.gates[unit.id] = Gate(unit)
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

    def _resume(self, gate: Gate, fid: int) -> None:
        gate.pauses.discard(fid)
        self.fault_healed(fid, "pause", gate.unit.id)
        if gate.pauses:
            return
        if self.live.get(gate.unit.id) is gate.unit:
            self._drain(gate)
        elif gate.zombie:
            self._zombie(gate)

    def _hang(self, gate: Gate, fid: int, after: float) -> None:
        """The pause ``fid`` is still on after the hang timeout: the unit is declared
        failed, as the Spark host does with a task whose heartbeats stopped."""
        unit = gate.unit
        if fid not in gate.pauses or self.live.get(unit.id) is not unit:
            return
        if self.spared and not self._spare([unit.id], "pause"):
            return  # the protocol's fault model keeps it: it resumes when the pause ends
        self._apply(self.kernel.lost(unit.id))
        self._kill(unit.id, crashed=False)
        self.stats.failures += 1
        self.stats.failed_instances.append(unit.id)
        self._detected(frozenset({unit.id}), "heartbeat",
                       {unit.id: f"missed heartbeats (paused {after:g} s)"})

    def _zombie(self, gate: Gate) -> None:
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
        # max: a slow store write may keep it busy longer (``ftctl/sim/store_faults.py``)
        gate.busy_until = max(gate.busy_until, self.now + (gate.factor - 1.0) * cost)
        return gate.busy_until

    def _wake_later(self, gate: Gate) -> None:
        if not gate.pauses and not gate.waking:
            gate.waking = True
            self._push(max(self.now, gate.busy_until), "wake", gate)

    def _on_wake(self, gate: Gate) -> None:
        gate.waking = False
        self._drain(gate)

    def _drain(self, gate: Gate) -> None:
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

    def _retire(self, gate: Gate) -> None:
        if (not gate.pauses and not gate.slows and not gate.backlog and not gate.writing
                and self.gates.get(gate.unit.id) is gate):
            del self.gates[gate.unit.id]
