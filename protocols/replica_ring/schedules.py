"""The paper's fault schedules, literal (R = 3, chain ``src -> A[3] -> B[3] -> sink``).

For slot B[1] the detector is B[0] and the designated taker B[2]. Each schedule names the
flaw it shows; docs/protocols.md lists the outcomes per semantics and variant.
"""

from __future__ import annotations

from protocols.replica_ring.model import YIELD, Crash, Later, Reinstate, Schedule, Suspect

SCHEDULES: dict[str, Schedule] = {
    # B[1] dies after syncing its record, before processing: the intended case
    "S0": Schedule((1, 4), hooks={("B", 1, 1, "synced"): (Crash("B", 1),)}),
    # B[1] dies after the sink took its output, before purging: F3
    "S1": Schedule((1,), hooks={("B", 1, 1, "sent"): (Crash("B", 1),)}),
    # A[1] dies after B[1] acked, before A's purge: dedup at B works
    "S1a": Schedule((1,), hooks={("A", 1, 1, "sent"): (Crash("A", 1),)}),
    # B[1] dies right after its ack, before any record: F1
    "S2": Schedule((1,), hooks={("B", 1, 1, "acked"): (Crash("B", 1),)}),
    # B[1] dies after its first record (to B[0], not the taker): F2, closed by F1's fix
    "S3": Schedule((1,), hooks={("B", 1, 1, "sync1"): (Crash("B", 1),)}),
    # B[1] and its origin A[1] die together: F5 outside the one-failure model
    "S4": Schedule((1,), hooks={("B", 1, 1, "synced"): (Crash("B", 1), Crash("A", 1))}),
    # A[1] dies and is taken over; then B[1] dies before processing: F5 inside the model
    "S4b": Schedule((1,), hooks={
        ("B", 1, 1, "synced"): (Crash("A", 1), Later(Crash("B", 1)), YIELD)}),
    # B[1] dies (B[2] stands in); B[1] reinstated while B[0] syncs; B[0] dies: F4
    "S5": Schedule((0,), pre=(Crash("B", 1),), hooks={
        ("B", 0, 0, "synced"): (Reinstate("B", 1), Crash("B", 0))}),
    # B[1] dies, B[2] takes over, then B[2] dies: nobody pings slot 2 (F6)
    "S6": Schedule((0, 1, 2, 3, 4, 5), pre=(Crash("B", 1), Crash("B", 2))),
    # B[1] dies after processing, before sending: intended
    "S8": Schedule((1,), hooks={("B", 1, 1, "processed"): (Crash("B", 1),)}),
    # B[1] paused after syncing and suspected; B[2] replays; B[1] resumes and sends: F8
    "S9": Schedule((1,), hooks={("B", 1, 1, "synced"): (Suspect("B", 1), YIELD)}),
}
