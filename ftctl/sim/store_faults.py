"""Faults of the stable store (``SimHost.inject``), on the simulation host's MemoryStore.

- corrupt / truncate / delete: one stored object (a chosen snapshot of a chosen instance,
  else the newest object of an instance drawn among those with any: the one a recovery
  would restore) has a byte flipped, loses its tail, or is gone. Nothing happens until a
  recovery reads it; the read then fails (``CorruptObject`` / ``MissingObject``) and the
  protocol hears ``StoreFault`` instead of restoring it.
- store-unavailable: for ``duration`` every read and write fails. A unit whose event's
  actions persist dies before any of them takes effect (as a Spark task does: a snapshot
  that cannot be written is never reported, nor anything the event did); starts that need
  a read wait until the store is back.
- store-full: for ``duration`` every write fails (no space); reads work. A unit whose
  event's actions persist dies before any of them takes effect, as under an outage: a
  snapshot that could not be written is never reported, so no restore uses it.
- store-slow: for ``duration`` each read and write takes ``latency`` more simulated
  seconds. An event whose actions persist takes effect once its writes are done (``latency``
  per write): its unit is busy meanwhile (what reaches it waits), and if it dies first none
  of them takes effect (the Spark task's frame was never sent). A start waits ``latency`` per
  object it restores. Overlapping ones: the largest latency counts.
- lose-unsynced: a unit crashes and its writes not yet durable vanish with it: those made
  since the coordinator last accepted one of its reports (``MemoryStore.sync``).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, cast

from chaos.schedule import PlannedFault
from ftctl.config.scenario import parse_target
from ftctl.kernel.unit import Unit, perform
from ftctl.sim.faults import NET_DELAY, SimFault, event_index, span
from ftctl.sim.striking import Striking
from ftctl.store import damaged
from protocols.contract.actions import Persist

if TYPE_CHECKING:
    from ftctl.sim.actuator import SimActuator
    from ftctl.sim.unit_faults import Gate
    from ftctl.store import MemoryStore

# Simulated seconds a start that needs the unavailable store waits before trying again.
STORE_RETRY = 0.001


DamageKind = Literal["corrupt", "truncate", "delete"]


@dataclass(frozen=True)
class StoreDamage(SimFault):
    """One stored object is corrupted (a byte flipped), truncated or deleted: ``snapshot``
    of ``instance``, else the newest object of an instance drawn at strike time."""

    actuator = "_store_damage"
    kind: DamageKind
    instance: str | None = None
    snapshot: int | None = None


@dataclass(frozen=True)
class StoreOutage(SimFault):
    """Every read and write of the store fails for ``duration``."""

    actuator = "_store_outage"
    duration: float


@dataclass(frozen=True)
class FullStore(SimFault):
    """Every write to the store fails (no space) for ``duration``; reads work."""

    actuator = "_store_full"
    duration: float


@dataclass(frozen=True)
class SlowStore(SimFault):
    """Each read and write of the store takes ``latency`` seconds for ``duration``."""

    actuator = "_store_slow"
    latency: float
    duration: float


@dataclass(frozen=True)
class LoseUnsynced(SimFault):
    """A unit crashes and its writes not yet made durable (acknowledged) vanish."""

    actuator = "_lose_unsynced"
    target: str | None = None


# ---------------------------------------------------------------- ftctl sim --faults draws


def draw_damage(kind: str, rng: random.Random, horizon: int, max_burst: int) -> SimFault:
    at, _ = event_index(rng, horizon), span(rng)
    return StoreDamage(at, cast(DamageKind, kind))


def draw_outage(kind: str, rng: random.Random, horizon: int, max_burst: int) -> SimFault:
    at, s = event_index(rng, horizon), span(rng)
    return StoreOutage(at, s / 2)


def draw_full(kind: str, rng: random.Random, horizon: int, max_burst: int) -> SimFault:
    at, s = event_index(rng, horizon), span(rng)
    return FullStore(at, s / 2)


def draw_slow_store(kind: str, rng: random.Random, horizon: int, max_burst: int
                    ) -> SimFault:
    # 0.4-4 ms a write: up to a detection delay (2-6 ms), many times a message's latency
    at, s = event_index(rng, horizon), span(rng)
    return SlowStore(at, NET_DELAY * rng.uniform(1, 10), s)


def draw_lose_unsynced(kind: str, rng: random.Random, horizon: int, max_burst: int
                       ) -> SimFault:
    at, _ = event_index(rng, horizon), span(rng)
    return LoseUnsynced(at)


# ---------------------------------------------------------------- scenario occurrences


def damage(act: SimActuator, p: PlannedFault, rng: random.Random, duration: float) -> None:
    """corrupt / truncate / delete: an object of the target (a selector: of an instance
    on a matching node)."""
    unit = _unit(act, p, rng)
    if unit is not None or parse_target(p.target).kind == "random":
        act.host.inject(StoreDamage(0, cast(DamageKind, p.type), unit,
                                    p.params.get("snapshot")))


def outage(act: SimActuator, p: PlannedFault, rng: random.Random, duration: float) -> None:
    act.host.inject(StoreOutage(0, duration))


def full(act: SimActuator, p: PlannedFault, rng: random.Random, duration: float) -> None:
    act.host.inject(FullStore(0, duration))


def slow(act: SimActuator, p: PlannedFault, rng: random.Random, duration: float) -> None:
    act.host.inject(SlowStore(0, float(p.params["latency"]) * act.scale, duration))


def lose_unsynced(act: SimActuator, p: PlannedFault, rng: random.Random,
                  duration: float) -> None:
    unit = _unit(act, p, rng)
    if unit is not None or parse_target(p.target).kind == "random":
        act.host.inject(LoseUnsynced(0, unit))


def _unit(act: SimActuator, p: PlannedFault, rng: random.Random) -> str | None:
    """The instance a store fault names; None for ``random`` (drawn at strike time) or
    when no instance matches (skipped, logged)."""
    return None if parse_target(p.target).kind == "random" else act.instance(p, rng)


# ---------------------------------------------------------------- the host's actuator


class StoreFaults(Striking):
    """Damage, outages, a full or slow store and lost unsynced writes of the host's store."""

    store: MemoryStore
    restores_read: set[tuple[tuple[str, int], ...]]  # start groups that waited their reads
    writing_late = False  # carrying out an event whose slow writes are done

    if TYPE_CHECKING:  # the unit faults' gate, defined in ftctl/sim/unit_faults.py
        def _gate(self, unit: Unit) -> Gate: ...
        def _retire(self, gate: Gate) -> None: ...
        def _note(self, text: str) -> None: ...

    def _store_damage(self, f: StoreDamage) -> None:
        blobs = self.store.blobs
        if f.instance is not None:
            refs = [s for s, i in blobs if i == f.instance and f.snapshot in (None, s)]
            key = (max(refs), f.instance) if refs else None
        else:
            owners = sorted({i for s, i in blobs if f.snapshot in (None, s)})
            owner = self.rng.choice(owners) if owners else None
            key = (max(s for s, i in blobs if i == owner and f.snapshot in (None, s)), owner
                   ) if owner is not None else None
        if key is None:
            what = "nothing stored" + ("" if f.snapshot is None else f" at {f.snapshot}")
            self.skip_fault(f.kind, f.instance, what)
            return
        snapshot, instance = key
        if f.kind == "delete":  # its data: the store still lists it (MissingObject on read)
            del blobs[key]
            self.store.parts.pop(key, None)
        else:
            blobs[key] = damaged(blobs[key], f.kind, self.rng.random())
        self.fault_injected(f.kind, instance, None, snapshot=snapshot)

    def _store_outage(self, f: StoreOutage) -> None:
        self._for_duration("store-unavailable", f.duration, self._counter("unavailable"))

    def _lose_unsynced(self, f: LoseUnsynced) -> None:
        unit = self._target("lose-unsynced", f.target)
        if unit is None or (self.spared and not self._spare([unit.id], "lose-unsynced")):
            return
        lost = self.store.lose_unsynced(unit.id)
        self._crash([unit.id], "lose-unsynced", lost=[list(k) for k in lost])

    def _store_full(self, f: FullStore) -> None:
        self._for_duration("store-full", f.duration, self._counter("full"))

    def _store_slow(self, f: SlowStore) -> None:
        def change(fid: int, on: bool) -> None:
            if on:
                self.store.latencies[fid] = f.latency
            else:
                del self.store.latencies[fid]

        self._for_duration("store-slow", f.duration, change, latency=round(f.latency, 6))

    def _for_duration(self, kind: str, duration: float, change: Callable[[int, bool], None],
                      **data: Any) -> None:
        """A fault of the whole store for ``duration``: ``change(its id, True)`` now and
        ``change(its id, False)`` when it heals."""
        fid = self.fault_injected(kind, "store", duration, **data)
        change(fid, True)

        def heal() -> None:
            change(fid, False)
            self.fault_healed(fid, kind, "store")

        self.at(self.now + duration, heal)

    def _counter(self, name: str) -> Callable[[int, bool], None]:
        """A ``change`` that counts the faults under way in the store's ``name``."""
        def change(_fid: int, on: bool) -> None:
            setattr(self.store, name, getattr(self.store, name) + (1 if on else -1))

        return change

    @property
    def store_faulty(self) -> bool:
        """Whether a write now fails or waits (``ftctl.kernel.unit.perform`` asks before
        writing, then hands the event's actions to ``store_write``)."""
        store = self.store
        return bool(store.unavailable or store.full
                    or (store.latencies and not self.writing_late))

    def store_write(self, unit: Unit, acts: list[Any]) -> None:
        """``unit``'s actions write to the faulty store: it dies before any of them takes
        effect (unavailable, full: the Spark host's task, whose write fails, sends none),
        or they take effect once its writes are done (slow), the unit busy meanwhile."""
        store = self.store
        if store.unavailable or store.full:
            if self.live.get(unit.id) is unit:
                why = "store unavailable" if store.unavailable else "store full"
                self._crash([unit.id], None, reason=why,
                            snapshots=sorted({a.ref for a in acts if type(a) is Persist}))
            return
        done = self.now + store.latency * sum(1 for a in acts if type(a) is Persist)
        gate = self._gate(unit)  # what reaches it meanwhile waits, as for a slow unit
        gate.busy_until = max(gate.busy_until, done)
        gate.writing += 1  # kept until the write is done, even with nothing waiting
        self.at(done, lambda: self._written(unit, acts, gate))

    def _written(self, unit: Unit, acts: list[Any], gate: Gate) -> None:
        """A slow write is done: the event's actions take effect, unless the unit died
        meanwhile (its frame never sent) or the store failed in between (then it dies)."""
        gate.writing -= 1
        if self.live.get(unit.id) is not unit:
            self._note(f"slow write of {unit.id} lost with it")
            return
        self.writing_late = True
        try:
            perform(unit, acts, self)  # type: ignore[arg-type]
        finally:
            self.writing_late = False
        self._retire(gate)

    def restore_wait(self, starts: tuple[tuple[str, int], ...]) -> float:
        """Seconds a start group waits for its restores on a slow store: ``latency`` per
        object read, once (0: the store is not slow, or the group waited already)."""
        if not self.store.latencies:
            self.restores_read.discard(starts)
            return 0.0
        if starts in self.restores_read:
            self.restores_read.discard(starts)
            return 0.0
        reads = 0
        for iid, inc in starts:
            restart = self.kernel.pending.get(iid)
            if restart is not None and self.kernel.inc[iid] == inc:
                reads += (restart.restore is not None) + len(restart.extra or ())
        if not reads:
            return 0.0
        self.restores_read.add(starts)
        return self.store.latency * reads
