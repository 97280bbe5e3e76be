"""Restarts waiting for a slot: the kernel's placement queue (contract v2 §2.8).

Without a ``Slots`` source (a host that does not model capacity) every restart starts at
once, as before. With one, a restart first needs a slot: waiting restarts are placed in
``(-priority, seq)`` order while slots are free (a release group all or none); the others
wait, each recorded once as ``restart-deferred``, and are tried again whenever the kernel
acts (a detection, a report, a node coming back). A stop gives the instance's slot back
at once, so a restart in the same plan can take it.

The host owns the nodes; the kernel only asks for a slot (``Slots.take``) and gives one
back (``Slots.release``). Pure: no time, no randomness.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from protocols.contract.view import Capacity


class Slots(Protocol):
    """The host's nodes as the kernel may use them."""

    def capacity(self) -> Capacity: ...

    def take(self, instance: str, incarnation: int) -> bool:
        """Reserve a slot for this start now; False when no node has room for it."""
        ...

    def release(self, instance: str) -> None:
        """The instance stopped (or its start was superseded): its slot is free."""
        ...


@dataclass
class Waiting:
    instance: str
    incarnation: int
    priority: float
    seq: int
    group: str
    deferred: bool = False  # already recorded as restart-deferred


class Placement:
    """The restarts the host has not been asked to start yet, by priority."""

    def __init__(self, slots: Slots | None = None):
        self.slots = slots
        self.waiting: dict[str, Waiting] = {}
        self._seq = 0
        self._round = 0  # one per place(): a plan's group key is unique to its call

    @property
    def limited(self) -> bool:
        return self.slots is not None

    def capacity(self) -> Capacity:
        return self.slots.capacity() if self.slots is not None else Capacity()

    def enqueue(self, instance: str, incarnation: int, priority: float, group: str) -> None:
        """A restart to place; a second one for a waiting instance only updates it."""
        group = f"{self._round}:{group}"
        w = self.waiting.get(instance)
        if w is not None:
            w.priority, w.incarnation, w.group = priority, incarnation, group
            return
        self._seq += 1
        self.waiting[instance] = Waiting(instance, incarnation, priority, self._seq, group)

    def stopped(self, instance: str) -> None:
        """The instance was fenced: it no longer waits, and any slot it held is free."""
        self.waiting.pop(instance, None)
        if self.slots is not None:
            self.slots.release(instance)

    def place(self) -> tuple[list[Waiting], list[Waiting]]:
        """Take slots for the waiting restarts, best first: (placed, newly deferred).

        The restarts of one release group are placed all or none (a plan released
        together must not run with part of its instances: their input would go nowhere),
        so a global restart waits for room for all, like blocking recovery. A group that
        does not fit does not block a later one that does; priority decides who gets a
        contested slot.
        """
        self._round += 1
        if not self.waiting:
            return [], []
        groups: dict[str, list[Waiting]] = {}
        for w in sorted(self.waiting.values(), key=lambda w: (-w.priority, w.seq)):
            groups.setdefault(w.group, []).append(w)
        placed: list[Waiting] = []
        deferred: list[Waiting] = []
        for members in groups.values():
            if self._take_all(members):
                placed += members
                for w in members:
                    del self.waiting[w.instance]
                continue
            for w in members:
                if not w.deferred:
                    w.deferred = True
                    deferred.append(w)
        return placed, deferred

    def _take_all(self, members: list[Waiting]) -> bool:
        if self.slots is None:
            return True
        taken: list[Waiting] = []
        for w in members:
            if not self.slots.take(w.instance, w.incarnation):
                for t in taken:
                    self.slots.release(t.instance)
                return False
            taken.append(w)
        return True
