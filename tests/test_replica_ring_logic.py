"""replica-ring's contract-v2 logic driven by hand: literal events in, exact actions out."""

from __future__ import annotations

from ftctl.config.topology import Topology
from ftctl.runtime.graph import ExecutionGraph
from ftctl.runtime.instance import InstanceCore
from ftctl.runtime.messages import Batch, Marker
from protocols.contract.actions import (
    AdoptSlot,
    Control,
    DeclarePhase,
    Emit,
    Report,
    Restart,
    Route,
    Send,
    SendPeer,
    SetTimer,
    Stop,
    Suspect,
)
from protocols.contract.events import (
    BatchIn,
    ControlIn,
    FailureDetected,
    MarkerIn,
    PeerIn,
    ReportIn,
    SourceReady,
    Started,
    Suspected,
    TimerFired,
)
from protocols.contract.messages import Ended, InputEnded, Offset
from protocols.contract.names import InstanceId as I
from protocols.contract.names import UnitId as U
from protocols.contract.view import GraphView, InstanceView
from protocols.replica_ring.checks import fence_note
from protocols.replica_ring.logic import ReplicaRingCoordinator, ReplicaRingInstance
from protocols.replica_ring.messages import (
    Ack,
    Adopted,
    Delete,
    Fetch,
    Hosted,
    Ping,
    Purge,
    RecordMsg,
    RecordOk,
    Rejoin,
    Suspicion,
    Takeover,
)
from protocols.replica_ring.params import ReplicaRingParams
from protocols.replica_ring.spec import SPEC

TOPO = Topology.model_validate({
    "name": "chain", "input": {"records": 4, "batch": 1, "seed": 1},
    "operators": [
        {"name": "src", "type": "source.text", "params": {"words_per_line": 1}},
        {"name": "A", "type": "map", "function": "identity", "parallelism": 3},
        {"name": "B", "type": "map", "function": "identity", "parallelism": 3},
        {"name": "out", "type": "sink"}],
    "edges": [{"from": "src", "to": "A", "partition": "round-robin"},
              {"from": "A", "to": "B", "partition": "round-robin"},
              {"from": "B", "to": "out"}]})
G = ExecutionGraph(TOPO)


def logic(iid: str, **params) -> ReplicaRingInstance:
    cores = {I(i): InstanceCore(G, i) for i in G.instances}  # every core, for adoption
    return ReplicaRingInstance(InstanceView.of(G, iid), cores, ReplicaRingParams(**params))


def ch(src: str, dst: str) -> int:
    return next(c.id for c in G.channels if c.src == src and c.dst == dst)


def test_the_spec_takes_its_guarantee_from_the_semantics_param():
    for g in ("at-most-once", "at-least-once", "exactly-once"):
        assert SPEC.guarantee_of(ReplicaRingParams(semantics=g)) == g
    assert {"peers", "timers", "routing"} <= SPEC.needs and len(SPEC.mutants) >= 10


def test_a_source_batch_carries_its_id_and_is_kept_until_deleted():
    src = logic("src[0]")
    assert src.handle(Started(I("src[0]"), 1, "initial"), 0.0) == [SetTimer("ring-retry", 0.05)]
    acts = src.handle(SourceReady(I("src[0]"), 0.0), 0.0)
    send, offset = acts
    assert isinstance(send, Send) and isinstance(send.msg, Batch)
    uid = ("src[0]", 0, send.channel)
    assert send.msg.meta == (uid, "src[0]") and offset == Report(Offset(1))
    # a fetch regenerates the same records; the delete frees them
    (reply,) = src.handle(PeerIn(I("A[1]"), Fetch(uid)), 0.1)
    assert isinstance(reply, SendPeer) and reply.to == "A[1]"
    assert reply.msg.payload[1] == send.msg.records  # type: ignore[attr-defined]
    src.handle(PeerIn(I("A[1]"), Delete(uid)), 0.2)
    assert uid not in src.kept


