"""Spec causal.md R3 with event time: a map restarted from T* forwards exactly the
watermarks its predecessor forwarded, because each parent's RESUME marker carries the
channel's watermark as of the last batch before the resume point.

B is ``ones[0]`` of topologies/joins/join-window.yaml (a map; parents ``left[0]``,
``left[1]``, ``right[0]``; children ``win[0]``, ``win[1]``). It keeps, per input channel,
the highest watermark received and forwards their minimum. Its events:

    B-time  batch          watermark in   forwarded (min over the three channels)
    1       left[0]#1      100            -1   (left[1], right[0]: none yet)
    2       left[1]#1      150            -1
    3       right[0]#1     110            100
    4       left[0]#2      300            110
    5       right[0]#2     200            150
    6       left[1]#2      320            200

A replacement starts from T* at t_min = 4: it knows nothing of the watermarks 300, 150
and 110 its channels held, only that the parents resume at 3, 2 and 2.
"""

from __future__ import annotations

from typing import Any

from ftctl.config.load import load_topology
from ftctl.runtime.graph import ExecutionGraph
from ftctl.runtime.instance import InstanceCore
from ftctl.runtime.messages import Batch, Marker
from ftctl.sim.runner import Simulator
from protocols.causal.instance import RESUME, CausalInstance, restarts_from_tstar
from protocols.causal.messages import CausalInit, Plan
from protocols.causal.params import CausalParams
from protocols.contract.actions import InstanceAction, Send
from protocols.contract.events import BatchIn, ControlIn, MarkerIn, Started
from protocols.contract.names import InstanceId
from protocols.contract.view import InstanceView
from protocols.registry import PROTOCOLS
from protocols.shared.logged import Resend, TrimPayloadLog
from tests.conftest import TOPOLOGIES, load

GRAPH = ExecutionGraph(load("joins/join-window"))
B = InstanceId("ones[0]")
IN = {GRAPH.channels[ch].src: ch for ch in GRAPH.instances[B].inputs}
OUT = {GRAPH.channels[ch].dst: ch for ch in GRAPH.out_channels(B)}
# B-time -> (parent, parent time, watermark the batch carries)
EVENTS = {1: ("left[0]", 1, 100), 2: ("left[1]", 1, 150), 3: ("right[0]", 1, 110),
          4: ("left[0]", 2, 300), 5: ("right[0]", 2, 200), 6: ("left[1]", 2, 320)}
FORWARDED = {1: -1, 2: -1, 3: 100, 4: 110, 5: 150, 6: 200}
T_MIN = 4


def _batch(t: int) -> BatchIn:
    parent, ptime, wm = EVENTS[t]
    return BatchIn(B, IN[parent], Batch([(f"#{t}", 1, wm - 10)], ptime, wm,
                                        (parent, ptime, ())))


def _instance(recover: bool) -> tuple[CausalInstance, list[InstanceAction]]:
    inst = CausalInstance(InstanceView.of(GRAPH, B), {B: InstanceCore(GRAPH, B)},
                          CausalParams())
    acts = inst.handle(Started(B, 1, "restart" if recover else "initial",
                               init=CausalInit(0, recover, IN)), 0.0)
    return inst, acts


def _sent(acts: list[InstanceAction]) -> list[tuple[int, Any, Any]]:
    """(channel, sender time, watermark) of each batch, and (channel, RESUME meta) of
    each resume marker, in order."""
    out: list[tuple[int, Any, Any]] = []
    for a in acts:
        if isinstance(a, Send) and isinstance(a.msg, Batch):
            out.append((a.channel, a.msg.meta[1], a.msg.watermark))
        elif isinstance(a, Send) and isinstance(a.msg, Marker) and a.msg.kind == RESUME:
            out.append((a.channel, RESUME, a.msg.meta))
    return out


def _predecessor() -> tuple[CausalInstance, list[tuple[int, Any, Any]]]:
    inst, _ = _instance(recover=False)
    sent = []
    for t in EVENTS:
        sent += _sent(inst.handle(_batch(t), 0.0))
        if t == T_MIN:
            tstar = inst.clock.copy()
    return inst, sent, tstar  # type: ignore[return-value]


def test_the_predecessor_forwards_the_minimum_of_its_channels_watermarks() -> None:
    _, sent, _ = _predecessor()
    # Every event sends on both channels (N5), each batch at its B-time.
    assert sent == [(ch, t, FORWARDED[t]) for t in EVENTS for ch in sorted(OUT.values())]


