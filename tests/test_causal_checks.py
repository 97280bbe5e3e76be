"""Spec causal.md R7 and R8: a replacement checks its plan before it replays and its clock
after. Either failing within f is an internal error (``CausalIncomplete``) that fails the
run, never a fallback; ``diff-log-trimmed-early`` (spec section 5, row 10) plants one.

The instance is ``evens[0]`` of topologies/replica-chain.yaml (parents ``split[0..2]``,
three children), restarted from its time-0 snapshot (s = 0); only ``split[0]`` resends.
"""

from __future__ import annotations

from typing import Any

import pytest

from ftctl.config.load import load_topology
from ftctl.runtime.graph import ExecutionGraph
from ftctl.runtime.instance import InstanceCore
from ftctl.runtime.messages import Batch, Marker
from ftctl.sim.runner import Simulator
from protocols.causal.instance import RESUME, CausalInstance
from protocols.causal.messages import CausalInit, Plan, Replayed
from protocols.causal.params import CausalParams
from protocols.causal.recovery import CausalIncomplete, unobserved
from protocols.contract.actions import InstanceAction, Report, Send
from protocols.contract.events import BatchIn, ControlIn, MarkerIn, Started
from protocols.contract.names import InstanceId
from protocols.contract.view import InstanceView
from protocols.registry import PROTOCOLS, resolve
from protocols.shared.treeclock import TreeClock
from tests.conftest import TOPOLOGIES, load

# A stateful B: it restores its (time-0) snapshot and replays up to T* (a stateless one
# would start at T*, spec R3).
GRAPH = ExecutionGraph(load("wordcount"))
B = InstanceId("count[0]")
PARENT = "split[0]"
CH = next(ch for ch in GRAPH.instances[B].inputs if GRAPH.channels[ch].src == PARENT)


def _replacement() -> CausalInstance:
    inst = CausalInstance(InstanceView.of(GRAPH, B), {B: InstanceCore(GRAPH, B)},
                          CausalParams())
    inst.handle(Started(B, 1, "restart", init=CausalInit(0, True, {PARENT: CH})), 0.0)
    # The parent's resend starts with where it resumes: after the time-0 snapshot.
    inst.handle(MarkerIn(B, CH, Marker(RESUME, meta=(1, None))), 0.0)
    return inst


def _resent(seq: int) -> BatchIn:
    # The parent's batch seq, sent at the parent's time seq (its diff has one cause).
    diff = (PARENT, seq, (("lines[0]", seq, ()),))
    return BatchIn(B, CH, Batch([(f"w{seq}", 1, 0)], seq, None, diff))


def _reports(acts: list[InstanceAction]) -> list[Any]:
    return [type(a.msg) for a in acts if isinstance(a, Report)]


def test_unobserved_reads_the_gaps_between_the_restore_time_and_the_newest_child_time() -> None:
    replay = [(2, PARENT, 2), (4, PARENT, 4)]
    assert unobserved(replay, 0, 4) == [1, 3]
    assert unobserved(replay, 1, 2) == []
    assert unobserved(replay, 4, 9) == [5, 6, 7, 8, 9]
    assert unobserved([], 3, 3) == []


def test_a_plan_with_an_unobserved_event_is_refused_before_anything_runs() -> None:
    # B-times 1 and 3 observed, 2 not: B' could not place it (spec R7).
    inst = _replacement()
    plan = Plan([(1, PARENT, 1), (3, PARENT, 3)], {}, TreeClock(B), upto=3)
    with pytest.raises(CausalIncomplete, match=r"B-times \[2\]"):
        inst.handle(ControlIn(plan), 0.0)


def test_a_complete_plan_replays_and_reports_when_the_clock_covers_t_star() -> None:
    inst = _replacement()
    tstar = TreeClock(B, 2, {PARENT: TreeClock(PARENT, 2)})
    plan = Plan([(1, PARENT, 1), (2, PARENT, 2)], {}, tstar, upto=2)
    acts = inst.handle(ControlIn(plan), 0.0)
    assert Replayed not in _reports(acts)  # waiting for the parent's resend
    acts = inst.handle(_resent(1), 0.0)
    assert Replayed not in _reports(acts)
    acts = inst.handle(_resent(2), 0.0)
    assert _reports(acts).count(Replayed) == 1
    assert inst.time == 2 and tstar.leq(inst.clock)
    # N5: both events sent on every output channel.
    assert len([a for a in acts if isinstance(a, Send)]) == len(inst.core.out_channels) == 1


def test_a_replay_that_does_not_rebuild_t_star_fails_instead_of_merging_it() -> None:
    # The children rely on B-time 2 caused by split[0]#5; the replay rebuilds split[0]#2
    # only (spec R8). Merging T* would hide the gap.
    inst = _replacement()
    tstar = TreeClock(B, 2, {PARENT: TreeClock(PARENT, 5)})
    inst.handle(ControlIn(Plan([(1, PARENT, 1), (2, PARENT, 2)], {}, tstar, upto=2)), 0.0)
    inst.handle(_resent(1), 0.0)
    with pytest.raises(CausalIncomplete, match="does not cover T"):
        inst.handle(_resent(2), 0.0)


def test_a_diff_log_trimmed_past_the_snapshot_is_reported_as_incomplete() -> None:
    # diff-log-trimmed-early drops five B-times more than the parent's snapshot allows:
    # join-then-window seed 2 restarts win[0] from its snapshot at 40 while counts[0] saw
    # 41, whose diff it had already dropped. The unmodified protocol holds there.
    topology = load_topology(TOPOLOGIES / "joins" / "join-then-window.yaml")
    info, params = resolve("causal/diff-log-trimmed-early")
    with pytest.raises(CausalIncomplete, match=r"win\[0\]: B-times \[41\] after 40"):
        Simulator(topology, info, params).run_one(2)
    assert Simulator(topology, PROTOCOLS["causal"], {}).run_one(2).verdict.passed
