"""Garbage collection under the low-watermark (§4.2, spec G1-G3).

The low-watermark is the Figure 6 fixed point over persisted entries only, as if every
instance had failed: no TOP except a source's (its input is replayable), nothing held
only in memory. The in-flight rule R5 stays on (the reference script's reading; spec G1
says off): a later failure applies it with the receiver's closed epochs C(e), so a
watermark computed without it could sit above that rollback whenever C(e) lags a
persisted frontier. No failure can roll an instance below it, so its
checkpoints below ``lw`` (not ``lw`` itself, spec D9) and the logged messages its
receivers keep at ``lw`` may go.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from protocols.falkirk.fixedpoint import FixedPoint, Solution
from protocols.falkirk.frontier import Frontier, Time, contains, sub
from protocols.falkirk.model import Chains, Dataflow, Entry


class Watermark(FixedPoint):
    """The solver for the low-watermark: everyone failed."""

    def __init__(self, flow: Dataflow):
        super().__init__(flow, failed=flow.nodes)

    def solve(self, chains: Chains | None = None, order: Iterable[str] | None = None,
              jacobi: bool = True) -> Solution:
        """The coordinator recomputes the watermark after every report: by chaotic
        iteration (the same result, far fewer checks) unless an order is asked for."""
        if order is None and jacobi:
            return self.solve_worklist(chains)
        return super().solve(chains, order, jacobi)


def low_watermark(flow: Dataflow, solver: type[Watermark] = Watermark) -> dict[str, Frontier]:
    """``lw(p)`` for every instance."""
    return solver(flow).solve().fronts


def keep_entry(flow: Dataflow, p: str, entry: Entry, lw: Mapping[str, Frontier]) -> bool:
    """Entries at or above the watermark stay (the one at ``lw`` is still restorable)."""
    return sub(flow.domain(p), lw[p], entry.front)


def prune(flow: Dataflow, lw: Mapping[str, Frontier]) -> dict[str, tuple[Entry, ...]]:
    """F* after GC: entries below ``lw`` dropped."""
    return {p: tuple(e for e in n.entries if keep_entry(flow, p, e, lw))
            for p, n in flow.nodes.items()}


def collectable(flow: Dataflow, chains: Chains,
                lw: Mapping[str, Frontier]) -> dict[str, tuple[Frontier, ...]]:
    """Per instance, the frontiers of the entries GC deletes (spec G2)."""
    out = {}
    for p, chain in chains.items():
        gone = tuple(e.front for e in chain if not keep_entry(flow, p, e, lw))
        if gone:
            out[p] = gone
    return out


def log_trim(flow: Dataflow, lw: Mapping[str, Frontier]) -> dict[str, Frontier]:
    """Per logged edge, the frontier (receiver's domain) of messages no longer needed:
    every time inside ``lw(dst)`` is kept by the receiver in any failure."""
    out = {}
    for e, edge in flow.edges.items():
        if any(e in en.logged for en in flow.nodes[edge.src].entries):
            out[e] = lw[edge.dst]
    return out


def trimmed(flow: Dataflow, e: str, times: tuple[Time, ...],
            lw: Mapping[str, Frontier]) -> tuple[Time, ...]:
    """The logged times of ``e`` that survive the trim."""
    dst = flow.edges[e].dst
    return tuple(t for t in times if not contains(flow.domain(dst), lw[dst], t))