def test_a_replica_syncs_acks_and_forwards_with_a_derived_id():
    a = logic("A[1]")
    uid = ("src[0]", 1, ch("src[0]", "A[1]"))
    batch = Batch([("w1", 1, 1)], seq=1, meta=(uid, "src[0]"))
    assert a.handle(BatchIn(I("A[1]"), ch("src[0]", "A[1]"), batch), 0.0) == [
        SendPeer(I("A[0]"), RecordMsg(uid, "src[0]", 1)),
        SendPeer(I("A[2]"), RecordMsg(uid, "src[0]", 1))]
    assert a.handle(PeerIn(I("A[0]"), RecordOk(uid, "A[0]")), 0.01) == []
    acts = a.handle(PeerIn(I("A[2]"), RecordOk(uid, "A[2]")), 0.02)
    assert acts[0] == SendPeer(I("src[0]"), Ack(uid), unit=U("src[0]"))
    (send,) = acts[1:]
    assert isinstance(send, Send) and isinstance(send.msg, Batch)
    # the output's id names the edge by output group and destination index, not by
    # channel, so a replay on another replica's core repeats it
    dest = int(G.channels[send.channel].dst[2])
    out = (uid, 0, dest)
    assert send.msg.meta == (out, "A[1]") and send.msg.records == [("w1", 1, 1)]
    # the round-robin edge follows the id: the same tuple takes the same edge again
    assert G.channels[send.channel].src == "A[1]"
    # step (8) on the next hop's delete (fixed): purge at colleagues, delete at the source
    assert a.handle(PeerIn(I("B[0]"), Ack(out)), 0.03) == []
    assert a.handle(PeerIn(I("B[0]"), Delete(out)), 0.04) == [
        SendPeer(I("A[0]"), Purge(uid, "src[0]")), SendPeer(I("A[2]"), Purge(uid, "src[0]")),
        SendPeer(I("src[0]"), Delete(uid))]


def test_ping_timeout_suspects_and_a_takeover_adopts_routes_and_fetches():
    b = logic("B[0]")
    assert b.handle(TimerFired("ring-ping", 0.0), 0.0) == [
        SendPeer(I("B[1]"), Ping("B[1]")), SetTimer("ring-ping", 0.05)]
    # the history records the suspicion; the coordinator acts on the report, which names
    # the generation the ping was meant for (B[1] as first started)
    assert b.handle(TimerFired("ring-ping", 0.2), 0.2) == [
        Suspect(I("B[1]"), "ping timeout"), Report(Suspicion("B[1]", ("B[1]", 0))),
        SetTimer("ring-ping", 0.05)]
    t = logic("B[2]")
    pending = (("src[0]", 1, 1), 5)
    t.handle(PeerIn(I("B[1]"), RecordMsg(pending, "A[1]", 1)), 0.1)
    assert t.handle(ControlIn(Takeover("B[1]"), I("B[2]")), 0.3) == [
        AdoptSlot(I("B[1]")), DeclarePhase("takeover", True, 1), Route(I("B[1]"), "B[2]"),
        SendPeer(I("A[1]"), Fetch(pending)),
        SendPeer(I("B[0]"), RecordMsg(pending, "A[1]", 2, remark=True))]
    assert t.handle(Started(I("B[1]"), 1, "adopt"), 0.3) == [Report(Adopted("B[1]"))]


def test_end_of_stream_waits_until_nothing_is_in_progress():
    b = logic("B[1]")
    uid = (("src[0]", 1, 1), ch("A[1]", "B[1]"))
    b.handle(BatchIn(I("B[1]"), ch("A[1]", "B[1]"),
                     Batch([("w", 1, 1)], seq=1, meta=(uid, "A[1]"))), 0.0)
    inputs = [c.id for c in G.channels if c.dst == "B[1]"]
    for c in inputs:
        assert b.handle(MarkerIn(I("B[1]"), c, Marker("eos")), 0.1) == []
    b.handle(PeerIn(I("B[0]"), RecordOk(uid, "B[0]")), 0.2)
    b.handle(PeerIn(I("B[2]"), RecordOk(uid, "B[2]")), 0.2)
    acts = b.handle(PeerIn(I("out[0]"), Delete((uid, 0, 0))), 0.3)
    assert acts[-2:] == [Send(ch("B[1]", "out[0]"), Marker("eos")),
                         Report(Ended(), slot=I("B[1]"))]


