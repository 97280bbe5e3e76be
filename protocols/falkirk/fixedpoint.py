"""Figure 6: the greatest consistent rollback frontiers over a failed set.

Start every instance at the top of its chain F*; repeatedly lower each instance to the
largest entry ``g ⊆ f(p)`` that satisfies, against its neighbours' current values,

  (i)   every non-logged output e:  D̄(e, g) ⊆ kept(e, g)          (§3.5, discarded)
  (ii)  every input d:              M̄(d, g) ⊆ φ(d)(f(src d))       (§3.5, delivered)
  (iii) every input d:              N̄(p, g) ⊆ φ(d)(fn(src d))      (§3.5, notifications)

and set ``fn'(p) = g ∩ fn(p) ∩ ⋂_d φ(d)(fn(src d))``. Values only move down a finite
chain, so the loop ends; the empty entry is always admissible once everything upstream
is empty, and sources keep TOP (spec D8), so a candidate always exists (§3.6).

``kept`` is spec rule R5: a receiver that keeps TOP holds only what it closed on e when
the sender stops, since in ftctl what was in flight dies with the sender.

The hooks (``project``, ``kept``, ``admissible``, ``chains``...) are methods so planted
bugs (``protocols.falkirk.mutants``) can replace one rule at a time.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from protocols.falkirk.frontier import TOP, Frontier, meet, sub
from protocols.falkirk.model import Chains, Dataflow, Entry


class NoFrontier(Exception):
    """An instance has no admissible entry (its chain lacks the empty frontier)."""


@dataclass(frozen=True)
class Solution:
    """``f``: the chosen entry per instance; ``fn``: the notification frontiers;
    ``sweeps``: rounds until nothing changed."""

    f: Mapping[str, Entry]
    fn: Mapping[str, Frontier]
    sweeps: int

    @property
    def fronts(self) -> dict[str, Frontier]:
        return {p: e.front for p, e in self.f.items()}


class FixedPoint:
    """Figure 6 over ``flow`` with ``failed`` instances.

    ``inflight`` applies rule R5. ``fenced`` names edges whose receiver was reset in a
    recovery round that never resumed: what was in flight on them is gone even though
    the sender keeps running, so R5 applies to them whatever the sender does.
    """

    def __init__(self, flow: Dataflow, failed: Iterable[str] = (), inflight: bool = True,
                 fenced: Iterable[str] = ()):
        self.flow = flow
        self.failed = frozenset(failed)
        self.inflight = inflight
        self.fenced = frozenset(fenced)
        unknown = self.failed - set(flow.nodes)
        if unknown:
            raise KeyError(f"failed instances not in the graph: {sorted(unknown)}")

    # ------------------------------------------------------------ the chains

    def survives(self, p: str, entry: Entry) -> bool:
        """Whether ``entry`` is still restorable: a failed instance loses TOP and what it
        held only in memory, except a durable TOP (a source)."""
        if p not in self.failed:
            return True
        return entry.durable or (not entry.is_top and not entry.volatile)

    def chains(self) -> dict[str, tuple[Entry, ...]]:
        """F*(p) after the failure."""
        return {p: tuple(e for e in n.entries if self.survives(p, e))
                for p, n in self.flow.nodes.items()}

    # ------------------------------------------------------------ the rules

    def project(self, e: str, entry: Entry) -> Frontier:
        """φ(e) at src's entry."""
        if entry.is_top:
            return TOP
        return self.flow.edges[e].project(entry)

    def project_n(self, e: str, fn: Frontier) -> Frontier:
        return TOP if fn is TOP else self.flow.edges[e].project_n(fn)

    def restarts(self, src: str, g: Entry) -> bool:
        """The sender stops (and loses its in-flight messages) at this choice."""
        return not g.is_top or src in self.failed

    def kept(self, e: str, g: Entry, f: Mapping[str, Entry]) -> Frontier:
        """What the receiver of ``e`` keeps of it when the sender takes entry ``g``."""
        edge = self.flow.edges[e]
        k = f[edge.dst].front
        if self.inflight and edge.closed is not None and (
                self.restarts(edge.src, g) or e in self.fenced):
            k = meet(self.flow.domain(edge.dst), k, edge.closed)
        return k

    def discards_ok(self, p: str, g: Entry, f: Mapping[str, Entry]) -> bool:
        """(i): no receiver rolls back below what p discarded (logged edges are exempt)."""
        for e, d in g.discarded.items():
            dst = self.flow.edges[e].dst
            if not sub(self.flow.domain(dst), d, self.kept(e, g, f)):
                return False
        return True

    def consumed_ok(self, p: str, g: Entry, f: Mapping[str, Entry]) -> bool:
        """(ii): p consumed only what its senders' rollbacks fix."""
        dom = self.flow.domain(p)
        for d in self.flow.ins(p):
            src = self.flow.edges[d].src
            if not sub(dom, g.consumed.get(d, dom.empty), self.project(d, f[src])):
                return False
        return True

    def notified_ok(self, p: str, g: Entry, fn: Mapping[str, Frontier]) -> bool:
        """(iii): p processed only notifications its senders' fn still promise."""
        if not self.flow.notifications:
            return True
        dom = self.flow.domain(p)
        n = dom.empty if g.notified is None else g.notified
        for d in self.flow.ins(p):
            if not sub(dom, n, self.project_n(d, fn[self.flow.edges[d].src])):
                return False
        return True

    def admissible(self, p: str, g: Entry, f: Mapping[str, Entry],
                   fn: Mapping[str, Frontier]) -> bool:
        return (self.discards_ok(p, g, f) and self.consumed_ok(p, g, f)
                and self.notified_ok(p, g, fn))

    def new_fn(self, p: str, g: Entry, fn: Mapping[str, Frontier]) -> Frontier:
        """fn'(p) = g ∩ fn(p) ∩ ⋂_d φ(d)(fn(src d)): Fig. 6's second line, whose greatest
        candidate exists because frontiers are closed under intersection."""
        dom = self.flow.domain(p)
        out = meet(dom, g.front, fn[p])
        if self.flow.notifications:
            for d in self.flow.ins(p):
                out = meet(dom, out, self.project_n(d, fn[self.flow.edges[d].src]))
            n = dom.empty if g.notified is None else g.notified
            assert sub(dom, n, out), f"N̄({p}) outside its notification frontier"
        return out

    def replay_keep(self, e: str, g: Entry, f: Mapping[str, Entry]) -> Frontier:
        """The times of ``e`` its receiver keeps, so a replay skips them (rule R9)."""
        return self.kept(e, g, f)

    def finished(self, changed: bool, sweeps: int) -> bool:
        return not changed

    # ------------------------------------------------------------ the loop

    def lower(self, p: str, chain: tuple[Entry, ...], i: int, f: Mapping[str, Entry],
              fn: Mapping[str, Frontier]) -> tuple[int, Frontier]:
        """Fig. 6 at one instance: the largest admissible entry at or below ``chain[i]``
        against the neighbours' values, and the new notification frontier."""
        while i >= 0 and not self.admissible(p, chain[i], f, fn):
            i -= 1
        if i < 0:
            raise NoFrontier(p)
        return i, self.new_fn(p, chain[i], fn)

    def solve(self, chains: Chains | None = None, order: Iterable[str] | None = None,
              jacobi: bool = True) -> Solution:
        """Greatest consistent frontiers.

        ``jacobi``: every instance of a sweep reads the values of the previous sweep (the
        default); otherwise each reads the latest, in ``order``. Both reach the same result
        (the consistent choices are closed under componentwise max, spec R6).
        """
        fstar = dict(chains) if chains is not None else self.chains()
        for p, chain in fstar.items():
            if not chain:
                raise NoFrontier(p)
        idx = {p: len(c) - 1 for p, c in fstar.items()}
        fn: dict[str, Frontier] = {p: c[-1].front for p, c in fstar.items()}
        names = list(order) if order is not None else list(fstar)
        sweeps = 0
        while True:
            sweeps += 1
            snap_f = {p: fstar[p][idx[p]] for p in fstar}
            snap_fn = dict(fn)
            changed = False
            for p in names:
                cur_f = snap_f if jacobi else {q: fstar[q][idx[q]] for q in fstar}
                cur_fn = snap_fn if jacobi else fn
                i, nfn = self.lower(p, fstar[p], idx[p], cur_f, cur_fn)
                if i != idx[p] or nfn != fn[p]:
                    changed = True
                idx[p], fn[p] = i, nfn
            if self.finished(changed, sweeps):
                return Solution({p: fstar[p][idx[p]] for p in fstar}, fn, sweeps)

    def neighbours(self, p: str) -> tuple[str, ...]:
        """Whose rules read p's values: its senders (their D̄ against what p keeps) and
        its receivers (their M̄ and N̄ against what p fixes)."""
        flow = self.flow
        return (*(flow.edges[d].src for d in flow.ins(p)),
                *(flow.edges[e].dst for e in flow.outs(p)))

    def solve_worklist(self, chains: Chains | None = None) -> Solution:
        """The same greatest fixed point by chaotic iteration: visit every instance once,
        then only the neighbours of one whose values moved. Every update is monotone and
        starts from the top, so any fair order ends at the same greatest consistent
        choice (spec R6); this one checks far fewer entries on a wide graph. ``sweeps``
        counts the instances visited."""
        fstar = dict(chains) if chains is not None else self.chains()
        for p, chain in fstar.items():
            if not chain:
                raise NoFrontier(p)
        idx = {p: len(c) - 1 for p, c in fstar.items()}
        f = {p: c[-1] for p, c in fstar.items()}
        fn: dict[str, Frontier] = {p: c[-1].front for p, c in fstar.items()}
        work = deque(fstar)
        queued = set(fstar)
        visits = 0
        while work:
            p = work.popleft()
            queued.discard(p)
            visits += 1
            i, nfn = self.lower(p, fstar[p], idx[p], f, fn)
            if i == idx[p] and nfn == fn[p]:
                continue
            idx[p], f[p], fn[p] = i, fstar[p][i], nfn
            for q in self.neighbours(p):
                if q not in queued:
                    queued.add(q)
                    work.append(q)
        return Solution(f, fn, visits)


