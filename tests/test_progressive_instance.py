"""ProgressiveInstance driven by hand: literal messages in, exact actions out (progressive
spec U6-U8 and E6 on the real instance: punctuation alignment, source replay after a
rollback, order-preserving mini-batches, de-duplication, generation fencing, buffers off
in normal operation)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ftctl.config.checks import check_topology
from ftctl.config.topology import Topology
from ftctl.runtime.graph import ExecutionGraph
from ftctl.runtime.instance import InstanceCore
from ftctl.runtime.messages import Batch, Marker
from protocols.contract import (
    BatchIn,
    ControlIn,
    DeclarePhase,
    Emit,
    InstanceId,
    InstanceView,
    MarkerIn,
    Persist,
    Persisted,
    Report,
    Send,
    SourceReady,
    Started,
)
from protocols.progressive.instance import MissingSnapshot, ProgressiveInstance
from protocols.progressive.messages import (
    SINK_COUNTS,
    SINK_DELTAS,
    Checkpointed,
    Finished,
    Init,
    Normal,
    Ready,
    Recover,
    Resend,
    Trim,
)
from protocols.progressive.params import ProgressiveParams
from protocols.shared.packed_counts import delta_dict, part_counts, unpack

# Two sources into a keyed running sum, into a sink: p = sum[0] has inputs ch0 and ch1.
TOPO = {
    "name": "two-in",
    "input": {"records": 400, "batch": 10, "seed": 3},
    "operators": [
        {"name": "src", "type": "source.votes", "parallelism": 2, "params": {"keys": 5}},
        {"name": "sum", "type": "sum"},
        {"name": "out", "type": "sink", "mode": "ordered-per-key"},
    ],
    "edges": [{"from": "src", "to": "sum", "partition": "hash"},
              {"from": "sum", "to": "out", "partition": "hash"}],
}
GRAPH = ExecutionGraph(check_topology(Topology.model_validate(TOPO)))


Cls = type[ProgressiveInstance]


def instance(iid: str, cls: Cls = ProgressiveInstance, **params: Any) -> ProgressiveInstance:
    cores = {InstanceId(iid): InstanceCore(GRAPH, iid)}
    return cls(InstanceView.of(GRAPH, iid), cores, ProgressiveParams(**params))


def b(seq: int, *recs: tuple[str, int], gen: int = 0) -> Batch:
    return Batch([(k, v, 0) for k, v in recs], seq=seq, meta=gen)


def mk(kind: str, ident: int, seq: int, gen: int = 0) -> Marker:
    return Marker(kind, ident, meta=(gen, seq, 0))


def feed(p: ProgressiveInstance, msgs: list[tuple[int, Batch | Marker]]) -> list[Any]:
    acts: list[Any] = []
    for ch, m in msgs:
        ev = BatchIn(p.me.id, ch, m) if isinstance(m, Batch) else MarkerIn(p.me.id, ch, m)
        acts += p.handle(ev, 0.0)
    return acts


def sent(acts: list[Any]) -> list[tuple[int, Any]]:
    """(seq, records or marker kind/id) of every send, in order."""
    out: list[tuple[int, Any]] = []
    for a in acts:
        if isinstance(a, Send):
            m = a.msg
            if isinstance(m, Batch):
                out.append((m.seq, [(k, v) for k, v, _ in m.records]))
            else:
                out.append((m.meta[1], (m.kind, m.id)))
    return out


# E6's mini-batches on p's inputs: per channel, batches then mb(b), seq per channel.
CH0 = [b(1, ("a", 1)), b(2, ("b", 2)), mk("mb", 1, 3), b(4, ("a", 3)), mk("mb", 2, 5),
       b(6, ("b", 5)), mk("mb", 3, 7)]
CH1 = [b(1, ("a", 10)), mk("mb", 1, 2), b(3, ("b", 20)), b(4, ("a", 30)), mk("mb", 2, 5),
       b(6, ("a", 50)), mk("mb", 3, 7)]
E6_OUT = [[("a", 1)], [("a", 11)], [("b", 2)], [("a", 14)], [("b", 22)], [("a", 44)],
          [("b", 27)], [("a", 94)]]


def restamp(msgs: list[Batch | Marker], gen: int) -> list[Batch | Marker]:
    out: list[Batch | Marker] = []
    for m in msgs:
        if isinstance(m, Batch):
            out.append(Batch(m.records, m.seq, meta=gen))
        else:
            out.append(Marker(m.kind, m.id, meta=(gen, m.meta[1], 0)))
    return out


def interleave(order: str, gen: int = 1, rest: bool = True) -> list[tuple[int, Batch | Marker]]:
    """Merge the two channels by a string of 0/1 picks (FIFO per channel), then (``rest``)
    whatever the picks left."""
    q = {0: restamp(CH0, gen), 1: restamp(CH1, gen)}
    out: list[tuple[int, Batch | Marker]] = []
    for c in order:
        ch = int(c) if q[int(c)] else 1 - int(c)
        out.append((ch, q[ch].pop(0)))
    return out + [(ch, m) for ch in (0, 1) for m in q[ch]] if rest else out


def progressive_p(cls: Cls = ProgressiveInstance) -> tuple[ProgressiveInstance, list[Any]]:
    p = instance("sum[0]", cls)
    acts = p.handle(Started(p.me.id, 2, "restart", init=Init(1, "progressive", 0)), 0.0)
    return p, acts


def check_e6(cls: Cls = ProgressiveInstance) -> None:
    p, acts = progressive_p(cls)
    assert acts == [Report(Ready(((0, 1), (1, 1))))]
    one = sent(feed(p, interleave("00000001111111")))
    q, _ = progressive_p(cls)
    two = sent(feed(q, interleave("10101010101010")))
    assert one == two
    # Each mini-batch's batches in order, then mb(b) forwarded; numbered per channel.
    assert [r for _s, r in one if isinstance(r, list)] == E6_OUT
    assert [s for s, _ in one] == list(range(1, 12))
    assert [r for _s, r in one if isinstance(r, tuple)] == [("mb", 1), ("mb", 2), ("mb", 3)]
    # The recovery buffer holds exactly what was sent and serves it from a position.
    ch = GRAPH.out_channels("sum[0]")[0]
    resent = sent(p.handle(ControlIn(Resend(ch, 9)), 0.0))
    assert resent == one[8:]


def test_u7_e6_same_output_in_two_interleavings() -> None:
    check_e6()


def check_dedup(cls: Cls = ProgressiveInstance) -> None:
    p, _ = progressive_p(cls)
    first = feed(p, interleave("0011", rest=False))  # ch0 a1, b2; ch1 a10, mb(1)
    assert sent(first) == []  # mb(1) not yet closed on ch0
    again = feed(p, [(0, b(1, ("a", 1), gen=1)),  # duplicate
                     (0, b(2, ("b", 2), gen=1)),  # the duplicate at the position
                     (0, b(5, ("z", 9), gen=1)),  # a gap
                     (0, b(3, ("z", 9), gen=0))])  # an older generation
    assert again == []
    out = sent(feed(p, [(0, mk("mb", 1, 3, gen=1))]))
    assert out == [(1, [("a", 1)]), (2, [("a", 11)]), (3, [("b", 2)]), (4, ("mb", 1))]
    # A newer generation waits for its rollback.
    assert feed(p, [(0, b(4, ("a", 3), gen=2))]) == []
    assert p.future and p.future[0][0] == 0


def test_u7_duplicates_gaps_and_old_generations_are_dropped() -> None:
    check_dedup()


def check_u8(cls: Cls = ProgressiveInstance) -> None:
    p = instance("sum[0]", cls)
    p.handle(Started(p.me.id, 1, "initial"), 0.0)
    seq = {0: 0, 1: 0}
    acts: list[Any] = []
    for n in range(1000):
        ch = n % 2
        seq[ch] += 1
        acts += feed(p, [(ch, b(seq[ch], ("k", 1)))])
    assert p.recovery.size() == 0 and not p.recovery.on
    assert len(sent(acts)) == 1000
    # P1 on ch0 holds ch0; P1 on ch1 completes it: P1 forwarded, then the snapshot.
    held = feed(p, [(0, mk("punct", 1, 501)), (0, b(502, ("k", 1)))])
    assert held == []
    acts = feed(p, [(1, mk("punct", 1, 501))])
    ch = GRAPH.out_channels("sum[0]")[0]
    assert isinstance(acts[0], Send) and acts[0].msg == Marker("punct", 1)
    assert acts[0].msg.meta[:2] == (0, 1001)
    assert isinstance(acts[1], Persist) and acts[1].ref == 1
    assert acts[1].blob["pos"] == {0: 501, 1: 501}
    assert acts[2] == Report(Checkpointed(1, 0))  # a Persisted of generation 0
    assert acts[3] == DeclarePhase("snapshotting", True, 1)  # until the coordinator has it
    assert sent(acts[4:]) == [(1002, [("k", 1001)])] and acts[4].channel == ch


def test_u8_no_recovery_buffering_in_normal_mode_and_punctuations_align() -> None:
    check_u8()


def check_u6(cls: Cls = ProgressiveInstance) -> None:
    src = instance("src[0]", cls, interval=1.0)
    src.handle(Started(src.me.id, 1, "initial"), 0.0)
    t = 0.0
    log: list[Any] = []
    while t < 2.55:  # P1 at 1.0, P2 at 2.0 (a batch every 0.25 s)
        log += src.handle(SourceReady(src.me.id, t), t)
        t += 0.25
    persisted = [a.msg.snapshot for a in log if isinstance(a, Report)
                 and isinstance(a.msg, Persisted)]
    assert persisted == [1, 2]
    src.handle(ControlIn(Trim(1)), t)  # cp(P1) complete; cp(P2) is not
    after_p1 = sent(log)[sent(log).index((5, ("punct", 1))) + 1:]
    assert src.source_buf.items[0][1].meta[1] == 5  # trimmed to P1, P1 kept
    acts = src.handle(ControlIn(Recover(1, 1, "blocking")), t)
    assert acts == []
    replay: list[Any] = []
    while len([r for _s, r in sent(replay) if isinstance(r, list)]) < 5:
        replay += src.handle(SourceReady(src.me.id, t), t)
        t += 0.25
    got = [x for x in sent(replay) if isinstance(x[1], list)][:5]
    want = [x for x in after_p1 if isinstance(x[1], list)][:5]
    assert got == want  # the same records under the same numbers
    assert all(a.msg.meta == 1 for a in replay if isinstance(a, Send)
               and isinstance(a.msg, Batch))


def test_u6_source_rolls_back_to_the_complete_checkpoint_not_its_own() -> None:
    check_u6()


def check_sink(cls: Cls = ProgressiveInstance) -> None:
    ch = GRAPH.instances["out[0]"].inputs[0]
    out = instance("out[0]", cls)
    out.handle(Started(out.me.id, 1, "initial"), 0.0)
    first = feed(out, [(ch, b(1, ("a", 1))), (ch, mk("punct", 1, 2)), (ch, b(3, ("a", 2)))])
    assert [a.records for a in first if isinstance(a, Emit)] == [[("a", 1)], [("a", 2)]]
    out.handle(ControlIn(Recover(1, 1, "progressive")), 0.0)
    again = feed(out, [(ch, b(3, ("a", 2), gen=1)), (ch, b(4, ("a", 3), gen=1))])
    assert again == []  # progressive: held until the mini-batch closes
    again = feed(out, [(ch, mk("mb", 1, 5, gen=1))])
    # ("a", 2) was visible already: this execution's second "a" is not shown again.
    assert [a.records for a in again if isinstance(a, Emit)] == [[("a", 3)]]
    # its counts persisted first: the Emit waits until they are durable
    assert isinstance(again[0], Persist) and again[0].blob == {"a": 3}
    assert out.handle(ControlIn(Normal(2)), 0.0) == []


def test_sink_emits_each_record_once_across_a_rollback() -> None:
    check_sink()


def check_sink_restart(cls: Cls = ProgressiveInstance) -> None:
    """Each output stores the counts it changed, under the next ref of the chain; a
    restarted sink restores every one and stores them as one base before its own."""
    ch = GRAPH.instances["out[0]"].inputs[0]
    out = instance("out[0]", cls)
    out.handle(Started(out.me.id, 1, "initial"), 0.0)
    acts = feed(out, [(ch, b(1, ("a", 1))), (ch, b(2, ("b", 1))), (ch, b(3, ("a", 2)))])
    stored = {a.ref: a.blob for a in acts if isinstance(a, Persist)}
    assert {r: delta_dict(d) for r, d in stored.items()} == {
        SINK_DELTAS[0]: {"a": 1}, SINK_DELTAS[1]: {"b": 1}, SINK_DELTAS[2]: {"a": 2}}
    again = instance("out[0]", cls)
    acts = again.handle(Started(again.me.id, 2, "restart", init=Init(1, "progressive", 0),
                                extra={r: stored.get(r) for r in (SINK_COUNTS, *SINK_DELTAS)}),
                        0.0)
    base = acts[0]
    assert isinstance(base, Persist) and base.ref == SINK_COUNTS
    assert unpack(base.blob) == {"a": 2, "b": 1}
    assert isinstance(acts[1], Report) and isinstance(acts[1].msg, Ready)


def test_a_restarted_sink_restores_its_base_and_every_delta() -> None:
    check_sink_restart()


def test_a_sink_snapshot_holds_its_seen_counts_as_they_were() -> None:
    """Snapshots store ``seen`` a part at a time (only identities new since the last
    one are encoded); a count that rose must encode them anew, or a restore from P_2
    takes "a" as seen once and shows the next "a" again."""
    ch = GRAPH.instances["out[0]"].inputs[0]
    out = instance("out[0]")
    out.handle(Started(out.me.id, 1, "initial"), 0.0)
    acts = feed(out, [(ch, b(1, ("a", 1), ("b", 1))), (ch, mk("punct", 1, 2)),
                      (ch, b(3, ("a", 2))), (ch, mk("punct", 2, 4)),
                      (ch, b(5, ("c", 1))), (ch, mk("punct", 3, 6))])
    snaps = {a.ref: a.blob for a in acts if isinstance(a, Persist) and a.ref in (1, 2, 3)}
    assert [unpack(snaps[k]["seen"]) for k in (1, 2, 3)] == [
        {"a": 1, "b": 1}, {"a": 2, "b": 1}, {"a": 2, "b": 1, "c": 1}]
    again = instance("out[0]")
    again.handle(Started(again.me.id, 2, "restart", init=Init(1, "progressive", 2),
                         restored=snaps[2]), 0.0)
    assert again.seen == {"a": 2, "b": 1}


def test_a_sink_chain_at_its_longest_ends_in_a_base() -> None:
    # Output len(SINK_DELTAS) + 1 writes a base, and the deltas after it overwrite the
    # first chain's: a replacement reading the newest object of each ref has every count.
    ch = GRAPH.instances["out[0]"].inputs[0]
    out = instance("out[0]", ProgressiveInstance)
    out.handle(Started(out.me.id, 1, "initial"), 0.0)
    n = len(SINK_DELTAS) + 2
    acts = feed(out, [(ch, b(seq, (f"k{seq}", 1))) for seq in range(1, n + 1)])
    stored = {a.ref: a.blob for a in acts if isinstance(a, Persist)}
    assert sorted(stored) == sorted((SINK_COUNTS, *SINK_DELTAS))
    assert len(unpack(stored[SINK_COUNTS])) == len(SINK_DELTAS) + 1
    assert delta_dict(stored[SINK_DELTAS[0]]) == {f"k{n}": 1}
    again = instance("out[0]", ProgressiveInstance)
    acts = again.handle(Started(again.me.id, 2, "restart", init=Init(1, "progressive", 0),
                                extra={r: stored.get(r) for r in (SINK_COUNTS, *SINK_DELTAS)}),
                        0.0)
    assert again.emitted == {f"k{seq}": 1 for seq in range(1, n + 1)}


def test_a_fast_input_bringing_the_next_punctuation_early_waits_for_it() -> None:
    """Progressive mode blocks no channel: ch0 can bring P_1 and P_2 before ch1 brings P_1.
    P_2 must wait for P_1 to align on ch1; taken as part of P_1's alignment, it was lost
    and no later checkpoint ever completed (seen after recovery on progressive15)."""
    p, _ = progressive_p()
    fast = [b(1, ("a", 1), gen=1), mk("mb", 1, 2, gen=1), mk("punct", 1, 3, gen=1),
            b(4, ("a", 2), gen=1), mk("mb", 2, 5, gen=1), mk("punct", 2, 6, gen=1)]
    slow = [b(1, ("b", 1), gen=1), mk("mb", 1, 2, gen=1), mk("punct", 1, 3, gen=1),
            b(4, ("b", 2), gen=1), mk("mb", 2, 5, gen=1), mk("punct", 2, 6, gen=1)]
    acts = feed(p, [(0, m) for m in fast] + [(1, m) for m in slow])
    persisted = [a.msg.snapshot for a in acts if isinstance(a, Report)
                 and isinstance(a.msg, Persisted)]
    assert persisted == [1, 2]
    # Reported in the generation the snapshots were taken in (stale ones are fenced).
    assert {a.msg.gen for a in acts if isinstance(a, Report)
            and isinstance(a.msg, Checkpointed)} == {1}
    snaps = [a.ref for a in acts if isinstance(a, Persist)]
    assert snaps == [1, 2]


def test_an_input_that_ends_without_the_punctuation_does_not_move_it() -> None:
    """ch1 ends after mini-batch 1 and part of 2, so it never brings P_1, which follows
    mb(2) on ch0. Whether its end arrives before or after P_1 on ch0, P_1 goes out right
    after mb(2): a replay puts it where its predecessor did, number for number (R18).
    Taken when ch1's end completed the alignment, P_1 went out after mb(1) in one order
    and after mb(2) in the other, and a receiver took a replayed batch for a new one
    (join-window, progressive, seed 142 under every fault kind)."""
    ch0 = [b(1, ("a", 1), gen=1), mk("mb", 1, 2, gen=1), b(3, ("a", 2), gen=1),
           mk("mb", 2, 4, gen=1), mk("punct", 1, 5, gen=1)]
    ch1 = [b(1, ("b", 1), gen=1), mk("mb", 1, 2, gen=1), b(3, ("b", 2), gen=1),
           mk("eos", 0, 4, gen=1)]
    p, _ = progressive_p()
    one = feed(p, [(0, m) for m in ch0] + [(1, m) for m in ch1])
    q, _ = progressive_p()
    two = feed(q, [(1, m) for m in ch1] + [(0, m) for m in ch0])
    assert sent(one) == sent(two)
    assert [r for _s, r in sent(one)] == [
        [("a", 1)], [("b", 1)], ("mb", 1), [("a", 3)], [("b", 3)], ("mb", 2), ("punct", 1)]
    # The snapshot holds both mini-batches, whichever order the inputs came in.
    snaps = [a.blob for p_acts in (one, two) for a in p_acts if isinstance(a, Persist)]
    assert len(snaps) == 2 and snaps[0] == snaps[1]
    assert snaps[0]["pos"] == {0: 5, 1: 4}


def test_a_rollback_to_a_snapshot_not_kept_fails_loudly() -> None:
    """The coordinator rolls back only to a complete checkpoint, which every instance
    keeps. Asked for one it does not hold, the instance must not restore its initial state
    (that would recount everything): it raises, naming the instance and what it keeps."""
    ch = GRAPH.instances["out[0]"].inputs[0]
    out = instance("out[0]")
    out.handle(Started(out.me.id, 1, "initial"), 0.0)
    feed(out, [(ch, b(1, ("a", 1))), (ch, mk("punct", 1, 2))])
    assert sorted(out.snapshots) == [1]
    with pytest.raises(MissingSnapshot, match=r"out\[0\] is asked to roll back to P_2 but "
                                              r"keeps only \[1\]"):
        out.handle(ControlIn(Recover(2, 1, "progressive")), 0.0)
    # P_1 is kept: that rollback goes through, and P_0 is the initial state.
    out.handle(ControlIn(Recover(1, 1, "progressive")), 0.0)
    assert out.handle(ControlIn(Recover(0, 2, "blocking")), 0.0) == []
    assert out.seen == {}


def test_the_end_of_stream_report_carries_the_generation() -> None:
    src = instance("src[0]")
    src.gen = 3
    acts = src.finish(src.me.id)
    assert Report(Finished(3)) in acts


def _stored(acts: list[Any]) -> list[Any]:
    """Emits and persists, with counts stored in parts read back whole."""
    out: list[Any] = []
    for a in acts:
        if isinstance(a, Persist):
            blob = a.blob
            if a.ref == SINK_COUNTS:
                blob = unpack(blob)
            elif isinstance(blob, dict) and "seen" in blob:
                blob = {**blob, "seen": unpack(blob["seen"])}
            out.append((a.ref, blob))
        elif not isinstance(a, Send):
            out.append(a)
    return out


@settings(max_examples=100, deadline=None)
@given(st.lists(st.lists(st.sampled_from("abcd"), min_size=1, max_size=6), max_size=12))
def test_a_sink_counting_in_one_dict_shows_and_stores_what_counting_apart_does(
        batches: list[list[str]]) -> None:
    """Until its first rollback a sink keeps ``seen`` and ``emitted`` as one dict and
    counts a batch in bulk; what it shows and stores must be what the record-by-record
    count of two dicts gives (keys repeat: counts rise, within a batch too)."""
    ch = GRAPH.instances["out[0]"].inputs[0]
    msgs: list[tuple[int, Batch | Marker]] = []
    for i, keys in enumerate(batches):
        msgs.append((ch, b(2 * i + 1, *[(k, 1) for k in keys])))
        msgs.append((ch, mk("punct", i + 1, 2 * i + 2)))
    one, apart = instance("out[0]"), instance("out[0]")
    apart.seen = {}  # two dicts from the start: every batch counted record by record
    assert one.seen is one.emitted
    got = [_stored(p.handle(Started(p.me.id, 1, "initial"), 0.0) + feed(p, msgs))
           for p in (one, apart)]
    assert got[0] == got[1]
    assert one.seen == apart.seen and one.emitted == apart.emitted


def test_a_sink_counts_in_one_dict_again_once_a_rollbacks_replay_caught_up() -> None:
    """After a rollback ``seen`` is the snapshot's, below the visible counts; the replay
    of what was visible closes the gap, and then the two are one dict again, its
    snapshots storing the counts as they are."""
    ch = GRAPH.instances["out[0]"].inputs[0]
    out = instance("out[0]")
    out.handle(Started(out.me.id, 1, "initial"), 0.0)
    feed(out, [(ch, b(1, ("a", 1))), (ch, mk("punct", 1, 2)), (ch, b(3, ("a", 2)))])
    out.handle(ControlIn(Recover(1, 1, "progressive")), 0.0)
    assert out.seen == {"a": 1} and out.emitted == {"a": 2}
    feed(out, [(ch, b(3, ("a", 2), gen=1)), (ch, mk("mb", 1, 4, gen=1))])
    assert out.seen is out.emitted == {"a": 2}
    acts = feed(out, [(ch, b(5, ("a", 3), ("b", 1), gen=1)), (ch, mk("mb", 2, 6, gen=1)),
                      (ch, mk("punct", 2, 7, gen=1))])
    assert [a.records for a in acts if isinstance(a, Emit)] == [[("a", 3), ("b", 1)]]
    snap = next(a.blob for a in acts if isinstance(a, Persist) and a.ref == 2)
    assert unpack(snap["seen"]) == {"a": 3, "b": 1}


def test_a_snapshot_after_the_counts_are_one_dict_again_holds_every_count() -> None:
    """The replay brings identities in another order than they became visible in: a
    snapshot taken while apart encoded ``seen`` in its order, and once the counts are
    one dict, snapshots must encode ``emitted``'s, not add to the old parts."""
    ch = GRAPH.instances["out[0]"].inputs[0]
    out = instance("out[0]")
    out.handle(Started(out.me.id, 1, "initial"), 0.0)
    feed(out, [(ch, b(1, ("x", 1))), (ch, mk("punct", 1, 2)), (ch, b(3, ("y", 1), ("z", 1)))])
    out.handle(ControlIn(Recover(1, 1, "progressive")), 0.0)
    acts = feed(out, [(ch, b(3, ("z", 1), gen=1)), (ch, mk("mb", 1, 4, gen=1)),
                      (ch, mk("punct", 2, 5, gen=1)),
                      (ch, b(6, ("y", 1), gen=1)), (ch, mk("mb", 2, 7, gen=1)),
                      (ch, b(8, ("w", 1), gen=1)), (ch, mk("mb", 3, 9, gen=1)),
                      (ch, mk("punct", 3, 10, gen=1))])
    assert out.seen is out.emitted
    snaps = {a.ref: a.blob for a in acts if isinstance(a, Persist) and a.ref in (2, 3)}
    assert unpack(snaps[2]["seen"]) == {"x": 1, "z": 1}
    assert unpack(snaps[3]["seen"]) == {"x": 1, "y": 1, "z": 1, "w": 1}