def test_the_sink_acks_emits_by_uid_and_deletes():
    s = logic("out[0]")
    uid = ("u", 1)
    acts = s.handle(BatchIn(I("out[0]"), ch("B[1]", "out[0]"),
                            Batch([("w", 1, 1)], seq=1, meta=(uid, "B[1]"))), 0.0)
    assert acts == [SendPeer(I("B[1]"), Ack(uid), unit=U("B[1]")),
                    Emit(I("out[0]"), [("w", 1)], uid=uid),
                    SendPeer(I("B[1]"), Delete(uid))]
    again = s.handle(BatchIn(I("out[0]"), ch("B[2]", "out[0]"),
                             Batch([("w", 1, 1)], seq=1, meta=(uid, "B[2]"))), 0.1)
    assert again == [SendPeer(I("B[2]"), Ack(uid), unit=U("B[2]")),
                     SendPeer(I("B[2]"), Delete(uid))]
    faithful = logic("out[0]", variant="faithful", semantics="at-least-once")
    acts = faithful.handle(BatchIn(I("out[0]"), ch("B[1]", "out[0]"),
                                   Batch([("w", 1, 1)], seq=1, meta=(uid, "B[1]"))), 0.0)
    assert acts == [SendPeer(I("B[1]"), Ack(uid), unit=U("B[1]")), Emit(I("out[0]"), [("w", 1)])]


class View:
    def __init__(self, units: dict[str, str], running: set[str]):
        self.units, self.running = units, running
        self.inc: dict[str, int] = {}

    def unit_of(self, slot):
        return self.units.get(slot, slot)

    def status(self, i):
        return "running" if i in self.running else "stopped"

    def incarnation(self, i):
        return self.inc.get(i, 0)  # 0: never restarted

    def stored(self, i):
        return ()  # nothing persisted (only an at-most-once source persists its offset)


def test_coordinator_fences_hands_over_and_reinstates():
    c = ReplicaRingCoordinator(GraphView(G), ReplicaRingParams())
    view = View({}, {"B[0]", "B[2]"})  # B[1] is suspected
    assert c.handle(Suspected(I("B[1]"), I("B[0]"), "ping timeout", 0.2), view) == []
    # the fence goes to the history with the suspicion it answers (checks.py)
    assert c.handle(ReportIn(I("B[0]"), 0, Suspicion("B[1]", ("B[1]", 0)), 0.2), view) == [
        fence_note("B[1]", ("B[1]", 0), "B[0]", "B[1]", False, 0),
        Stop((I("B[1]"),)), Control(I("B[2]"), Takeover("B[1]"))]
    assert c.handle(ReportIn(I("B[2]"), 1, Adopted("B[1]"), 0.21), view) == [
        SetTimer("ring-reinstate:B[1]", 1.0)]
    view.units["B[1]"] = "B[2]"
    assert c.handle(TimerFired("ring-reinstate:B[1]", 1.2), view) == [
        Restart(I("B[1]"), init=Rejoin("B[2]"))]
    # a ring member's crash waits for its takeover; a source restarts as usual
    assert c.handle(FailureDetected(frozenset({I("A[0]")}), 2.0), view) == []
    acts = c.handle(FailureDetected(frozenset({I("src[0]")}), 2.0), view)
    assert acts == [Stop((I("src[0]"),)), Restart(I("src[0]"))]


