"""What a solution means for the running system (spec R7, R9, R11).

Given the frontiers: which instances roll back (failed, or frontier below TOP; the rest
keep running untouched), what each logged edge must replay (Q'(e) of §3.6: the logged
messages whose times the receiver does not keep), and what receivers must throw away
(messages a rolled-back sender produced outside what its new frontier fixes).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from protocols.falkirk.fixedpoint import FixedPoint, Solution
from protocols.falkirk.frontier import TOP, Frontier, Time, contains
from protocols.falkirk.model import Dataflow


@dataclass(frozen=True)
class RollbackPlan:
    """``frontiers`` per instance; ``rolled_back``: instances that failed or whose frontier
    moved below TOP (sorted); ``kept``: the others, which keep running; ``replay``: per
    logged edge, the message times to resend in send order; ``discard``: per edge out of a
    rolled-back sender, the frontier (receiver's domain) outside which what it holds of
    that edge is void."""

    frontiers: Mapping[str, Frontier]
    rolled_back: tuple[str, ...]
    kept: tuple[str, ...]
    replay: Mapping[str, tuple[Time, ...]]
    discard: Mapping[str, Frontier]


def rolled_back(fronts: Mapping[str, Frontier], failed: Iterable[str]) -> tuple[str, ...]:
    """Only instances whose frontier moved roll back (selective rollback, §4.4); a failed
    source keeps TOP and is restarted where its receivers are (spec R7)."""
    down = set(failed)
    return tuple(sorted(p for p, f in fronts.items() if f is not TOP or p in down))


def replay(fp: FixedPoint, sol: Solution) -> dict[str, tuple[Time, ...]]:
    """Q'(e) = L(e, f(src)) minus the times dst keeps of e (rule R9)."""
    out: dict[str, tuple[Time, ...]] = {}
    for e, edge in fp.flow.edges.items():
        g = sol.f[edge.src]
        if e not in g.logged:
            continue
        keep = fp.replay_keep(e, g, sol.f)
        dom = fp.flow.domain(edge.dst)
        q = tuple(t for t in g.logged[e] if not contains(dom, keep, t))
        if q:
            out[e] = q
    return out


def discard(fp: FixedPoint, sol: Solution) -> dict[str, Frontier]:
    """Per edge whose sender rolled back: φ(e)(f(src)), the part of e still valid.

    What the sender produced outside it is void (R11): constraint (ii) already rolled back
    every receiver that processed any of it; a receiver drops what it holds unprocessed
    outside this frontier (a sink its staged chunks), and the sender re-executes it."""
    out: dict[str, Frontier] = {}
    for e, edge in fp.flow.edges.items():
        g = sol.f[edge.src]
        if g.is_top:  # kept running, or a source that regenerates: nothing it sent is void
            continue
        out[e] = fp.project(e, g)
    return out


def plan(flow: Dataflow, failed: Iterable[str],
         solver: type[FixedPoint] = FixedPoint) -> RollbackPlan:
    """Solve and derive everything recovery needs."""
    fp = solver(flow, failed)
    return solution_plan(fp, fp.solve())


def solution_plan(fp: FixedPoint, sol: Solution) -> RollbackPlan:
    """The plan for an already computed solution of ``fp``."""
    fronts = sol.fronts
    back = rolled_back(fronts, fp.failed)
    kept = tuple(sorted(p for p in fronts if p not in back))
    return RollbackPlan(fronts, back, kept, replay(fp, sol), discard(fp, sol))
