"""The ports a unit's actions go through on the simulation host (``ftctl.kernel.unit.
perform``): channels and peer messages on simulated time (FIFO per channel and per pair of
units, lost with their receiver or to a channel fault), sinks, staging, stable storage,
reports and suspicions to the coordinator, timers, phases and routes.

``UnitPorts`` is a base of ``SimHost``; a fenced unit's ports drop everything instead
(``unit_faults.FencedPorts``).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ftctl.kernel.outputs import Outputs
from ftctl.kernel.unit import Unit, perform
from ftctl.runtime.messages import Batch, Message
from ftctl.sim.faults import NET_DELAY
from ftctl.sim.link_faults import Link
from ftctl.sim.striking import Striking
from ftctl.store import MemoryStore, SinkStore
from protocols.contract.actions import DeclarePhase
from protocols.contract.events import Started, Suspected
from protocols.contract.messages import Msg


class UnitPorts(Striking):
    """What a unit's actions do: sends, output, storage, reports, timers, phases."""

    queues: list[deque[Message]]
    chan_epoch: list[int]
    chan_ops: list[tuple[str, str]]
    op_of: dict[str, str]
    last_delivery: list[float]
    last_report: dict[str, float]
    last_peer: dict[tuple[str, str], float]
    timers: dict[tuple[str, str], int]
    timer_seq: int
    timer_due: dict[tuple[str, str], tuple[int, float]]
    store: MemoryStore
    sinks: SinkStore
    outputs: Outputs
    output_times: list[float]
    on_phase: list[Callable[[str], object]]
    links: dict[int, Link]

    if TYPE_CHECKING:
        def _note(self, text: str) -> None: ...
        def _hooks(self, hooks: list[Callable[[], object]]) -> None: ...
        def _through_links(self, src: str, dst: str,
                           unit: str | None = None) -> float | None: ...

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
             uid: Hashable | None = None) -> None:
        if self.store.unsynced:  # output after a persist: the write is durable first
            self.store.sync(self.routing.unit_of(slot))
        self.sinks.append(slot, records, uid)
        if records and (not self.output_times or self.output_times[-1] != self.now):
            self.output_times.append(self.now)

    def stage(self, slot: str, epoch: int, records: Sequence[tuple[Any, Any]]) -> None:
        self.outputs.stage(slot, epoch, records)

    def persist(self, slot: str, ref: int, blob: Any) -> None:
        # durable once the writing unit reports or emits after it (sync)
        self.store.put(ref, slot, blob, self.routing.unit_of(slot))
        self.stats.persists += 1

    def report(self, slot: str, msg: Msg, unit: Unit | None = None) -> None:
        # The control connection is one TCP stream: reports arrive in order.
        key = slot if unit is None else unit.id
        if self.store.unsynced:  # a report after a persist: the write is durable first
            self.store.sync(key)
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
        # ``after`` is on the unit's clock (ftctl/kernel/clocks.py): due when it reads
        # the due reading; a clock fault later re-arms it (ftctl/sim/clock_faults.py).
        self.timer_seq += 1
        self.timers[(unit.id, key)] = self.timer_seq
        local, due = unit.local_due(self.now, after)
        self.timer_due[(unit.id, key)] = (unit.inc, local)
        if due != math.inf:
            self._push(due, "timer", (unit.id, unit.inc, key, self.timer_seq))

    def cancel_timer(self, unit: Unit, key: str) -> None:
        self.timers.pop((unit.id, key), None)

    def note(self, kind: str, data: Mapping[str, Any]) -> None:
        self._log("protocol", name=kind, data=dict(data))

    def phase(self, phase: str, on: bool, key: int | None, holder: str | None = None) -> None:
        self._apply(self.kernel.declare(holder, DeclarePhase(phase, on, key)))

    def _phase_opened(self, phase: str) -> None:
        """``phase`` went from closed to open: the ``on_phase`` hooks run after the actions
        that opened it (a fault must not strike a unit halfway through them)."""
        if self.on_phase:
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
