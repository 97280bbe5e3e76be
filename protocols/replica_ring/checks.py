"""What replica-ring promises about a run's history beyond its output (``SPEC.checks``).

A suspicion names the generation (unit, incarnation) the pinger last knew for a slot
(§4.1: a replica detects the *replica* it pinged). The coordinator may fence a running
unit only for a suspicion of the generation that unit is: a suspicion of a unit the slot
has left, or of an earlier incarnation, says nothing about the unit hosting the slot now,
and fencing it stops a healthy unit (mutant ``stale-suspicion``). Delivery checks may not
see such a stop: the stopped unit's taker re-fetches its tuples.

The coordinator writes each fence to the history as a ``ring-fenced`` note, with the
suspicion it answered and what the cluster said of the unit when it fenced it
(``fence_note``); ``healthy_fenced`` counts the fences of a running unit for a suspicion
of another generation.

Likewise a unit confirms a record (``RecordOk``) only for a slot it speaks for: a record
for a slot it has handed back reached it after the record table left, and confirmed
there it is nowhere the slot's replica looks when it takes the emitter over (mutant
``confirm-released``). A takeover that re-marks or re-fetches the tuple may still save
the output, so the confirmation itself is the breach: the instance writes a
``ring-confirmed-released`` note when it sends one (``released_note``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from protocols.contract.actions import Note
from protocols.replica_ring.messages import HostId, Slot

FENCED = "ring-fenced"
HEALTHY_FENCED = "healthy-unit-fenced"
CONFIRMED_RELEASED = "ring-confirmed-released"
RELEASED_CONFIRMED = "released-slot-confirmed"


def fence_note(slot: Slot, named: HostId, by: Slot, unit: Slot, running: bool,
               incarnation: int) -> Note:
    """A fence of ``unit`` (``running`` as ``incarnation`` when fenced) for ``by``'s
    suspicion of generation ``named`` of ``slot``."""
    return Note(FENCED, {"slot": slot, "named": [named[0], named[1]], "by": by,
                         "unit": unit, "running": running, "incarnation": incarnation})


def released_note(slot: Slot, uid: Any, by: Slot) -> Note:
    """``by`` confirmed the record of ``uid`` for ``slot``, which it does not speak for."""
    return Note(CONFIRMED_RELEASED, {"slot": slot, "uid": repr(uid), "by": by})


def healthy_fenced(events: Iterable[Any]) -> Mapping[str, int]:
    """``healthy-unit-fenced``: fences of a running unit whose suspicion named another unit
    or another incarnation of it."""
    n = 0
    for e in events:
        if e.kind != "protocol" or e.data.get("name") != FENCED:
            continue
        d = e.data["data"]
        n += bool(d["running"]) and (d["named"][0], d["named"][1]) != (
            d["unit"], d["incarnation"])
    return {HEALTHY_FENCED: n} if n else {}


def released_confirmed(events: Iterable[Any]) -> Mapping[str, int]:
    """``released-slot-confirmed``: records confirmed for a slot the confirming unit does
    not speak for."""
    n = sum(1 for e in events
            if e.kind == "protocol" and e.data.get("name") == CONFIRMED_RELEASED)
    return {RELEASED_CONFIRMED: n} if n else {}


def breaches(events: Sequence[Any]) -> Mapping[str, int]:
    """Every breach of the history ``SPEC.checks`` judges a run on."""
    return {**healthy_fenced(events), **released_confirmed(events)}
