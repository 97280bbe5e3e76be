"""The spec's section 6 table, written out literally, and a checker used by the example
tests and the planted-bug tests (a bug must make ``problems`` non-empty)."""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator

from protocols.falkirk import examples as X
from protocols.falkirk.fixedpoint import NoFrontier, consistent
from protocols.falkirk.frontier import EPOCHS, TOP, sub
from protocols.falkirk.model import Dataflow, Entry, describe
from protocols.falkirk.mutants import CORRECT, PlannedBug
from protocols.falkirk.recovery import solution_plan

# name -> (builder, expected frontiers, expected replay Q'(e))
EXPECTED = {
    "A": (X.fig7a,
          {"u": "TOP", "w": "TOP", "x": "{e1:6}", "y": "{e2:4, e5:3}", "z": "{e3:3}"},
          {"e1": (("e1", 7), ("e1", 8), ("e1", 9), ("e1", 10)), "e2": (("e2", 5),),
           "e3": (("e3", 4),), "e5": (("e5", 4), ("e5", 5), ("e5", 6))}),
    "B": (lambda: X.fig7b(True),
          {"q": "TOP", "p": "TOP", "r": "TOP", "x": "empty", "y": "empty"},
          {"e2": (0, 0, 0)}),
    "B'": (lambda: X.fig7b(False),
           {"q": "empty", "p": "empty", "r": "empty", "x": "empty", "y": "empty"}, {}),
    "C": (X.fig5, {"p": "TOP", "q": "empty", "r": "TOP", "x": "empty"}, {}),
    "D": (X.fig7c,
          {"p": "TOP", "x": "<=(1, 3)", "y": "<=(1, 3)", "q": "<=(1, 4)", "r": "TOP"},
          {"e6": ((1, 4),)}),
    "F1": (X.sharder_firewall,
           {"votes": "TOP", "sharder": "TOP", "s0": "TOP", "s1": "<=3", "s2": "TOP",
            "out@s0": "TOP", "out@s1": "<=3", "out@s2": "TOP"},
           {"tos1": (4, 5, 6)}),
    "F2": (X.sharder_ephemeral,
           {"votes": "TOP", **{p: "<=3" for p in ("sharder", "s0", "s1", "s2", "out@s0",
                                                  "out@s1", "out@s2")}},
           {"v": (4, 5, 6)}),
    "F3": (X.sharder_domino,
           {"votes": "TOP", **{p: "empty" for p in ("sharder", "s0", "s1", "s2", "out@s0",
                                                    "out@s1", "out@s2")}},
           {"v": (0, 1, 2, 3, 4, 5, 6)}),
    "G": (X.inflight,
          {"lines": "TOP", "split0": "<=5", "c0": "<=5", "c1": "<=5", "out@c0": "<=5",
           "out@c1": "<=5"},
          {"a": (6, 7)}),
    "G'": (X.source_crash, {p: "TOP" for p in ("lines", "split0", "c0", "c1", "out@c0",
                                               "out@c1")},
           {"a": (7,)}),
}

# the low-watermarks the spec states (G1)
LOW_WATERMARKS = {
    "F1": {"votes": "TOP", "sharder": "<=6", "s0": "<=5", "s1": "<=3", "s2": "<=5",
           "out@s0": "<=5", "out@s1": "<=3", "out@s2": "<=5"},
    "D": {"p": "<=1", "x": "<=(1, 3)", "y": "<=(1, 3)", "q": "<=(1, 4)", "r": "<=0"},
}

SMALL = ("A", "B", "B'", "C", "D")  # brute force over every F* combination is cheap


def subsets(names: list[str]) -> Iterator[set[str]]:
    for r in range(len(names) + 1):
        yield from (set(c) for c in itertools.combinations(names, r))


def brute_force(flow: Dataflow, failed: set[str], bug: PlannedBug = CORRECT) -> dict:
    """The componentwise max of every consistent choice (itself consistent)."""
    chains = bug.solver(flow, failed).chains()
    names = list(chains)
    best: dict[str, int] | None = None
    for combo in itertools.product(*(range(len(chains[p])) for p in names)):
        pick = {p: chains[p][i] for p, i in zip(names, combo, strict=True)}
        if consistent(flow, failed, pick, bug.solver):
            idx = dict(zip(names, combo, strict=True))
            best = idx if best is None else {p: max(best[p], idx[p]) for p in names}
    assert best is not None
    top = {p: chains[p][best[p]] for p in names}
    assert consistent(flow, failed, top, bug.solver)
    return {p: e.front for p, e in top.items()}