def _replacement(watermarks: bool) -> list[tuple[int, Any, Any]]:
    """B restarted from T* at t_min = 4; win[0] saw B-times up to 5, win[1] up to 4. Its
    parents resume at 1 + T*[A], each RESUME with the channel's watermark as of the batch
    before (or, as before, none)."""
    _, _, tstar = _predecessor()
    assert restarts_from_tstar(GRAPH.instances[B].kind)
    inst, acts = _instance(recover=True)
    replay = [(t, p, pt) for t, (p, pt, _) in EVENTS.items() if t > T_MIN]
    resume = {OUT["win[0]"]: 6, OUT["win[1]"]: 5}
    acts += inst.handle(ControlIn(Plan(replay, resume, tstar, upto=5)), 0.0)
    assert inst.time == T_MIN
    resumes = {"left[0]": (3, 300), "left[1]": (2, 150), "right[0]": (2, 110)}
    for parent, (start, wm) in resumes.items():
        meta = (start, wm if watermarks else None)
        acts += inst.handle(MarkerIn(B, IN[parent], Marker(RESUME, meta=meta)), 0.0)
    acts += inst.handle(_batch(5), 0.0)
    acts += inst.handle(_batch(6), 0.0)
    return _sent(acts)


def test_a_map_restarted_from_t_star_forwards_its_predecessors_watermarks() -> None:
    w0, w1 = OUT["win[0]"], OUT["win[1]"]
    # win[1] resumes at 5: B' knows its watermark at T* (110) once all three RESUMEs
    # came, and says so first. win[0] resumes at 6: its RESUME waits until B' has
    # regenerated B-time 5 (filtered, win[0] has it) and carries that batch's 150.
    assert _replacement(watermarks=True) == [
        (w1, RESUME, (5, FORWARDED[4])),
        (w1, 5, FORWARDED[5]),
        (w0, RESUME, (6, FORWARDED[5])),
        (w0, 6, FORWARDED[6]), (w1, 6, FORWARDED[6])]


def test_without_the_watermark_in_resume_the_replacement_forwards_lower_ones() -> None:
    # What a restart from T* did before the marker carried it: B-times 5 and 6 go out at
    # -1 (left[0] has sent nothing since T*) where the predecessor sent 150 and 200. A
    # window downstream fires later
    # than in the run its children observed, and the sink gets that window twice
    # (join-window seed 714, every fault kind: 141 duplicates).
    got = {(ch, t): wm for ch, t, wm in _replacement(watermarks=False) if t != RESUME}
    assert got[(OUT["win[1]"], 5)] == -1 < FORWARDED[5]
    assert got[(OUT["win[0]"], 6)] == -1 < FORWARDED[6]


def test_a_resend_after_trimming_carries_the_watermark_of_the_last_trimmed_batch() -> None:
    # The parent's payload log no longer holds the batch before the resume point (its
    # child's snapshot covers it, spec T2): the RESUME still carries its watermark.
    inst, _, _ = _predecessor()
    ch = OUT["win[0]"]
    inst.handle(ControlIn(TrimPayloadLog(ch, 4)), 0.0)
    assert [inst.key(b) for b in inst.plog[ch]] == [5, 6]
    acts = _sent(inst.handle(ControlIn(Resend(ch, 5)), 0.0))
    assert acts == [(ch, RESUME, (5, FORWARDED[4])), (ch, 5, FORWARDED[5]),
                    (ch, 6, FORWARDED[6])]
    # And a restored snapshot keeps it: the blob carries the trimmed floor.
    again, _ = _instance(recover=False)
    again._restore(inst._blob())
    assert _sent(again.handle(ControlIn(Resend(ch, 5)), 0.0))[0] == (ch, RESUME,
                                                                      (5, FORWARDED[4]))


def test_join_window_restarts_maps_from_t_star_and_stays_exactly_once() -> None:
    # Seed 714 (every fault kind) is where a map restarted from T* without its watermarks
    # lost 141 counts to a window fired twice (ones[0] and win[0] failed together); on
    # seed 52 ones[0] restarts from T* (nothing restored) while win[1] replays.
    sim = Simulator(load_topology(TOPOLOGIES / "joins/join-window.yaml"),
                    PROTOCOLS["causal"], {},
                    kinds=("crash", "pause", "partition", "delay", "slow", "node"))
    for seed in (714, 52):
        outcome = sim.run_one(seed)
        assert outcome.verdict.passed and outcome.result.complete, outcome.verdict.totals()
    replays = [e.payload for e in outcome.result.events if e.note == "causal-replay"]
    assert any(p["instance"] == "ones[0]" and p["stateless"] for p in replays), replays
