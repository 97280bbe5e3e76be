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
- lose-unsynced: a unit crashes and its writes not yet durable vanish with it: those made
  since the coordinator last accepted one of its reports (``MemoryStore.sync``).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, cast

from chaos.schedule import PlannedFault
from ftctl.config.scenario import parse_target
from ftctl.kernel.unit import Unit
from ftctl.sim.faults import SimFault, event_index, span
from ftctl.sim.striking import Striking
from ftctl.store import damaged

if TYPE_CHECKING:
    from ftctl.sim.actuator import SimActuator
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
    """Damage, outages and lost unsynced writes of the host's store."""

    store: MemoryStore

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
        else:
            blobs[key] = damaged(blobs[key], f.kind, self.rng.random())
        self.fault_injected(f.kind, instance, None, snapshot=snapshot)

    def _store_outage(self, f: StoreOutage) -> None:
        fid = self.fault_injected("store-unavailable", "store", f.duration)
        self.store.unavailable += 1

        def heal() -> None:
            self.store.unavailable -= 1
            self.fault_healed(fid, "store-unavailable", "store")

        self.at(self.now + f.duration, heal)

    def _lose_unsynced(self, f: LoseUnsynced) -> None:
        unit = self._target("lose-unsynced", f.target)
        if unit is None or (self.spared and not self._spare([unit.id], "lose-unsynced")):
            return
        lost = self.store.lose_unsynced(unit.id)
        self._crash([unit.id], "lose-unsynced", lost=[list(k) for k in lost])

    @property
    def store_down(self) -> bool:
        """Whether writes fail now (``ftctl.kernel.unit.perform`` asks before writing)."""
        return bool(self.store.unavailable)

    def write_failed(self, unit: Unit) -> None:
        """``unit``'s actions would write to the unavailable store: it dies before any of
        them takes effect (the Spark host's task, whose write fails, sends none)."""
        if self.live.get(unit.id) is unit:
            self._crash([unit.id], None, reason="store unavailable")
