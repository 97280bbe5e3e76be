"""Planted bugs of ``replica-ring`` (spec section 7), each caught by a named check.

A bug is a name in ``Policy.mutants``; the code paths that consult it plant it.
tests/test_replica_ring_mutants.py runs the exact checks (step model, and the units on a
small network) with each one planted and fails if one survives.

``MUTANTS`` is what the conformance kit runs: the protocol's two classes with one bug
planted, for the bugs that break the delivery guarantee itself under crash schedules.
The others (a ring that pings the wrong way, a self-ping, a stand-in that keeps a
reinstated index) cost messages or delay but lose nothing a crash schedule can see, and
are caught by the exact checks only.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from protocols.contract.actions import InstanceAction, SendPeer
from protocols.contract.events import PeerIn
from protocols.contract.spec import Mutant
from protocols.replica_ring.logic import ReplicaRingCoordinator, ReplicaRingInstance
from protocols.replica_ring.messages import Pong


@dataclass(frozen=True)
class Bug:
    name: str
    planted: str  # what goes wrong
    caught_by: str  # the exact check expected to fail


BUGS: tuple[Bug, ...] = (
    Bug("ping-prev", "each replica pings its predecessor", "ring facts; S3, S5, S6"),
    Bug("takeover-ignores-pending", "a taker re-fetches nothing", "S0 at-least-once lost 1"),
    Bug("purge-before-ack", "purge before the next hop's ack", "Table 1 counts; S8"),
    Bug("dedup-emitter", "dedup keyed on (uid, origin)", "S1a exactly-once duplicate 1"),
    Bug("reinstate-keeps-index", "the stand-in keeps the reinstated index",
           "ring facts after reinstatement"),
    Bug("self-ping", "no self-ping guard", "R=2 survivor pings itself"),
    Bug("ack-before-sync", "fixed variant acks before syncing the record", "S2, S3 fixed"),
    Bug("sync-skips-successor", "no record to the ring successor", "Table 1; S0"),
    Bug("amo-records", "at-most-once runs the record machinery", "Table 1 at-most-once"),
    Bug("origin-drops-on-ack", "the origin frees its copy on ack, not delete", "S0"),
    Bug("no-table-transfer", "reinstated replica starts with no records", "S5 fixed"),
    Bug("sink-no-dedup", "fixed sink emits a replayed uid again", "S1 fixed exactly-once"),
    Bug("no-route", "takeover does not reroute the slot", "ring facts; S0"),
    Bug("drop-records", "records are never sent", "Table 1; S0"),
    Bug("fresh-uid", "outputs get new ids, replays are not recognised", "every schedule"),
    Bug("no-ring-walk", "fixed variant asks only the dead slot's successor", "S6 fixed"),
    Bug("replay-through-dedup", "replays pass the exactly-once check (§5.6 literally)",
           "S0 exactly-once lost 1"),
    Bug("no-fence", "fixed variant does not stop a suspect", "S9 fixed"),
    Bug("origin-purges-on-ack", "the origin's record purged on ack (F5 missing)",
           "Table 1 purge row; S4b fixed"),
    Bug("stale-suspicion", "the coordinator fences whoever hosts a suspected slot now, even "
        "when the unanswered ping went to a unit the slot has left",
        "a reinstated replica's ping to a dead successor; short-timing kit cases"),
    Bug("confirm-released", "a stand-in confirms a record for a slot it handed back",
        "a record reaching the stand-in after the table transfer; short-timing kit cases"),
    Bug("not-found-while-regenerating", "an origin answers a fetch \"not found\" while it "
        "is still regenerating or processing the tuple (T5)",
        "S4b fixed; a fetch reaching a taker still re-fetching"),
)


# planted only in the step model: the units take output ids from the operator
MODEL_ONLY = frozenset({"fresh-uid"})
# planted only in the message-level units and the coordinator: the step model plays one
# failure at a time in step order, with no incarnations and no message overtaking another
UNITS_ONLY = frozenset({"stale-suspicion", "confirm-released"})


# bugs a kit schedule shows as a violated guarantee (lost or duplicated output)
# (dedup-emitter and ack-before-sync also do, but only for a crash between two given steps
# of one tuple; crashes at random times did not hit that window in 100 schedules.
# stale-suspicion and confirm-released need two failures independent crashes do not draw
# (0 of 150 kit schedules at short timings broke): a replica and its ring successor
# together, the predecessor of a replica just reinstated; the kit's +neighbours schedules
# at short timings draw them, as benchmarks/replica_ring_schedules.py --scenario pair and
# reinstated-predecessor do)
GUARANTEE_LEVEL = ("takeover-ignores-pending", "purge-before-ack", "sync-skips-successor",
                   "origin-drops-on-ack", "sink-no-dedup", "no-route", "drop-records",
                   "replay-through-dedup", "origin-purges-on-ack", "no-ring-walk",
                   "not-found-while-regenerating", "stale-suspicion", "confirm-released")


def names() -> tuple[str, ...]:
    return tuple(b.name for b in BUGS)


def planted(name: str) -> tuple[type[ReplicaRingInstance], type[ReplicaRingCoordinator]]:
    """The protocol's two classes with one bug planted (a class attribute the units read)."""
    tag = "".join(p.title() for p in name.split("-"))
    bug = frozenset({name})
    inst = type(f"ReplicaRingInstance{tag}", (ReplicaRingInstance,), {"mutants": bug})
    coord = type(f"ReplicaRingCoordinator{tag}", (ReplicaRingCoordinator,), {"mutants": bug})
    return inst, coord


