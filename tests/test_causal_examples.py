"""The worked examples of shared/specs/causal.md (section 4.1) as exact tests.

Literal inputs, literal expected values: the numbers are those asserted by the spec's
reference script (shared/specs/checks/causal_examples.py). Clocks and diffs are built with
``protocols.shared.treeclock`` exactly as instances build them (``TreeClock.receive_plain`` with
``depth + 1`` levels), children's diff logs are read with ``observations`` (what a child
answers to a recovery query) and the plan is ``plan_recovery`` (what the coordinator
sends). Where the paper covers a rule (stateless B: E1, T*, t_min, replay order, resume
points) the spec and the paper agree on every value here; E2 (a stateful B restored from
a snapshot) and E3 (a failed child's restore clock) are ftctl's extensions (spec R3, M2).
"""

from __future__ import annotations

from typing import Any

import pytest

from protocols.causal.coordinator import CausalCoordinator
from protocols.causal.mutants import TMinMax, TStarFromParents
from protocols.causal.recovery import (
    longest_failed_path,
    observations,
    plan_recovery,
    unobserved,
)
from protocols.shared.treeclock import Plain, TreeClock

Log = list[tuple[int, Plain]]


def _tc(id_: str, time: int, *children: TreeClock) -> TreeClock:
    return TreeClock(id_, time, {c.id: c for c in children})


class Node:
    """One instance of a literal execution: its time, last diff, clock and diff log."""

    def __init__(self, iid: str, f: int):
        self.id, self.levels = iid, f + 1
        self.time = 0
        self.last: Plain | None = None
        self.clock = TreeClock(iid)
        self.log: Log = []

    def emit(self) -> Plain:
        """A source event (rule N1)."""
        self.time += 1
        self.last = (self.id, self.time, ())
        return self.last

    def process(self, sender_diff: Plain) -> Plain:
        """Receive a message carrying ``sender_diff`` (rule N2); returns the new diff."""
        self.time += 1
        d = TreeClock.receive_plain(self.id, self.time, sender_diff, self.levels)
        self.last = d
        self.log.append((self.time, d))
        self.clock.apply_plain(d)
        return d


# ---------------------------------------------------------------- E1

def _e1() -> tuple[Node, Node, dict[int, Plain]]:
    """A1, A2 -> B -> C1, C2; f = 1. B's events: 1: A1#1->C1; 2: A2#1->C2; 3: A1#2->C1,C2;
    4: A2#2->C1; 5: A1#3->C2 (lost in flight); 6: A1#4->C1."""
    a1, a2, b, c1, c2 = (Node(n, 1) for n in ("A1", "A2", "B", "C1", "C2"))
    m1 = [a1.emit() for _ in range(4)]
    m2 = [a2.emit() for _ in range(2)]
    sent = {}
    for src, i in ((m1, 0), (m2, 0), (m1, 1), (m2, 1), (m1, 2), (m1, 3)):
        d = b.process(src[i])
        sent[d[1]] = d
    for bt in (1, 3, 4, 6):
        c1.process(sent[bt])
    for bt in (2, 3):
        c2.process(sent[bt])
    return c1, c2, sent


def test_e1_children_clocks_are_the_merged_diffs() -> None:
    c1, c2, sent = _e1()
    assert sent[5] == ("B", 5, (("A1", 3, ()),))
    assert c1.clock == _tc("C1", 4, _tc("B", 6, _tc("A1", 4), _tc("A2", 2)))
    assert c2.clock == _tc("C2", 2, _tc("B", 3, _tc("A1", 2), _tc("A2", 1)))
    assert observations(c2.log, ["B"]) == [("B", 2, (("A2", 1, ()),)),
                                           ("B", 3, (("A1", 2, ()),))]


def test_e1_one_stateless_failure() -> None:
    c1, c2, _ = _e1()
    p = plan_recovery("B", {"C1": c1.clock, "C2": c2.clock},
                      observations(c1.log, ["B"]) + observations(c2.log, ["B"]),
                      ["A1", "A2"])
    assert p.t == {"C1": 6, "C2": 3}
    assert p.t_min == 3
    assert p.tstar == _tc("B", 3, _tc("A1", 2), _tc("A2", 1))
    assert p.parents == {"A1": 3, "A2": 2}
    assert p.children == {"C1": 7, "C2": 4}
    assert p.replay == [(4, "A2", 2), (6, "A1", 4)]


@pytest.mark.parametrize(("coordinator", "holds"), [
    (CausalCoordinator, True), (TMinMax, False), (TStarFromParents, False)])
def test_e1_literal_plan_of_the_coordinator_and_its_mutants(coordinator: Any,
                                                            holds: bool) -> None:
    # The coordinator's own planning step on E1 (B stateless: R = T*). t-min-max resumes
    # C2 at 7 and loses B(A1#3); tstar-from-parents resends nothing (A1 from 5, A2 from 3).
    c1, c2, _ = _e1()
    p = coordinator.plan_of("B", {"C1": c1.clock, "C2": c2.clock},
                            observations(c1.log, ["B"]) + observations(c2.log, ["B"]),
                            ["A1", "A2"], None, None, [])
    literal = (p.t_min == 3 and p.tstar == _tc("B", 3, _tc("A1", 2), _tc("A2", 1))
               and p.parents == {"A1": 3, "A2": 2} and p.children == {"C1": 7, "C2": 4})
    assert literal == holds, p


