"""Nodes with slots and labels for the simulation host, configured like a Spark cluster.

A ``SimCluster`` is a list of nodes (``workers`` of them, ``slots`` each, labels such as
``rack=a``). Every running unit holds one slot on one node. At the start of a run the
instances are placed round-robin over the nodes in declaration order (an operator may be
pinned to nodes whose labels match a selector); a restart goes to the first live node, in
node order, with a free slot. A node that goes down takes every unit placed on it and its
slots with it; a node that comes back offers its slots again, empty.

Pure bookkeeping: no time, no randomness. ``ftctl/sim/host.py`` asks it where to put a
start and tells it when a unit dies; the kernel sees it through ``capacity()``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from protocols.contract.names import InstanceId
from protocols.contract.view import Capacity, NodeView


@dataclass
class SimNode:
    id: str
    slots: int
    labels: dict[str, str] = field(default_factory=dict)
    alive: bool = True

    def matches(self, selector: Mapping[str, str]) -> bool:
        return all(self.labels.get(k) == v for k, v in selector.items())


def parse_labels(text: str) -> dict[str, str]:
    """``"rack=a,zone=1"`` -> ``{"rack": "a", "zone": "1"}`` (ValueError naming the bad part)."""
    out: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, eq, value = part.partition("=")
        if not eq or not key.strip() or not value.strip():
            raise ValueError(f"label {part!r} is not key=value")
        out[key.strip()] = value.strip()
    return out


class SimCluster:
    """The nodes of a simulated cluster and which unit holds a slot where."""

    def __init__(self, nodes: Iterable[SimNode],
                 pins: Mapping[str, Mapping[str, str]] | None = None):
        self.nodes: dict[str, SimNode] = {}
        for n in nodes:
            if n.id in self.nodes:
                raise ValueError(f"node {n.id!r} declared twice")
            if n.slots < 0:
                raise ValueError(f"node {n.id!r}: slots must be >= 0, got {n.slots}")
            self.nodes[n.id] = n
        self.pins = {op: dict(sel) for op, sel in (pins or {}).items()}
        self.where: dict[str, str] = {}  # unit (instance) -> node holding its slot
        self._cursor = 0  # round-robin position of the initial placement

    @classmethod
    def workers(cls, count: int, slots: int,
                labels: Mapping[int, Mapping[str, str]] | None = None,
                pins: Mapping[str, Mapping[str, str]] | None = None) -> SimCluster:
        """``count`` workers ``worker-1``.. with ``slots`` each, as a Spark standalone
        cluster's ``--workers``/``--cores``; ``labels`` by worker number (1-based)."""
        if count < 1:
            raise ValueError(f"workers must be >= 1, got {count}")
        labels = labels or {}
        return cls((SimNode(f"worker-{k}", slots, dict(labels.get(k, {})))
                    for k in range(1, count + 1)), pins)

    # ------------------------------------------------------------ queries

    def used(self, node: str) -> int:
        return sum(1 for n in self.where.values() if n == node)

    def free(self, node: str) -> int:
        n = self.nodes[node]
        return max(0, n.slots - self.used(node)) if n.alive else 0

    def on(self, node: str) -> list[str]:
        """The units placed on ``node``, sorted."""
        return sorted(i for i, n in self.where.items() if n == node)

    def select(self, selector: Mapping[str, str]) -> list[str]:
        """Nodes whose labels match ``selector`` (``{}`` matches all), in node order."""
        return [n.id for n in self.nodes.values() if n.matches(selector)]

    def node(self, node: str) -> SimNode:
        try:
            return self.nodes[node]
        except KeyError:
            raise KeyError(f"no node {node!r} (nodes: {', '.join(self.nodes)})") from None

    def capacity(self) -> Capacity:
        used: dict[str, int] = dict.fromkeys(self.nodes, 0)
        for n in self.where.values():
            used[n] += 1
        return Capacity(tuple(NodeView(n.id, n.slots, used[n.id], n.alive, dict(n.labels))
                              for n in self.nodes.values()),
                        {InstanceId(i): n for i, n in self.where.items()})

    # ------------------------------------------------------------ changes

    def place(self, instance: str, op: str, initial: bool) -> str | None:
        """Give ``instance`` (of operator ``op``) a slot: round-robin at the start of the
        run, else the first live node with a free slot. None when no node has room."""
        if instance in self.where:
            return self.where[instance]
        sel = self.pins.get(op, {})
        fits = [n.id for n in self.nodes.values() if n.matches(sel) and self.free(n.id) > 0]
        if not fits:
            return None
        if initial:
            order = list(self.nodes)
            fits.sort(key=lambda n: (order.index(n) - self._cursor) % len(order))
            self._cursor = (list(self.nodes).index(fits[0]) + 1) % len(order)
        self.where[instance] = fits[0]
        return fits[0]

    def release(self, instance: str) -> bool:
        """The unit died or was stopped: its slot is free (if its node is up)."""
        return self.where.pop(instance, None) is not None

    def down(self, node: str) -> list[str]:
        """``node`` leaves: the units on it (which the host must kill); its slots go."""
        n = self.node(node)
        n.alive = False
        dead = self.on(node)
        for i in dead:
            del self.where[i]
        return dead

    def up(self, node: str) -> None:
        """``node`` (or its replacement, same labels) is back with all its slots free."""
        self.node(node).alive = True


class ClusterSlots:
    """A ``SimCluster`` as the kernel's ``Slots``: a start takes a slot when it is placed
    (round-robin for the first incarnation, else the first node with room)."""

    def __init__(self, cluster: SimCluster, ops: Mapping[str, str]):
        self.cluster = cluster
        self.ops = ops  # instance -> operator (for pins)

    def capacity(self) -> Capacity:
        return self.cluster.capacity()

    def take(self, instance: str, incarnation: int) -> bool:
        node = self.cluster.place(instance, self.ops[instance], initial=incarnation == 0)
        return node is not None

    def release(self, instance: str) -> None:
        self.cluster.release(instance)
