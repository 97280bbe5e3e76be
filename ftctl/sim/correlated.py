"""Correlated failures (``SimHost.inject``): two instances of one operator, neighbours by
index, at once (``Pair``) or the second just after the first one's replacement started
(``AfterRestart``); and capacity lost node by node and returned in stages
(``StagedLoss``).

A ring protocol (replica-ring) has each replica ping its successor and take over for it:
losing a replica with its successor, or the predecessor of a replica just reinstated,
reaches its takeover paths that independent crashes rarely do. A protocol that plans on
capacity (progressive) is reached by nodes that return one at a time, each bringing back
too few slots for everything that waits.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from ftctl.sim.faults import AfterRestart, Pair, StagedLoss, Strike
from ftctl.sim.node_faults import NodeFaults


class CorrelatedFaults(NodeFaults):
    """Neighbouring instances struck together or in turn, and staged capacity."""

    on_restart: list[Callable[[str], object]]  # called with an instance when it restarts

    def _neighbour(self, iid: str, step: int) -> str | None:
        """The instance ``step`` places after ``iid`` among its operator's (round the
        ring); None when the operator has one instance."""
        op = self.graph.instances[iid].op
        ring = [i for i in self.graph.order if self.graph.instances[i].op == op]
        if len(ring) < 2:
            return None
        return ring[(ring.index(iid) + step) % len(ring)]

    def _first_of_two(self, kind: str, target: str | None) -> str | None:
        """The live instance a correlated fault starts at: ``target``, or drawn among those
        of operators with several instances; None (skipped) when there is none."""
        if target is not None:
            if target in self.live:
                return target
            self.skip_fault(kind, target, self._not_running(target))
            return None
        ringed = [i for i in sorted(self.live) if self._neighbour(i, 1) is not None]
        if not ringed:
            self.skip_fault(kind, None, "no live instance of an operator with several")
            return None
        return self.rng.choice(ringed)

    def _pair(self, f: Pair) -> None:
        first = self._first_of_two("pair", f.target)
        if first is None:
            return
        self._strike(Strike(f.at_event, 2, (first, self._neighbour(first, 1) or first)))

    def _after_restart(self, f: AfterRestart) -> None:
        first = self._first_of_two("after-restart", f.target)
        if first is None:
            return
        before = self._neighbour(first, -1) or first

        def restarted(iid: str) -> None:
            if iid == first:
                self.on_restart.remove(restarted)
                self.at(self.now + f.within,
                        lambda: self._strike(Strike(f.at_event, 1, (before,))))

        self.on_restart.append(restarted)
        self._strike(Strike(f.at_event, 1, (first,)))
        if first in self.live:  # spared by the protocol's fault model: nothing follows
            self.on_restart.remove(restarted)

    def _staged_loss(self, f: StagedLoss) -> None:
        if self.cluster is None:
            self.skip_fault("staged", None, "no cluster (SimHost without nodes)")
            return
        up = [n.id for n in self.cluster.nodes.values() if n.alive]
        if self.spared:
            up = [n for n in up if not self._empties_group(self.cluster.on(n))]
        lost = sorted(self.rng.sample(up, max(0, min(f.nodes, len(up) - 1))))
        if not lost:
            self.skip_fault("staged", None, "no live node that may go (one stays up)")
            return
        fid = self.fault_injected("staged", ",".join(lost), sum(f.gaps[:len(lost)]),
                                  nodes=lost)
        for node in lost:
            self.node_down(node)
        back = self.now
        for node, gap in zip(lost, f.gaps, strict=False):
            back += gap
            self.at(back, partial(self._return, fid, node, node == lost[-1]))

    def _return(self, fid: int, node: str, last: bool) -> None:
        self.node_up(node)
        if last:
            self.fault_healed(fid, "staged", node)
