"""replica-ring at short ring timings (ping every 2 ms, timeout 6 ms, retry 2 ms,
reinstatement 4 ms after a takeover): each cause of a broken conformance case, by hand on
one replica, and the kit's schedule that showed it, replayed by seed."""

from __future__ import annotations

from functools import cache
from typing import Any

from ftctl.config.load import load_topology
from ftctl.runtime.instance import InstanceCore
from ftctl.sim.faults import ALL_KINDS, CRASH_ONLY, NEIGHBOUR_KINDS, FaultKind
from ftctl.sim.runner import Simulator
from protocols.contract.actions import DeclarePhase, ReleaseSlot
from protocols.contract.events import ControlIn, PeerIn
from protocols.contract.names import InstanceId as I
from protocols.contract.view import InstanceView
from protocols.registry import get_protocol
from protocols.replica_ring.logic import ReplicaRingInstance
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
from tests.test_replica_ring_logic import G

SHORT = {"ping_every": 0.002, "ping_timeout": 0.006, "retry_every": 0.002,
         "reinstate_after": 0.004}
CHAIN = G  # the logic tests' chain: three replicas per operator


def ring_logic(iid: str) -> ReplicaRingInstance:
    """A replica's contract logic on a small chain, every core at hand for adoption."""
    cores = {I(i): InstanceCore(CHAIN, i) for i in CHAIN.instances}
    return ReplicaRingInstance(InstanceView.of(CHAIN, iid), cores, ReplicaRingParams())


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
        Host("B[1]"), Reroute("B[1]", "B[2]"), Tell("A[1]", Fetch(1)),
        Tell("B[0]", RecordMsg(1, "A[1]", 2, remark=True))]
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
        Reply("B[1]", RecordOk(1, "B[2]")), Tell("A[1]", Fetch(1)),
        Tell("B[0]", RecordMsg(1, "A[1]", 2, remark=True))]
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


def test_a_stand_in_releases_the_core_of_a_slot_it_hands_back() -> None:
    # kept, the core tied slot B[1]'s channels to B[2]: when B[2] died the host dropped
    # what the reinstated B[1] had in flight on them, its end of stream among it
    b2 = ring_logic("B[2]")
    b2.handle(ControlIn(Takeover("B[1]"), I("B[2]")), 0.0)
    acts = b2.handle(PeerIn(I("B[1]"), Reinstate("B[1]")), 0.1)
    assert ReleaseSlot(I("B[1]")) in acts
    assert DeclarePhase("takeover", False, 1) in acts
    cores = {i: c for i, c in b2.cores.items() if i != "B[1]"}  # as the kernel does
    b2.cores = cores
    # a late end of stream for the slot is its replica's to pass on; a tuple of the slot
    # still in progress here finishes on B[2]'s own core under the ids B[1]'s would give
    into = next(c.id for c in CHAIN.channels if c.src == "A[1]" and c.dst == "B[1]")
    assert b2.end_input(I("B[1]"), into) == []
    uid = (("src[0]", 1, 1), 0, 1)
    payload = (into, (("w", 1, 1),), 1)
    assert [(o[1], o[2][1]) for o in b2._process("B[1]", uid, payload)] == [
        (o[1], o[2][1]) for o in ring_logic("B[1]")._process("B[1]", uid, payload)]


def test_replay_ring_merge_exactly_once_neighbours_seed_12() -> None:
    # ones[0], stand-in for ones[1], still held ones[1]'s core when it crashed after the
    # handback: the end of stream ones[1] had just sent evens[2] was lost with it
    assert holds("ring-merge", "exactly-once", 12, NEIGHBOUR_KINDS)


def test_a_taker_re_marks_the_colleagues_records_it_re_fetches() -> None:
    # B[2] takes over B[1] and re-fetches B[1]'s pending tuple: every colleague's record
    # names B[2] now (the record table is shared, T3)
    taker = unit()
    taker.on_message("B[1]", RecordMsg(1, "A[1]", 1))
    assert Tell("B[0]", RecordMsg(1, "A[1]", 2, remark=True)) in taker.on_message(
        "coordinator", Takeover("B[1]"))
    # B[0] held B[1]'s record; re-marked, it is not confirmed
    b0 = unit(index=0)
    b0.on_message("B[1]", RecordMsg(1, "A[1]", 1))
    assert b0.on_message("B[2]", RecordMsg(1, "A[1]", 2, remark=True)) == []
    # B[2] dies before the tuple is done (B[1] is back on its own replica by then): B[0],
    # its taker, re-fetches the tuple
    assert Tell("A[1]", Fetch(1)) in b0.on_message("coordinator", Takeover("B[2]"))
    # a re-mark never revives a purged record
    b0.on_message("B[1]", RecordMsg(2, "A[1]", 1))
    b0.on_message("B[1]", Purge(2, "A[1]"))
    b0.on_message("B[2]", RecordMsg(2, "A[1]", 2, remark=True))
    assert b0.records.pending_of(2) == [] and 2 not in b0.fetching


def test_replay_replica_chain_exactly_once_delays_seed_25() -> None:
    # evens[2], taker of a falsely suspected evens[1], re-fetched its tuple; evens[1] came
    # back, then evens[2] was suspected in turn. evens[0], its taker, held the tuple's
    # record under evens[1]'s index and re-fetched nothing: split[1] stalled
    assert holds("replica-chain", "exactly-once", 25, ("delay",))
