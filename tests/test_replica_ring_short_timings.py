"""replica-ring at short ring timings (ping every 2 ms, timeout 6 ms, retry 2 ms,
reinstatement 4 ms after a takeover): each cause of a broken conformance case, by hand on
one replica, and the kit's schedule that showed it, replayed by seed."""

from __future__ import annotations

from functools import cache
from typing import Any

from ftctl.config.load import load_topology
from ftctl.sim.faults import ALL_KINDS, CRASH_ONLY, FaultKind
from ftctl.sim.runner import Simulator
from protocols.registry import get_protocol
from protocols.replica_ring.messages import (
    Ack,
    Data,
    Delete,
    Fetch,
    Purge,
    RecordMsg,
    RecordOk,
    Refetch,
    Reinstate,
    Table,
    Takeover,
)
from protocols.replica_ring.params import ReplicaRingParams
from protocols.replica_ring.unit import RETRY, Arm, Host, ReplicaUnit, Reply, Reroute, Tell

SHORT = {"ping_every": 0.002, "ping_timeout": 0.006, "retry_every": 0.002,
         "reinstate_after": 0.004}


def to_sink(slot: str, uid: Any, payload: Any) -> list[tuple[str, Any, Any]]:
    return [("out[0]", uid, payload)]


def unit(index: int = 2, size: int = 3, **params: Any) -> ReplicaUnit:
    return ReplicaUnit("B", index, size, ReplicaRingParams(**params), to_sink,
                       sources=frozenset({"src"}))


@cache
def simulator(topology: str, semantics: str, kinds: tuple[FaultKind, ...]) -> Simulator:
    return Simulator(load_topology(f"topologies/{topology}.yaml"), get_protocol("replica-ring"),
                     {"semantics": semantics, **SHORT}, kinds=kinds)


def holds(topology: str, semantics: str, seed: int,
          kinds: tuple[FaultKind, ...] = CRASH_ONLY) -> bool:
    """The kit's schedule ``seed`` of this case (as `ftctl conformance` runs it)."""
    return simulator(topology, semantics, kinds).run_one(seed).verdict.passed


def test_a_tuple_in_progress_ignores_its_refetched_copy_and_deletes_both_origins() -> None:
    u = unit(semantics="at-least-once")
    u.on_message("B[1]", RecordMsg(1, "A[1]", 1))  # B[1]'s pending tuple, from A[1]
    assert u.on_message("coordinator", Takeover("B[1]")) == [
        Host("B[1]"), Reroute("B[1]", "B[2]"), Tell("A[1]", Fetch(1))]
    # before the fetched copy comes, A[0] (reprocessing its input) sends the same tuple
    u.on_data("B[1]", Data(1, "x", "A[0]"))
    assert u.on_message("B[0]", RecordOk(1, "B[0]"))[-1] == Tell("out[0]", Data(1, "x", "B[2]"))
    assert u.on_message("A[1]", Refetch(1, "x")) == []  # in progress: no second pass
    assert u.work[1].origin == "A[0]"
    # purged once the next hop deletes: both origins free their copies
    done = u.on_message("out[0]", Delete(1))
    assert Tell("B[0]", Purge(1, "A[0]")) in done
    assert {e.to for e in done if isinstance(e, Tell) and isinstance(e.msg, Delete)} == {
        "A[0]", "A[1]"}
    assert u.idle()


def test_replay_ring_fanout_at_least_once_seed_27() -> None:
    # split[2], reinstated, reprocesses a source batch that its stand-in re-fetched and
    # sent while evens[2]'s taker was re-fetching it too: split[2] waited for a delete
    assert holds("ring-fanout", "at-least-once", 27)


def test_at_most_once_a_reinstated_replica_asks_again_until_a_table_comes() -> None:
    # at-most-once arms no retry timer, except while a reinstated replica waits for its
    # table: a stand-in dead before it answered left its input held for ever
    new = unit(index=1, semantics="at-most-once")
    assert Arm(RETRY, 0.05) in new.start(reinstating=True, stand_in="B[2]")
    assert new.on_data("B[1]", Data(1, "x", "A[1]")) == []  # held until the table is in
    assert new.on_timer(RETRY, 0.05) == [Tell("B[2]", Reinstate("B[1]")), Arm(RETRY, 0.05)]
    assert new.on_message("B[0]", Table("B[1]", ())) == [Tell("out[0]", Data(1, "x", "B[1]"))]
    assert new.on_timer(RETRY, 0.10) == []  # the table came: the timer stops
    assert Arm(RETRY, 0.05) not in unit(index=1, semantics="at-most-once").start()


def test_replay_ring_fanout_at_most_once_seed_30() -> None:
    # evens[0] is restarted with evens[1] as its stand-in, which crashed a moment before
    # (not yet suspected): its request for the table was lost and never asked again
    assert holds("ring-fanout", "at-most-once", 30)


def test_a_record_from_a_replica_taken_over_that_comes_late_is_refetched() -> None:
    # B[1], fenced after a pause, synced its record before it stopped; it reaches B[2]
    # after B[2] took the slot over and re-fetched B[1]'s pending records
    u = unit()
    assert u.on_message("coordinator", Takeover("B[1]")) == [Host("B[1]"), Reroute("B[1]", "B[2]")]
    assert u.on_message("B[1]", RecordMsg(1, "A[1]", 1)) == [
        Reply("B[1]", RecordOk(1, "B[2]")), Tell("A[1]", Fetch(1))]
    # the origin's resend is a known uid: acked, and deleted once the replay is purged
    assert u.on_data("B[1]", Data(1, "x", "A[1]")) == [Reply("A[1]", Ack(1))]
    assert u.on_message("A[1]", Refetch(1, "x")) == [Tell("out[0]", Data(1, "x", "B[2]"))]
    assert Tell("A[1]", Delete(1)) in u.on_message("out[0]", Delete(1))
    # a record of a slot not taken over, or of its own, is only kept
    v = unit()
    assert v.on_message("B[1]", RecordMsg(2, "A[1]", 1)) == [Reply("B[1]", RecordOk(2, "B[2]"))]


def test_replay_ring_fanout_exactly_once_all_faults_seed_13() -> None:
    # evens[1], paused past the ping timeout, is fenced; its record sync reaches its taker
    # evens[2] after the takeover: nobody re-fetched the tuple and split[2] stalled
    assert holds("ring-fanout", "exactly-once", 13, ALL_KINDS)
