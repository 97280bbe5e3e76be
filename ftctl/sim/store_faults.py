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

from typing import TYPE_CHECKING, Literal

from ftctl.kernel.unit import Unit
from ftctl.sim.faults import LoseUnsynced, StoreDamage, StoreOutage
from ftctl.sim.striking import Striking

if TYPE_CHECKING:
    from ftctl.store import MemoryStore

# Simulated seconds a start that needs the unavailable store waits before trying again.
STORE_RETRY = 0.001


def damaged(data: bytes, kind: Literal["corrupt", "truncate"], at: float) -> bytes:
    """``data`` with one byte flipped at fraction ``at`` of it, or cut there."""
    i = min(len(data) - 1, int(at * len(data)))
    if kind == "truncate":
        return data[:i]
    return data[:i] + bytes([data[i] ^ 0xFF]) + data[i + 1:]


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
