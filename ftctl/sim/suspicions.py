"""False suspicions in one run's history: a live unit suspected or taken over.

A protocol that decides liveness by time (replica-ring's pings) may suspect a unit only
when something really failed it. Under clock faults within the bound the protocol
documents (docs/chaos.md, Clock faults), a suspicion of a unit no other fault reached is
a false one: the clock made it. ``false_suspicions`` counts them; the simulator judges
runs drawing clock kinds on it (``ftctl/sim/runner.py``), so the conformance kit's clock
cases and their reproduce lines both see them.

A unit counts as failed from the first fault that reached it on: a crash, pause, node
loss or correlated failure naming it (``fault-injected``, ``node-down``), a frame lost to
it (``frame-lost``: partition, drop). Its later incarnations count as failed too: a
suspicion from a ping the dead one left unanswered may come after the restart (the
coordinator drops it as stale), and it is not the clock's doing. A fence alone
(``instance-stopped``) is no suspicion: checkpoint's and lineage's recoveries stop live
instances by design; replica-ring fences a unit only on a suspicion, counted already.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from ftctl.kernel.history import HistoryEvent

CLOCK_PREFIX = "clock-"  # the clock kinds (ftctl.config.fault_kinds) fail nobody


def _named(e: HistoryEvent) -> set[str]:
    """The units a fault event names (``instances``, ``target``, the event's instance)."""
    out = {str(i) for i in e.data.get("instances") or ()}
    if e.data.get("target") is not None:
        out.add(str(e.data["target"]))
    if e.instance is not None:
        out.add(e.instance)
    return out


def false_suspicions(events: Iterable[HistoryEvent]) -> dict[str, int]:
    """``live-suspected`` (a ``failure-suspected`` of a unit no fault reached) and
    ``live-taken-over`` (a ``route-changed`` moving such a unit's own slot to another
    unit)."""
    failed: set[str] = set()
    out: Counter[str] = Counter()
    for e in events:
        if e.kind == "fault-injected":
            if not str(e.data.get("type", "")).startswith(CLOCK_PREFIX):
                failed |= _named(e)
        elif e.kind in ("node-down", "frame-lost"):
            failed |= _named(e)
        elif e.kind == "failure-suspected":
            out["live-suspected"] += e.instance not in failed
        elif e.kind == "route-changed":
            slot, to = str(e.data["slot"]), str(e.data["to"])
            out["live-taken-over"] += slot != to and slot not in failed
    return {k: v for k, v in out.items() if v}