def test_while_seen_is_emitted_snapshots_and_bases_encode_each_identity_once() -> None:
    """Until a rollback ``seen`` and ``emitted`` are one dict: the parts a snapshot
    stores for ``seen`` and those a base stores for ``emitted`` are the same objects, so
    no identity is encoded twice (a store keeps a part once for all that hold it)."""
    from ftctl.codec import decode

    ch = GRAPH.instances["out[0]"].inputs[0]
    out = instance("out[0]", ProgressiveInstance)
    out.handle(Started(out.me.id, 1, "initial"), 0.0)
    n = len(SINK_DELTAS) + 2
    msgs: list[tuple[int, Any]] = []
    for k in range(1, n + 1):  # a snapshot (P_j) after every eighth batch
        msgs.append((ch, b(len(msgs) + 1, (f"k{k}", 1))))
        if not k % 8:
            msgs.append((ch, mk("punct", k // 8, len(msgs) + 1)))
    acts = feed(out, msgs)
    assert out.seen is out.emitted
    parts = {id(p): p for a in acts if isinstance(a, Persist)
             for p in (a.blob["seen"] if a.ref in range(1, n) else
                       a.blob if a.ref == SINK_COUNTS else [])}
    assert any(a.ref == SINK_COUNTS for a in acts if isinstance(a, Persist))
    encoded = [i for p in parts.values() for i in part_counts(decode(p))]
    assert len(encoded) == len(set(encoded))  # each identity once
    assert len(encoded) >= len(SINK_DELTAS) + 1  # everything up to the base