def _kit_mutants() -> tuple[Mutant, ...]:
    out = []
    for b in BUGS:
        if b.name in GUARANTEE_LEVEL:
            inst, coord = planted(b.name)
            out.append(Mutant(b.name, b.planted, instance=inst, coordinator=coord,
                              params={"semantics": "exactly-once", "variant": "fixed"}))
    return tuple(out)


MUTANTS: tuple[Mutant, ...] = _kit_mutants()


# ------------------------------------------------------------ clock mutants
# Timing bugs: no crash schedule shows them, a clock fault the protocol tolerates does
# (docs/chaos.md, Clock faults): the kit draws the kinds each declares, crashes with
# stalls and drifts within the ping detector's bound (ftctl/conformance/clocks.py), and
# judges the runs on false suspicions too (a live replica taken over is one).
# tests/test_sim_clock_faults.py also catches each with one chosen skew.


@dataclass(frozen=True, slots=True)
class StampedPong(Pong):
    """A pong carrying the answering replica's clock reading when it answered."""

    at: float = 0.0


class PongPeerClock(ReplicaRingInstance):
    """Judges a pong's age by the answering replica's clock, not its own: a pong stamped
    more than ``ping_timeout`` before the pinger's reading counts as lost. A clock
    behind the pinger's by more than the timeout (a skew the protocol tolerates) then
    has every pong dropped, and a live replica is suspected and taken over."""

    def handle(self, ev: Any, now: float) -> list[InstanceAction]:
        if (isinstance(ev, PeerIn) and isinstance(ev.msg, StampedPong)
                and now - ev.msg.at > self.params.ping_timeout):
            return []
        return [replace(a, msg=StampedPong(a.msg.slot, a.msg.host, now))
                if isinstance(a, SendPeer) and type(a.msg) is Pong else a
                for a in super().handle(ev, now)]


CLOCK_MUTANTS: tuple[Mutant, ...] = (
    Mutant("pong-peer-clock", "a pong's age is read on the answering replica's clock",
           instance=PongPeerClock, params={"semantics": "exactly-once", "variant": "fixed"},
           kinds=("crash", "clock-drift", "clock-stall")),
)

# the kit runs the clock mutants with the others
MUTANTS += CLOCK_MUTANTS
