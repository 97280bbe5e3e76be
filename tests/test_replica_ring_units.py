"""One replica driven by hand: literal events in, the exact effects out."""

from __future__ import annotations

from protocols.replica_ring.coordinator import Fence, Restart, RingCoordinator
from protocols.replica_ring.messages import (
    Ack,
    Data,
    Delete,
    Fetch,
    Ping,
    Pong,
    Purge,
    RecordMsg,
    RecordOk,
    Refetch,
    Reinstate,
    Table,
    Takeover,
)
from protocols.replica_ring.params import ReplicaRingParams
from protocols.replica_ring.unit import (
    PING,
    RETRY,
    Accuse,
    Arm,
    Host,
    Output,
    ReplicaUnit,
    Reply,
    Reroute,
    SinkUnit,
    SourceUnit,
    Tell,
    Unhost,
)


def to_sink(slot, uid, payload):
    return [("out[0]", uid, payload)]


def unit(index=1, size=3, **params) -> ReplicaUnit:
    return ReplicaUnit("B", index, size, ReplicaRingParams(**params), to_sink,
                       sources=frozenset({"src"}))


D1 = Data(1, "x", "A[1]")


def test_faithful_acks_before_the_record_sync_fixed_after():
    u = unit(variant="faithful")
    assert u.on_data("B[1]", D1) == [
        Reply("A[1]", Ack(1)),
        Tell("B[0]", RecordMsg(1, "A[1]", 1)), Tell("B[2]", RecordMsg(1, "A[1]", 1))]
    assert u.on_message("B[0]", RecordOk(1, "B[0]")) == []
    assert u.on_message("B[2]", RecordOk(1, "B[2]")) == [Tell("out[0]", Data(1, "x", "B[1]"))]
    f = unit()
    assert f.on_data("B[1]", D1) == [
        Tell("B[0]", RecordMsg(1, "A[1]", 1)), Tell("B[2]", RecordMsg(1, "A[1]", 1))]
    f.on_message("B[0]", RecordOk(1, "B[0]"))
    assert f.on_message("B[2]", RecordOk(1, "B[2]")) == [
        Reply("A[1]", Ack(1)), Tell("out[0]", Data(1, "x", "B[1]"))]


def test_step8_on_ack_faithful_on_delete_fixed():
    u = unit(variant="faithful")
    u.on_data("B[1]", D1)
    u.on_message("B[0]", RecordOk(1, "B[0]"))
    u.on_message("B[2]", RecordOk(1, "B[2]"))
    purge = [Tell("B[0]", Purge(1, "A[1]")), Tell("B[2]", Purge(1, "A[1]")),
             Tell("A[1]", Delete(1))]
    assert u.on_message("out[0]", Ack(1)) == purge
    f = unit()
    f.on_data("B[1]", D1)
    f.on_message("B[0]", RecordOk(1, "B[0]"))
    f.on_message("B[2]", RecordOk(1, "B[2]"))
    assert f.on_message("out[0]", Ack(1)) == []
    assert f.delivery.holds(1)  # the copy stays until the next hop's delete (F5)
    assert f.on_message("out[0]", Delete(1)) == purge
    assert not f.delivery.holds(1) and not f.records.pending_of(1)


def test_exactly_once_drops_a_known_uid_at_least_once_processes_it():
    eo = unit()
    eo.on_message("B[0]", RecordMsg(1, "A[1]", 0))  # a colleague's record, any state
    assert eo.on_data("B[1]", D1) == [Reply("A[1]", Ack(1))]
    alo = unit(semantics="at-least-once")
    alo.on_message("B[0]", RecordMsg(1, "A[1]", 0))
    assert alo.on_data("B[1]", D1)[0] == Tell("B[0]", RecordMsg(1, "A[1]", 1))


def test_at_most_once_processes_and_forgets():
    u = unit(semantics="at-most-once")
    assert u.on_data("B[1]", D1) == [Tell("out[0]", Data(1, "x", "B[1]"))]
    assert len(u.records) == 0 and len(u.delivery) == 0 and not u.unacked
    assert u.start() == [Arm(PING, 0.05)]  # no retry timer


