"""Nodes leaving and returning (``SimHost.inject``: node loss; scenarios' node faults and
``restore-capacity``), with a ``SimCluster``. Capacity that changes at one instant is
planned once: the coordinator hears ``CapacityChanged`` when the instant's changes are all
applied."""

from __future__ import annotations

from typing import Any

from ftctl.sim.faults import NodeLoss
from ftctl.sim.striking import Striking


class NodeFaults(Striking):
    """Node loss and return on the host's cluster."""

    heap: list[tuple[float, int, str, Any]]
    capacity_moved: bool  # a node left or returned: plan when the instant ends

    def _node_loss(self, f: NodeLoss) -> None:
        if self.cluster is None:
            self.skip_fault("node", f.node, "no cluster (SimHost without nodes)")
            return
        up = [n.id for n in self.cluster.nodes.values() if n.alive]
        if self.spared:  # the protocol's fault model keeps one unit of each group up
            up = [n for n in up if not self._empties_group(self.cluster.on(n))]
        node = f.node if f.node is not None else (self.rng.choice(up) if up else None)
        if node is None or node not in up:
            why = ("no live node" if node is None and not self.spared
                   else "no live node whose loss leaves a unit of each group up"
                   if node is None else f"{node} is down or holds a group's last units")
            self.skip_fault("node", node, why)
            return
        fid = self.fault_injected("node", node, f.down_for)
        self.node_down(node)

        def heal() -> None:
            self.node_up(node)
            self.fault_healed(fid, "node", node)

        self.at(self.now + f.down_for, heal)

    def node_down(self, node: str) -> list[str]:
        """``node`` leaves: every unit placed on it dies (as ``_kill``), its slots go; the
        coordinator hears ``CapacityChanged`` at the end of this instant (with every other
        node that leaves or returns in it) and the failure after a detection delay."""
        assert self.cluster is not None, "node_down needs a SimHost with a cluster"
        victims = self.cluster.down(node)
        down = self._log("node-down", node=node, instances=victims)
        for v in victims:
            self._apply(self.kernel.lost(v))
            self._kill(v)
        if victims:
            self.stats.failures += 1
            self.stats.failed_instances.extend(victims)
            detect = self.now + 0.002 + 0.004 * self.rng.random()
            self._push(detect, "node_detect", (frozenset(victims), frozenset({node}), down.seq))
        self.capacity_moved = True
        return victims

    def node_up(self, node: str) -> None:
        """``node`` (or its replacement, same labels) is back with all its slots free."""
        assert self.cluster is not None, "node_up needs a SimHost with a cluster"
        self.cluster.up(node)
        self._log("node-up", node=node)
        self.capacity_moved = True

    def _settle_capacity(self) -> None:
        """Once the nodes that leave or return at this instant all have: the coordinator
        hears ``CapacityChanged`` once, and plans once for them together."""
        if self.capacity_moved and (not self.heap or self.heap[0][0] > self.now):
            self.capacity_moved = False
            self._apply(self.kernel.capacity_changed(self.now))

    def _on_node_detect(self, data: tuple[frozenset[str], frozenset[str], int]) -> None:
        failed, nodes, down = data
        self._log("failure-detected", caused_by=down, instances=sorted(failed),
                  nodes=sorted(nodes))
        self.stats.recoveries += 1
        self._apply(self.kernel.failure(failed, self.now, nodes=nodes))