def test_an_adopted_slot_is_told_which_inputs_already_ended():
    c = ReplicaRingCoordinator(GraphView(G), ReplicaRingParams())
    view = View({}, set())
    assert c.handle(ReportIn(I("A[1]"), 1, Ended(), 0.5), view) == []
    acts = c.handle(ReportIn(I("B[2]"), 1, Adopted("B[1]"), 0.6), view)
    assert acts == [Control(I("B[1]"), InputEnded(ch("A[1]", "B[1]"))),
                    SetTimer("ring-reinstate:B[1]", 1.0)]


def test_faithful_replica_asks_the_successor_directly():
    b = logic("B[0]", variant="faithful")
    b.handle(TimerFired("ring-ping", 0.0), 0.0)
    assert b.handle(TimerFired("ring-ping", 0.2), 0.2) == [
        SendPeer(I("B[2]"), Takeover("B[1]")), SetTimer("ring-ping", 0.05)]


def test_coordinator_ignores_a_suspicion_of_a_generation_the_slot_has_left():
    c = ReplicaRingCoordinator(GraphView(G), ReplicaRingParams())
    # slot B[1] moved to B[2] after B[0] pinged the dead B[1]
    view = View({"B[1]": "B[2]"}, {"B[0]", "B[2]"})
    assert c.handle(ReportIn(I("B[0]"), 1, Suspicion("B[1]", ("B[1]", 0)), 0.2), view) == [
        Control(I("B[0]"), Hosted("B[1]", ("B[2]", 0)))]
    # back on its own replica, restarted as incarnation 2: a suspicion of the first is stale
    view = View({}, {"B[0]", "B[1]", "B[2]"})
    view.inc = {"B[1]": 2}
    assert c.handle(ReportIn(I("B[0]"), 1, Suspicion("B[1]", ("B[1]", 0)), 0.3), view) == [
        Control(I("B[0]"), Hosted("B[1]", ("B[1]", 2)))]
    # the generation that runs now is fenced; a unit that died is judged by name (its
    # incarnation counts on at its death)
    assert c.handle(ReportIn(I("B[0]"), 1, Suspicion("B[1]", ("B[1]", 2)), 0.4), view)[:2] == [
        fence_note("B[1]", ("B[1]", 2), "B[0]", "B[1]", True, 2), Stop((I("B[1]"),))]
    view.running.discard("B[2]")
    view.inc["B[2]"] = 1
    assert c.handle(ReportIn(I("B[1]"), 2, Suspicion("B[2]", ("B[2]", 0)), 0.5), view)[:2] == [
        fence_note("B[2]", ("B[2]", 0), "B[1]", "B[2]", False, 1), Stop((I("B[2]"),))]
    # the pinger takes the answer in
    b = logic("B[0]")
    assert b.handle(ControlIn(Hosted("B[1]", ("B[2]", 0)), I("B[0]")), 0.6) == []
    b.handle(TimerFired("ring-ping", 0.6), 0.6)
    assert Report(Suspicion("B[1]", ("B[2]", 0))) in b.handle(TimerFired("ring-ping", 0.8), 0.8)


def test_a_replay_for_a_slot_this_unit_does_not_host_keeps_its_output_ids():
    # B[2]'s dead predecessor was finishing a tuple for slot B[1] after handing B[1]
    # back; B[2], its taker, has no core of B[1]. The operator is stateless and routes by
    # the id, so B[2]'s own core yields the same outputs under the same ids
    uid = (("src[0]", 1, 1), 0, 1)
    payload = (ch("A[1]", "B[1]"), [("w", 1, 1)], 1)
    own = logic("B[1]")._process("B[1]", uid, payload)
    b2 = ReplicaRingInstance(InstanceView.of(G, "B[2]"), {I("B[2]"): InstanceCore(G, "B[2]")},
                             ReplicaRingParams())
    other = b2._process("B[2]", uid, payload)
    assert [(o[1], o[2][1]) for o in other] == [(o[1], o[2][1]) for o in own] == [
        ((uid, 0, 0), [("w", 1, 1)])]