def test_ping_timeout_suspects_faithful_asks_the_successor_fixed_accuses():
    u = unit(index=0, variant="faithful")
    assert u.on_timer(PING, 0.0) == [Tell("B[1]", Ping("B[1]")), Arm(PING, 0.05)]
    # the answer names who answered for the slot: this unit, first incarnation
    assert u.on_message("B[1]", Ping("B[0]")) == [Reply("B[1]", Pong("B[0]", ("B[0]", 0)))]
    assert u.on_timer(PING, 0.05) == [Arm(PING, 0.05)]  # outstanding since 0.0
    assert u.on_timer(PING, 0.15) == [Tell("B[2]", Takeover("B[1]")), Arm(PING, 0.05)]
    f = unit(index=0)
    f.on_timer(PING, 0.0)
    f.on_message("B[2]", Pong("B[1]", ("B[2]", 0)))  # B[2] stands in for slot 1
    assert f.on_timer(PING, 0.05) == [Tell("B[1]", Ping("B[1]")), Arm(PING, 0.05)]
    # the suspicion names the generation that last answered for the slot
    assert f.on_timer(PING, 0.2) == [Accuse("B[1]", ("B[2]", 0)), Arm(PING, 0.05)]
    # never answered: the slot's own unit as first started
    g = unit(index=0)
    g.on_timer(PING, 0.0)
    assert g.on_timer(PING, 0.2) == [Accuse("B[1]", ("B[1]", 0)), Arm(PING, 0.05)]


def test_takeover_reroutes_and_fetches_the_dead_replicas_pending_records():
    u = unit(index=2)
    u.on_message("B[1]", RecordMsg(1, "A[1]", 1))
    u.on_message("B[1]", RecordMsg(4, "A[1]", 1))
    u.on_message("B[1]", Purge(4, "A[1]"))
    assert u.on_message("coordinator", Takeover("B[1]")) == [
        Host("B[1]"), Reroute("B[1]", "B[2]"), Tell("A[1]", Fetch(1)),
        Tell("B[0]", RecordMsg(1, "A[1]", 2, remark=True))]  # it emits the tuple now
    assert u.ring.represents == [2, 1] and u.ring.ping_targets() == [0]
    assert u.on_message("coordinator", Takeover("B[1]")) == []  # repeated: nothing
    # the origin answers; the replay runs steps 6-8 for slot 1 without the dedup check
    assert u.on_message("A[1]", Refetch(1, "x")) == [Tell("out[0]", Data(1, "x", "B[2]"))]
    assert u.on_message("out[0]", Delete(1)) == [
        Tell("B[0]", Purge(1, "A[1]")), Tell("A[1]", Delete(1))]


def test_unanswered_sends_and_fetches_are_retried_from_the_next_tick():
    u = unit(index=2)
    u.on_message("B[1]", RecordMsg(1, "A[1]", 1))
    u.on_message("coordinator", Takeover("B[1]"))
    assert u.on_timer(RETRY, 0.05) == [Arm(RETRY, 0.05)]  # fresh: not yet
    assert u.on_timer(RETRY, 0.10) == [Tell("A[1]", Fetch(1)), Arm(RETRY, 0.05)]
    u.on_message("A[1]", Refetch(1, "x"))
    u.on_timer(RETRY, 0.15)
    assert u.on_timer(RETRY, 0.20) == [
        Tell("out[0]", Data(1, "x", "B[2]")), Arm(RETRY, 0.05)]


def test_origin_answers_a_fetch_from_its_delivery_table_or_says_gone():
    a = ReplicaUnit("A", 1, 3, ReplicaRingParams(variant="faithful"),
                    lambda s, uid, p: [("B[1]", uid, p)], sources=frozenset({"src"}))
    a.on_data("A[1]", Data(1, "x", "src[0]"))
    a.on_message("A[0]", RecordOk(1, "A[0]"))
    a.on_message("A[2]", RecordOk(1, "A[2]"))
    assert a.on_message("B[2]", Fetch(1)) == [Reply("B[2]", Refetch(1, "x"))]
    # on ack the origin purges (faithful); the delete frees its copy
    assert a.on_message("B[1]", Ack(1)) == [
        Tell("A[0]", Purge(1, "src[0]")), Tell("A[2]", Purge(1, "src[0]"))]  # no delete to src
    a.on_message("B[1]", Delete(1))
    assert a.on_message("B[2]", Fetch(1)) == [Reply("B[2]", Refetch(1, None, found=False))]