def test_e1_t_min_is_the_minimum_and_t_star_reads_the_childrens_logs() -> None:
    # Taking the max (6) would resume C2 at 7 and lose B(A1#3); building T* from anything
    # but the children's logged subtrees up to t_min changes the parents' resume points.
    c1, _, _ = _e1()
    only_c1 = plan_recovery("B", {"C1": c1.clock}, observations(c1.log, ["B"]), ["A1", "A2"])
    assert only_c1.t_min == 6
    assert only_c1.tstar == _tc("B", 6, _tc("A1", 4), _tc("A2", 2))
    assert only_c1.parents == {"A1": 5, "A2": 3}
    assert only_c1.replay == []


# ---------------------------------------------------------------- E2

def _e2(silent_ok: bool) -> tuple[Node, Plain, Plain]:
    """A1, A2 -> B -> C; B stateful (snapshot at time 0) outputs a pair once both sides
    arrived: B:1 = A1#1 (no output), B:2 = A2#1 (the pair)."""
    a1, a2, b, c = (Node(n, 1) for n in ("A1", "A2", "B", "C"))
    b1 = b.process(a1.emit())
    b2 = b.process(a2.emit())
    if not silent_ok:
        c.process(b1)  # rule N5: a clock-only batch for B:1
    c.process(b2)
    return c, b1, b2


def test_e2_silent_event_with_and_without_n5() -> None:
    snapshot = TreeClock("B")  # the clock of B's snapshot at time 0
    for silent_ok, replay in ((True, [(2, "A2", 1)]),
                              (False, [(1, "A1", 1), (2, "A2", 1)])):
        c, _, _ = _e2(silent_ok)
        p = plan_recovery("B", {"C": c.clock}, observations(c.log, ["B"]), ["A1", "A2"],
                          restore=snapshot)
        assert p.t_min == 2 and p.children == {"C": 3}
        assert p.parents == {"A1": 1, "A2": 1}
        # Without N5 B:1 is observed nowhere: B' would run A2#1 first and emit the pair
        # at B-time 3, which C receives a second time (spec E2). The completeness check
        # (R7) refuses that plan: B-time 1 lies between the snapshot (0) and t_max (2).
        assert p.replay == replay
        assert unobserved(p.replay, 0, max(p.t.values())) == ([1] if silent_ok else [])


# ---------------------------------------------------------------- E3

def _e3(f: int) -> tuple[Node, Node]:
    """A1, A2 -> B -> C -> D; B: 1 A1#1, 2 A2#1, 3 A2#2, 4 A1#2, 5 A1#3 (lost);
    C forwards B:1..4 as C:1..4; D got C:1..3 (C:4 lost)."""
    a1, a2, b, c, d = (Node(n, f) for n in ("A1", "A2", "B", "C", "D"))
    m1 = [a1.emit() for _ in range(3)]
    m2 = [a2.emit() for _ in range(2)]
    bs = [b.process(m) for m in (m1[0], m2[0], m2[1], m1[1], m1[2])]
    cs = [c.process(x) for x in bs[:4]]
    for x in cs[:3]:
        d.process(x)
    return c, d


GRAPH = {"A1": ["B"], "A2": ["B"], "B": ["C"], "C": ["D"], "D": []}


def test_e3_two_adjacent_failures_with_f_2() -> None:
    _, d = _e3(2)
    assert longest_failed_path({"B", "C"}, GRAPH.__getitem__) == 2  # L = 2 <= f
    pc = plan_recovery("C", {"D": d.clock}, observations(d.log, ["C"]), ["B"])
    assert pc.t == {"D": 3} and pc.t_min == 3
    assert pc.tstar == _tc("C", 3, _tc("B", 3, _tc("A1", 1), _tc("A2", 2)))
    assert pc.parents == {"B": 4} and pc.children == {"D": 4}
    # B's child C failed: its t is C's restore clock T*_C; B's causes are read two
    # levels down, in D's log (spec M2, M3).
    pb = plan_recovery("B", {"C": pc.tstar}, observations(d.log, ["C", "B"]), ["A1", "A2"])
    assert pb.t == {"C": 3} and pb.t_min == 3
    assert pb.tstar == _tc("B", 3, _tc("A1", 1), _tc("A2", 2))
    assert pb.parents == {"A1": 2, "A2": 3} and pb.children == {"C": 4}
    assert pb.replay == [] and pc.replay == []


def test_e3_with_f_1_is_beyond_f() -> None:
    # D's diffs keep 2 levels: B sits at level 2 with its cause cut away, so B's order
    # cannot be read anywhere; the component's longest path (2) exceeds f (1).
    _, d = _e3(1)
    assert observations(d.log, ["C", "B"]) == [("B", 1, ()), ("B", 2, ()), ("B", 3, ())]
    assert longest_failed_path({"B", "C"}, GRAPH.__getitem__) == 2 > 1
    assert longest_failed_path({"B", "D"}, GRAPH.__getitem__) == 1
    assert longest_failed_path({"A1", "A2", "B", "C"}, GRAPH.__getitem__) == 3
