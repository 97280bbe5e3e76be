"""Spec causal.md R3 and T2 for an operator without state: nothing persisted, nothing
restored, a replacement starts from T* and t_min, no lower than g(B).

B is ``evens[0]`` of topologies/replica-chain.yaml (a filter; parents ``split[0..2]``,
children ``tag[0..2]``, all stateless). Its events, as its children logged them:
1: split[0]#1, 2: split[1]#1, 3: split[0]#2, 4: split[2]#1, 5: split[1]#2. tag[0] saw
B-times 1-5, tag[1] 1-3, tag[2] 1-4 (every event sends on every channel, N5).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from ftctl.config.load import load_topology
from ftctl.runtime.graph import ExecutionGraph
from ftctl.runtime.instance import InstanceCore
from ftctl.runtime.messages import Batch, Marker
from ftctl.sim.runner import Simulator
from protocols.causal.coordinator import FOLD_EVERY, CausalCoordinator
from protocols.causal.instance import RESUME, CausalInstance, restarts_from_tstar
from protocols.causal.messages import (
    Answer,
    CausalInit,
    Covered,
    FoldDiffLog,
    Plan,
    Replayed,
    Restored,
)
from protocols.causal.params import CausalParams
from protocols.causal.recovery import CausalIncomplete
from protocols.contract.actions import Control, InstanceAction, Persist, Report, Restart, Send
from protocols.contract.events import (
    BatchIn,
    ControlIn,
    FailureDetected,
    MarkerIn,
    ReportIn,
    Started,
)
from protocols.contract.names import InstanceId
from protocols.contract.view import GraphView, InstanceView
from protocols.registry import PROTOCOLS
from protocols.shared.logged import Resend
from protocols.shared.treeclock import TreeClock
from tests.conftest import TOPOLOGIES, load

GRAPH = ExecutionGraph(load("replica-chain"))
B = InstanceId("evens[0]")
PARENTS = [f"split[{i}]" for i in range(3)]
CHILDREN = [f"tag[{i}]" for i in range(3)]
IN = {GRAPH.channels[ch].src: ch for ch in GRAPH.instances[B].inputs}
OUT = {GRAPH.channels[ch].dst: ch for ch in GRAPH.out_channels(B)}
# B's events: B-time -> (parent, parent time).
EVENTS = {1: ("split[0]", 1), 2: ("split[1]", 1), 3: ("split[0]", 2), 4: ("split[2]", 1),
          5: ("split[1]", 2)}
SEEN = {"tag[0]": 5, "tag[1]": 3, "tag[2]": 4}


def _tc(id_: str, time: int, *children: TreeClock) -> TreeClock:
    return TreeClock(id_, time, {c.id: c for c in children})


def _answer(coord: CausalCoordinator, child: str) -> ReportIn:
    seen = SEEN[child]
    trees = [(B, bt, ((p, pt, ()),)) for bt, (p, pt) in EVENTS.items() if bt <= seen]
    clock = TreeClock(child, seen)
    for tree in trees:
        clock.apply_plain((child, 0, (tree,)))
    answer = Answer(coord.recovering[B].rid, B, (B,), OUT[child], seen, clock, trees)
    return ReportIn(InstanceId(child), 1, answer, 0.0)


def _recover(durable: dict[str, int]) -> tuple[list[Any], list[Any]]:
    """B fails after each child's durable restore clock reached ``durable`` (what a
    stateless child vouches for with ``Covered``): the restart, then what the children's
    answers lead to."""
    coord = CausalCoordinator(GraphView(GRAPH), CausalParams())
    for child, t in durable.items():
        coord.on_report(ReportIn(InstanceId(child), 1, Covered({OUT[child]: t}), 0.0),
                        None)  # type: ignore[arg-type]
    started = coord.on_failure(FailureDetected(frozenset({B}), 0.0), None)  # type: ignore[arg-type]
    acts = coord.on_report(ReportIn(B, 2, Restored(None), 0.0), None)  # type: ignore[arg-type]
    for child in CHILDREN:
        acts += coord.on_report(_answer(coord, child), None)  # type: ignore[arg-type]
    return started, acts


@pytest.mark.parametrize(("durable", "t_min", "tstar", "parents"), [
    # R1: t_min is the least level-1 entry (tag[1]: 3); T* merges B's events up to it.
    ({"tag[0]": 4, "tag[1]": 3, "tag[2]": 4}, 3,
     _tc(B, 3, _tc("split[0]", 2), _tc("split[1]", 1)),
     {IN["split[0]"]: 3, IN["split[1]"]: 2, IN["split[2]"]: 1}),
    # T2/T3: tag[2] may restart from B-time 2 and ask for 3 again, so B' starts at g = 2
    # and regenerates B-times 3 and 4 (filtered below each child's resume point).
    ({"tag[0]": 4, "tag[1]": 3, "tag[2]": 2}, 2,
     _tc(B, 2, _tc("split[0]", 1), _tc("split[1]", 1)),
     {IN["split[0]"]: 2, IN["split[1]"]: 2, IN["split[2]"]: 1}),
])
def test_the_coordinator_restarts_a_stateless_instance_from_nothing_at_t_star(
        durable: dict[str, int], t_min: int, tstar: TreeClock, parents: dict[int, int]) -> None:
    started, acts = _recover(durable)
    [restart] = [a for a in started if isinstance(a, Restart)]
    assert restart.instance == B and restart.restore is None  # 0 snapshot bytes read
    [plan] = [a.msg for a in acts if isinstance(a, Control) and isinstance(a.msg, Plan)]
    assert plan.tstar == tstar and plan.tstar.time == t_min
    # R5: each child from one past its level-1 entry; R4: each parent from 1 + T*[A].
    assert plan.resume == {OUT[c]: SEEN[c] + 1 for c in CHILDREN}
    assert {a.msg.channel: a.msg.start for a in acts
            if isinstance(a, Control) and isinstance(a.msg, Resend)} == parents


def _replacement() -> tuple[CausalInstance, list[InstanceAction]]:
    inst = CausalInstance(InstanceView.of(GRAPH, B), {B: InstanceCore(GRAPH, B)},
                          CausalParams())
    acts = inst.handle(Started(B, 2, "restart", init=CausalInit(0, True, IN)), 0.0)
    return inst, acts


def _batch(parent: str, ptime: int, seq: int) -> BatchIn:
    diff = (parent, ptime, (("lines[0]", ptime, ()),))
    return BatchIn(B, IN[parent], Batch([(f"w{ptime}", 1, 0)], seq, None, diff))


def test_a_stateless_replacement_reads_nothing_and_starts_with_t_star_and_t_min() -> None:
    inst, acts = _replacement()
    # Nothing restored: R is T*, known only with the plan.
    assert [a.msg for a in acts if isinstance(a, Report)] == [Restored(None)]
    tstar = _tc(B, 3, _tc("split[0]", 2), _tc("split[1]", 1))
    replay = [(bt, p, pt) for bt, (p, pt) in EVENTS.items()]
    resume = {OUT[c]: SEEN[c] + 1 for c in CHILDREN}
    acts += inst.handle(ControlIn(Plan(replay, resume, tstar, upto=5)), 0.0)
    assert inst.time == 3 and inst.clock == tstar
    assert inst.ptime == {IN["split[0]"]: 2, IN["split[1]"]: 1, IN["split[2]"]: 0}
    # Every event sends one batch per channel (N5): its output positions are t_min.
    assert {ch: inst.core.out_seq[ch] for ch in OUT.values()} == dict.fromkeys(OUT.values(), 3)
    # Each parent resends from 1 + T*[A] (R4), so its resume marker is accepted; the
    # replay runs split[2]#1 as B-time 4 and split[1]#2 as 5.
    for parent, start in (("split[2]", 1), ("split[1]", 2)):
        acts += inst.handle(MarkerIn(B, IN[parent], Marker(RESUME, meta=(start, None))), 0.0)
    acts += inst.handle(_batch("split[2]", 1, 7), 0.0)
    acts += inst.handle(_batch("split[1]", 2, 9), 0.0)
    assert inst.time == 5 and Replayed in [type(a.msg) for a in acts if isinstance(a, Report)]
    # R5: B-time 4 only to tag[1] (resumes at 4); 5 to tag[1] and tag[2]; tag[0] saw both.
    sent = sorted((a.channel, a.msg.seq, a.msg.meta[1]) for a in acts
                  if isinstance(a, Send) and isinstance(a.msg, Batch))
    assert sent == sorted([(OUT["tag[1]"], 4, 4), (OUT["tag[1]"], 5, 5),
                           (OUT["tag[2]"], 5, 5)])
    assert not [a for a in acts if isinstance(a, Persist)]


@pytest.mark.parametrize("start", [1, 3])
def test_a_parent_resuming_off_t_star_is_refused(start: int) -> None:
    inst, _ = _replacement()
    tstar = _tc(B, 3, _tc("split[0]", 2), _tc("split[1]", 1))
    inst.handle(ControlIn(Plan([(1, "split[0]", 1), (2, "split[1]", 1), (3, "split[0]", 2)],
                               {}, tstar, upto=3)), 0.0)
    with pytest.raises(CausalIncomplete, match="split\\[1\\] resumes"):
        inst.handle(MarkerIn(B, IN["split[1]"], Marker(RESUME, meta=(start, None))), 0.0)


# Schedules (every fault kind) that broke stateless restarts from T* before each child's
# t was floored at its restore clock, failed children included, and before a replacement
# stopped vouching (``Covered``) for a history it had not rebuilt yet; windowed 2200: a
# stateless parent restarted with its stateful child finished replaying before the
# child's plan and was asked to resend on top of its own resume (spec M4); join-window
# 714: a map restarted from T* in a topology with event time forwarded a lower watermark
# than its predecessor, and a window fired twice (its parents' RESUME markers now carry
# each channel's watermark: tests/test_causal_watermarks.py); join-then-window 1714 and
# progressive-small 413: a RESUME asked for an earlier incarnation of a child reached a
# newer one (RESUMEs name the incarnation now: tests/test_causal_resume.py).
REGRESSIONS = [("diamond", 1190), ("diamond", 35), ("replica-chain", 1065),
               ("replica-chain", 1167), ("replica-chain", 1371), ("replica-chain", 1384),
               ("replica-chain", 254), ("replica-chain", 269), ("wordcount", 29),
               ("windowed", 2200), ("joins/join-window", 714),
               ("joins/join-then-window", 1714), ("progressive-small", 413)]
KINDS = ("crash", "pause", "partition", "delay", "slow", "node")


@pytest.mark.parametrize(("topology", "seed"), REGRESSIONS, ids=lambda v: str(v))
def test_stateless_restarts_stay_exactly_once(topology: str, seed: int) -> None:
    sim = Simulator(load_topology(TOPOLOGIES / f"{topology}.yaml"), PROTOCOLS["causal"], {},
                    kinds=KINDS)  # type: ignore[arg-type]
    outcome = sim.run_one(seed)
    assert outcome.verdict.passed and outcome.result.complete, outcome.verdict.totals()
    # Within f recovery stays local (spec M5): a fallback only for a component past f.
    assert all(e.payload["reason"] == "beyond-f" and e.payload["L"] > e.payload["f"]
               for e in outcome.result.events if e.note == "causal-fallback")


# ---------------------------------------------------------------- T3: folding


def _entry(seq: int, evens: int, split: str, stime: int) -> tuple[int, Any]:
    # tag[0]'s diff for evens[0]'s batch at evens-time ``evens``, caused by split#stime.
    return (seq, ("tag[0]", seq, (("evens[0]", evens, ((split, stime, (("lines[0]", stime,
                                                                        ()),)),)),)))


def _tag0(log: list[tuple[int, Any]]) -> CausalInstance:
    tag = InstanceId("tag[0]")
    inst = CausalInstance(InstanceView.of(GRAPH, tag), {tag: InstanceCore(GRAPH, tag)},
                          CausalParams())
    inst.dlog[OUT["tag[0]"]] = list(log)
    return inst


LOG = [_entry(1, 1, "split[0]", 1), _entry(2, 2, "split[1]", 1),
       _entry(3, 3, "split[0]", 2)]


def test_a_diff_log_about_a_stateless_parent_folds_what_no_recovery_reads_one_by_one(
) -> None:
    # Spec T3 with f = 2: entries whose evens[0] (level 1) and split (level 2) times are
    # at or below their g merge into one; B-time 3 is past evens[0]'s g and stays.
    inst = _tag0(LOG)
    ch = OUT["tag[0]"]
    inst.handle(ControlIn(FoldDiffLog(ch, {"evens[0]": 2, "split[0]": 5, "split[1]": 1})),
                0.0)
    assert inst.dlog[ch] == [
        (2, ("tag[0]", 2, (("evens[0]", 2, (("split[0]", 1, (("lines[0]", 1, ()),)),
                                            ("split[1]", 1, (("lines[0]", 1, ()),)))),))),
        LOG[2]]
    # Level 2 counts too: split[1]'s g 0 keeps B-time 2 (and all after it) unfolded.
    inst = _tag0(LOG)
    inst.handle(ControlIn(FoldDiffLog(ch, {"evens[0]": 3, "split[0]": 5, "split[1]": 0})),
                0.0)
    assert inst.dlog[ch] == LOG


def test_shard_snapshots_keep_a_bounded_diff_log_about_the_stateless_sharder() -> None:
    # 60,000 votes: 600 sharder events. Without folding every shard's snapshot carries
    # a diff-log entry for each of them; folded every FOLD_EVERY snapshot intervals of
    # g (100 events), what is left lies between the last fold and now.
    lengths: list[int] = []

    class Watched(CausalInstance):
        def _persist(self) -> None:
            if self.core.spec.op == "shard":
                lengths.append(max(len(v) for v in self.dlog.values()))
            super()._persist()

    spec = dataclasses.replace(PROTOCOLS["causal"], instance=Watched)
    topology = load_topology(TOPOLOGIES / "sharder.yaml").with_input(records=60_000)
    # Snapshots every snapshot_every batches, whatever the shards' state: the bound is
    # the fold's (with the balance, g moves at the shards' slower snapshots).
    sim = Simulator(topology, spec, {"snapshot_balance": 0})
    assert sim.run_one(1).verdict.passed
    gap = FOLD_EVERY * CausalParams().snapshot_every
    assert len(lengths) > 300 and max(lengths) <= gap + 40, max(lengths)


def test_operators_without_state_restart_from_tstar_and_no_other() -> None:
    assert all(restarts_from_tstar(kind) for kind in ("map", "filter", "flat_map"))
    assert not any(restarts_from_tstar(kind) for kind in ("window", "join", "count", "sink"))