def test_reinstatement_fixed_waits_for_the_table_faithful_does_not():
    stand_in = unit(index=2)
    stand_in.on_message("B[1]", RecordMsg(1, "A[1]", 1))
    stand_in.on_message("coordinator", Takeover("B[1]"))
    new = unit(index=1)
    assert new.start(reinstating=True) == [
        Arm(PING, 0.05), Arm(RETRY, 0.05), Tell("B[1]", Reinstate("B[1]")),
        Reroute("B[1]", "B[1]")]
    assert new.on_data("B[1]", D1) == []  # held until the table is in
    assert stand_in.on_message("B[1]", Reinstate("B[1]")) == [
        Unhost("B[1]"), Reply("B[1]", Table("B[1]", ((1, "A[1]", 2, False),)))]
    assert stand_in.ring.represents == [2]
    # with the table installed, the held tuple is a known uid: acked and dropped
    assert new.on_message("B[2]", Table("B[1]", ((1, "A[1]", 2, False),))) == [
        Reply("A[1]", Ack(1))]
    faithful = unit(index=1, variant="faithful")
    faithful.start(reinstating=True)
    assert faithful.on_data("B[1]", D1)[0] == Reply("A[1]", Ack(1))  # empty table (F4)


def test_a_takeover_before_the_table_fetches_once_the_table_is_in():
    # B[1], just restarted, is asked to take slot 0 over (B[0] died) before B[2]'s table
    # came: B[0]'s pending records are in that table, so the fetches wait for it
    new = unit(index=1)
    new.start(reinstating=True)
    assert new.on_message("coordinator", Takeover("B[0]")) == [
        Host("B[0]"), Reroute("B[0]", "B[1]")]
    assert new.on_message("B[2]", Table("B[1]", ((5, "A[0]", 0, False), (6, "A[0]", 0, True)))
                          ) == [Tell("A[0]", Fetch(5)),
                                Tell("B[2]", RecordMsg(5, "A[0]", 1, remark=True))]
    assert new.fetching == {5: ("A[0]", "B[0]")}


def handed_back() -> tuple[ReplicaUnit, ReplicaUnit]:
    """B[2] stood in for slot 1 and sent tuple 9 for it (its copy is in B[2]'s delivery
    table); B[1] is back, with the record table only."""
    stand_in = unit(index=2)
    stand_in.take_over(1)
    stand_in.delivery.keep(9, ("C[0]", "nine"))
    new = unit(index=1)
    new.start(reinstating=True, stand_in="B[2]")
    new.on_message("B[2]", Table("B[1]", ()))
    return stand_in, new


def test_a_reinstated_replica_passes_a_fetch_it_cannot_answer_to_its_stand_in():
    # C[0], a taker downstream, asks slot 1 for tuple 9: B[1] passes the question on,
    # B[2] answers C[0] itself
    stand_in, new = handed_back()
    assert new.on_message("C[0]", Fetch(9)) == [Tell("B[2]", Fetch(9, asker="C[0]"))]
    assert stand_in.on_message("B[1]", Fetch(9, asker="C[0]")) == [
        Reply("C[0]", Refetch(9, "nine"))]
    # passed on once: the stand-in, holding nothing either, says so to the asker
    assert stand_in.on_message("B[1]", Fetch(8, asker="C[0]")) == [
        Reply("C[0]", Refetch(8, None, found=False))]
    assert unit(index=1).on_message("C[0]", Fetch(9)) == [
        Reply("C[0]", Refetch(9, None, found=False))]  # never handed back: nothing to ask


def test_a_reinstated_replica_passes_a_delete_for_its_stand_ins_tuple_on():
    # C[0] processed tuple 9, which B[2] sent while standing in for slot 1, and tells the
    # origin slot it may delete it: the slot is B[1]'s again, the copy and the work
    # waiting for the delete are B[2]'s
    stand_in, new = handed_back()
    assert new.on_message("C[0]", Delete(9)) == [Tell("B[2]", Delete(9, passed=True))]
    assert stand_in.on_message("B[1]", Delete(9, passed=True)) == []
    assert not stand_in.delivery.holds(9)
    # passed on once: two units that stood in for each other do not pass it round
    assert new.on_message("B[2]", Delete(8, passed=True)) == []