def gc_problems(name: str, flow: Dataflow, bug: PlannedBug) -> list[str]:
    """For every failed set: lw is below the rollback, and solving after GC agrees."""
    lw = bug.watermark(flow).solve().fronts
    for failed in subsets(list(flow.nodes)):
        try:
            f = bug.solver(flow, failed).solve().fronts
        except NoFrontier as exc:
            return [f"{name}: no frontier for {exc} with failed={sorted(failed)}"]
        low = [p for p in flow.nodes if not sub(flow.domain(p), lw[p], f[p])]
        if low:
            return [f"{name}: low-watermark above the rollback of {low} ({sorted(failed)})"]
        pruned = flow.with_entries(bug.prune(flow, lw))
        try:
            g = bug.solver(pruned, failed).solve().fronts
        except NoFrontier:
            return [f"{name}: after GC nothing to restore ({sorted(failed)})"]
        if g != f:
            return [f"{name}: GC changed the rollback ({sorted(failed)})"]
    return []


def fig3_problems(bug: PlannedBug) -> list[str]:
    """Fig. 3: Buffer keeps messages, Sum a sum per time, emitted and forgotten on the
    notification. Times A = 0, B = 1; restore to ↓{A}."""
    history = [(0, "msg", 2), (1, "msg", 5), (0, "msg", 3), (0, "note", None)]
    buffer: list[int] = []
    sums: dict[int, int] = {}
    out: list[tuple[int, int]] = []
    for t, kind, v in bug.history_at(history, 0, EPOCHS, lambda ev: ev[0]):
        if kind == "msg":
            buffer.append(v)
            sums[t] = sums.get(t, 0) + v
        else:
            out.append((t, sums.pop(t, 0)))
    if (buffer, sums, out) != ([2, 3], {}, [(0, 5)]):
        return [f"fig3: restore to <=A gave {(buffer, sums, out)}"]
    return []


def example_problems(name: str, bug: PlannedBug = CORRECT, orders: int = 3) -> list[str]:
    build, fronts, replay = EXPECTED[name]
    ex = build()
    fp = bug.solver(ex.flow, ex.failed)
    try:
        sol = fp.solve()
    except NoFrontier as exc:
        return [f"{name}: no admissible frontier at {exc}"]
    plan = solution_plan(fp, sol)
    out = []
    got = describe(ex.flow, plan.frontiers)
    if got != fronts:
        out.append(f"{name}: frontiers {got} != {fronts}")
    if dict(plan.replay) != replay:
        out.append(f"{name}: replay {dict(plan.replay)} != {replay}")
    rng = random.Random(7)
    for _ in range(orders):
        order = list(ex.flow.nodes)
        rng.shuffle(order)
        other = bug.solver(ex.flow, ex.failed).solve(order=order, jacobi=False).fronts
        if other != plan.frontiers:
            out.append(f"{name}: visiting order {order} changes the result")
            break
    if name in LOW_WATERMARKS:
        lw = describe(ex.flow, bug.watermark(ex.flow).solve().fronts)
        if lw != LOW_WATERMARKS[name]:
            out.append(f"{name}: low-watermark {lw} != {LOW_WATERMARKS[name]}")
    if len(ex.flow.nodes) <= 8:
        out += gc_problems(name, ex.flow, bug)
    return out


def all_problems(bug: PlannedBug) -> list[str]:
    out = []
    for name in EXPECTED:
        out += example_problems(name, bug, orders=1)
    return out + fig3_problems(bug)


def rolled_back(name: str) -> tuple[str, ...]:
    ex = EXPECTED[name][0]()
    fp = CORRECT.solver(ex.flow, ex.failed)
    return solution_plan(fp, fp.solve()).rolled_back


def chain_tops(flow: Dataflow) -> dict[str, Entry]:
    return {p: n.entries[-1] for p, n in flow.nodes.items()}


__all__ = ["EXPECTED", "LOW_WATERMARKS", "SMALL", "TOP", "all_problems", "brute_force",
           "chain_tops", "example_problems", "fig3_problems", "rolled_back"]
