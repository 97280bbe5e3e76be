"""The coordinator's part of ``replica-ring``: fencing suspects, reinstatement (§4.3).

Detection and takeover belong to the replicas (§4.1). The coordinator only

- in the fixed variant, answers a suspicion by fencing the suspect's unit (so a paused
  replica cannot send after its slot moved, flaw F8) and asking, for every slot that unit
  hosted (T4), the first live unit after it round the ring to take it over (F6). A
  suspicion names the generation (unit and incarnation) the pinger knew for the slot; if
  the slot has moved on since, the ping went to a unit that is gone, and the coordinator
  only tells the pinger the slot's generation now;
- restarts a dead replica ``reinstate_after`` seconds after its slot was taken over (the
  paper does not say who restarts a replica, A9); the new replica puts itself back.
  Counting from the takeover, not from the host's detection: a replica restarted before
  its slot moved would answer the pings, and its predecessor's pending tuples would never
  be re-fetched.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from protocols.replica_ring.messages import (
    Hosted,
    HostId,
    Slot,
    Takeover,
    slot_of,
    split_slot,
)
from protocols.replica_ring.params import ReplicaRingParams
from protocols.replica_ring.ring import choose_taker
from protocols.replica_ring.unit import Arm, Tell

REINSTATE = "ring-reinstate:"


@dataclass(frozen=True, slots=True)
class Fence:
    """Stop a unit; the host drops whatever it sends afterwards."""

    unit: Slot


@dataclass(frozen=True, slots=True)
class Restart:
    """Start a new replica for a slot; it asks to be reinstated."""

    slot: Slot


CoordinatorEffect = Fence | Restart | Tell | Arm


class RingCoordinator:
    def __init__(self, params: ReplicaRingParams, sizes: Mapping[str, int],
                 mutants: frozenset[str] = frozenset()):
        self.params = params
        self.p = params.policy(mutants)
        self.sizes = dict(sizes)  # ring operator -> replicas
        self.fenced: set[Slot] = set()
        self.booked: set[Slot] = set()

    def on_accuse(self, slot: Slot, named: HostId, by: Slot, unit_of: Callable[[Slot], Slot],
                  live: Callable[[Slot], bool], incarnation_of: Callable[[Slot], int]
                  ) -> list[CoordinatorEffect]:
        """``by`` suspects generation ``named`` of ``slot``: fence its unit, hand its slots to
        live colleagues."""
        op, _ = split_slot(slot)
        size = self.sizes[op]
        unit = unit_of(slot)
        # Stale: the slot has left the unit that was pinged, or that unit runs again as a
        # later incarnation. Whoever hosts it now was never pinged, and stopping it would
        # lose what it holds. (A dead unit's incarnation counts on at its death, so a
        # unit that does not run is judged by name.)
        stale = named[0] != unit or (live(unit) and incarnation_of(unit) != named[1])
        if stale and not self.p.has("stale-suspicion"):
            return [Tell(by, Hosted(slot, (unit, incarnation_of(unit))))]
        out: list[CoordinatorEffect] = []
        if unit not in self.fenced:
            self.fenced.add(unit)
            out.append(Fence(unit))
        # else the slot is still routed to the fenced unit: its taker died before it took
        # over, so ask again (a takeover already done is ignored by the taker)
        hosted = [i for i in range(size) if unit_of(slot_of(op, i)) == unit]

        def alive(i: int) -> bool:
            u = unit_of(slot_of(op, i))
            return u != unit and live(u)

        for d in hosted if self.p.ring_walk else [split_slot(slot)[1]]:
            t = choose_taker(d, size, alive, self.p.ring_walk)
            if t is not None:
                out.append(Tell(slot_of(op, t), Takeover(slot_of(op, d))))
        return out

    def on_adopted(self, slot: Slot) -> list[CoordinatorEffect]:
        """A colleague took ``slot`` over: book the restart of the slot's own replica."""
        if self.params.reinstate_after is None or slot in self.booked:
            return []
        self.booked.add(slot)
        return [Arm(REINSTATE + slot, self.params.reinstate_after)]

    def on_timer(self, key: str, unit_of: Callable[[Slot], Slot],
                 live: Callable[[Slot], bool]) -> list[CoordinatorEffect]:
        if not key.startswith(REINSTATE):
            return []
        slot = key[len(REINSTATE):]
        stand_in = unit_of(slot)
        if stand_in == slot or not live(stand_in):
            # the stand-in died too and its slots are not yet taken over: a replica
            # restarted now would wait for a record table that never comes
            return [Arm(key, self.params.ping_every)]
        self.booked.discard(slot)
        self.fenced.discard(slot)
        return [Restart(slot)]