def test_a_reinstated_replica_asks_again_until_a_table_comes():
    # its stand-in B[2] died with the request: whoever hosts slot B[2] now holds the same
    # records and answers; once the table is in, nothing more is asked
    new = unit(index=1)
    assert Reply("B[2]", Reinstate("B[1]")) in new.start(reinstating=True, stand_in="B[2]")
    assert new.on_timer(RETRY, 0.05) == [Tell("B[2]", Reinstate("B[1]")), Arm(RETRY, 0.05)]
    new.on_message("B[0]", Table("B[1]", ()))
    assert new.on_timer(RETRY, 0.10) == [Arm(RETRY, 0.05)]


def test_sink_acks_emits_and_in_the_fixed_variant_dedups_and_deletes():
    s = SinkUnit("out[0]", ReplicaRingParams())
    d = Data(1, "x", "B[1]")
    assert s.on_message("B[1]", d) == [
        Reply("B[1]", Ack(1)), Output(1, "x"), Tell("B[1]", Delete(1))]
    assert s.on_message("B[2]", Data(1, "x", "B[2]")) == [
        Reply("B[2]", Ack(1)), Tell("B[2]", Delete(1))]  # emitted once (F3)
    f = SinkUnit("out[0]", ReplicaRingParams(variant="faithful"))
    assert f.on_message("B[1]", d) == [Reply("B[1]", Ack(1)), Output(1, "x")]
    assert f.on_message("B[1]", d) == [Reply("B[1]", Ack(1)), Output(1, "x")]
    amo = SinkUnit("out[0]", ReplicaRingParams(semantics="at-most-once"))
    assert amo.on_message("B[1]", d) == [Output(1, "x")]


def test_source_regenerates_and_retries_until_acked():
    src = SourceUnit("src[0]", ReplicaRingParams(), lambda uid: (f"A[{uid % 3}]", uid * 10))
    assert src.emit(4) == [Tell("A[1]", Data(4, 40, "src[0]"))]
    assert src.on_timer(RETRY, 0.05) == [Arm(RETRY, 0.05)]
    assert src.on_timer(RETRY, 0.10) == [Tell("A[1]", Data(4, 40, "src[0]")), Arm(RETRY, 0.05)]
    assert src.on_message("A[2]", Fetch(4)) == [Reply("A[2]", Refetch(4, 40))]
    src.on_message("A[1]", Ack(4))
    src.on_timer(RETRY, 0.15)
    assert src.on_timer(RETRY, 0.20) == [Arm(RETRY, 0.05)]


def test_coordinator_fences_walks_the_ring_and_reinstates():
    c = RingCoordinator(ReplicaRingParams(reinstate_after=1.0), {"B": 3})
    route = {"B[0]": "B[0]", "B[1]": "B[2]", "B[2]": "B[2]"}  # B[2] stands in for slot 1
    live = {"B[0]"}

    def accuse(slot, named, by):
        return c.on_accuse(slot, named, by, route.__getitem__, live.__contains__, lambda u: 0)

    assert accuse("B[2]", ("B[2]", 0), "B[1]") == [
        Fence("B[2]"), Tell("B[0]", Takeover("B[1]")), Tell("B[0]", Takeover("B[2]"))]
    # fenced once; asked again while its slots still route to it, the takeover is repeated
    assert accuse("B[1]", ("B[2]", 0), "B[0]") == [
        Tell("B[0]", Takeover("B[1]")), Tell("B[0]", Takeover("B[2]"))]
    # each slot's own replica restarts reinstate_after its takeover
    assert c.on_adopted("B[2]") == [Arm("ring-reinstate:B[2]", 1.0)]
    assert c.on_adopted("B[2]") == []
    # the stand-in of slot 2 is dead and not yet replaced: wait; then restart
    route["B[2]"] = "B[1]"
    assert c.on_timer("ring-reinstate:B[2]", route.__getitem__, live.__contains__) == [
        Arm("ring-reinstate:B[2]", 0.05)]
    route["B[2]"] = "B[0]"
    assert c.on_timer("ring-reinstate:B[2]", route.__getitem__, live.__contains__) == [
        Restart("B[2]")]
    never = RingCoordinator(ReplicaRingParams(variant="faithful", reinstate_after=None),
                            {"B": 3})
    assert never.on_adopted("B[1]") == []