def solve(flow: Dataflow, failed: Iterable[str], *, solver: type[FixedPoint] = FixedPoint,
          chains: Chains | None = None) -> Solution:
    """The rollback frontiers when ``failed`` fail (spec R4)."""
    return solver(flow, failed).solve(chains)


def consistent(flow: Dataflow, failed: Iterable[str], pick: Mapping[str, Entry],
               solver: type[FixedPoint] = FixedPoint) -> bool:
    """Whether one choice of entries satisfies every constraint of §3.5 (with R5), the
    notification frontiers taken as large as that choice allows."""
    fp = solver(flow, failed)
    fn: dict[str, Frontier] = {p: e.front for p, e in pick.items()}
    if flow.notifications:
        for _ in range(4 * len(pick) + 4):
            new = {}
            for p in pick:
                v = fn[p]
                for d in flow.ins(p):
                    v = meet(flow.domain(p), v, fp.project_n(d, fn[flow.edges[d].src]))
                new[p] = v
            if new == fn:
                break
            fn = new
    def notes_ok(p: str, g: Entry) -> bool:
        dom = flow.domain(p)
        n = dom.empty if g.notified is None else g.notified
        return not flow.notifications or sub(dom, n, fn[p])

    return all(fp.discards_ok(p, g, pick) and fp.consumed_ok(p, g, pick) and notes_ok(p, g)
               for p, g in pick.items())
