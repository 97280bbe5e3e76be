"""Planted bugs of ``replica-ring`` (spec section 7), each caught by a named check.

A mutant is a name in ``Policy.mutants``; the code paths that consult it plant the bug.
tests/test_replica_ring_mutants.py runs every check with each mutant planted and fails if
one survives.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Mutant:
    name: str
    planted: str  # what goes wrong
    caught_by: str  # the check expected to fail


MUTANTS: tuple[Mutant, ...] = (
    Mutant("ping-prev", "each replica pings its predecessor", "ring facts; S3, S5, S6"),
    Mutant("takeover-ignores-pending", "a taker re-fetches nothing", "S0 at-least-once lost 1"),
    Mutant("purge-before-ack", "purge before the next hop's ack", "Table 1 counts; S8"),
    Mutant("dedup-emitter", "dedup keyed on (uid, origin)", "S1a exactly-once duplicate 1"),
    Mutant("reinstate-keeps-index", "the stand-in keeps the reinstated index",
           "ring facts after reinstatement"),
    Mutant("self-ping", "no self-ping guard", "R=2 survivor pings itself"),
    Mutant("ack-before-sync", "fixed variant acks before syncing the record", "S2, S3 fixed"),
    Mutant("sync-skips-successor", "no record to the ring successor", "Table 1; S0"),
    Mutant("amo-records", "at-most-once runs the record machinery", "Table 1 at-most-once"),
    Mutant("origin-drops-on-ack", "the origin frees its copy on ack, not delete", "S0"),
    Mutant("no-table-transfer", "reinstated replica starts with no records", "S5 fixed"),
    Mutant("sink-no-dedup", "fixed sink emits a replayed uid again", "S1 fixed exactly-once"),
    Mutant("no-route", "takeover does not reroute the slot", "ring facts; S0"),
    Mutant("drop-records", "records are never sent", "Table 1; S0"),
    Mutant("fresh-uid", "outputs get new ids, replays are not recognised", "every schedule"),
    Mutant("no-ring-walk", "fixed variant asks only the dead slot's successor", "S6 fixed"),
    Mutant("replay-through-dedup", "replays pass the exactly-once check (§5.6 literally)",
           "S0 exactly-once lost 1"),
    Mutant("no-fence", "fixed variant does not stop a suspect", "S9 fixed"),
    Mutant("origin-purges-on-ack", "the origin's record purged on ack (F5 missing)",
           "Table 1 purge row; S4b fixed"),
)


# planted only in the step model: the units take output ids from the operator
MODEL_ONLY = frozenset({"fresh-uid"})


def names() -> tuple[str, ...]:
    return tuple(m.name for m in MUTANTS)
