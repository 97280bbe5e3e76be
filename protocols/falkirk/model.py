"""What the coordinator knows about each instance: the chain F*(p) and its metadata Xi.

For every restorable frontier ``f`` of an instance the paper's Table 1 keeps M̄ (messages
consumed, per input edge), N̄ (notifications processed), D̄ (messages discarded, per
non-logged output edge, in the receiver's domain) and L (messages logged, per logged
output edge). ``Dataflow`` is the graph those entries live on: instances with a domain
and their chain, edges with their projection φ (§3.2).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from protocols.falkirk.frontier import TOP, Domain, Frontier, Time


@dataclass(frozen=True)
class Entry:
    """One restorable frontier and its Xi(p, f).

    ``consumed`` (M̄) is in the instance's own domain, ``discarded`` (D̄) in the receiving
    instance's domain; a missing input or output is empty. ``logged`` lists the times of the
    messages logged on an output edge, in send order. ``sent`` counts messages per output
    edge, which the sequence-number projection reads. ``volatile`` entries live only in
    memory (a sink's uncommitted epochs) and die with the instance; a ``durable`` TOP
    survives a crash (a source, whose input is replayable: spec D8).
    """

    front: Frontier
    consumed: Mapping[str, Frontier] = field(default_factory=dict)
    discarded: Mapping[str, Frontier] = field(default_factory=dict)
    notified: Frontier | None = None
    logged: Mapping[str, tuple[Time, ...]] = field(default_factory=dict)
    sent: Mapping[str, int] = field(default_factory=dict)
    volatile: bool = False
    durable: bool = False

    @property
    def is_top(self) -> bool:
        return self.front is TOP


def _front(entry: Entry) -> Frontier:
    return entry.front


def _same(f: Frontier) -> Frontier:
    return f


@dataclass(frozen=True)
class Edge:
    """A channel ``src -> dst``.

    ``project`` is φ(e) at one of src's entries (history-dependent domains read the entry,
    epochs are the identity); ``project_n`` is φ(e) on a notification frontier, which need
    not be an entry (spec D10). ``closed`` is C(e), the times the live receiver closed on e:
    what a stopped sender had in flight died with it (spec R5).
    """

    src: str
    dst: str
    project: Callable[[Entry], Frontier] = _front
    project_n: Callable[[Frontier], Frontier] = _same
    closed: Frontier | None = None


@dataclass(frozen=True)
class Node:
    """An instance (or a sink's input channel, spec §2): its domain and its chain F*,
    ascending, a live instance ending with TOP."""

    domain: Domain
    entries: tuple[Entry, ...]


@dataclass(frozen=True)
class Dataflow:
    """Instances and edges. ``notifications`` off drops N̄ and fn (§3.5's last remark)."""

    nodes: Mapping[str, Node]
    edges: Mapping[str, Edge]
    notifications: bool = True

    @cached_property
    def _adjacent(self) -> dict[tuple[str, str], tuple[str, ...]]:
        """(instance, "in" | "out") -> its edges, in edge order."""
        out: dict[tuple[str, str], list[str]] = {
            (p, side): [] for p in self.nodes for side in ("in", "out")}
        for name, e in self.edges.items():
            out[(e.dst, "in")].append(name)
            out[(e.src, "out")].append(name)
        return {k: tuple(v) for k, v in out.items()}

    def ins(self, p: str) -> tuple[str, ...]:
        return self._adjacent[(p, "in")]

    def outs(self, p: str) -> tuple[str, ...]:
        return self._adjacent[(p, "out")]

    def domain(self, p: str) -> Domain:
        return self.nodes[p].domain

    def share_adjacency(self, other: Dataflow) -> None:
        """Reuse ``other``'s edge lists (the same instances and edges): the coordinator
        builds a flow after every report."""
        self.__dict__["_adjacent"] = other._adjacent

    def with_entries(self, entries: Mapping[str, tuple[Entry, ...]]) -> Dataflow:
        """The same graph with other chains (after GC, or a report)."""
        nodes = {p: Node(n.domain, tuple(entries.get(p, n.entries))) for p, n in
                 self.nodes.items()}
        return Dataflow(nodes, self.edges, self.notifications)


Chains = Mapping[str, tuple[Entry, ...]]


def describe(flow: Dataflow, fronts: Mapping[str, Any]) -> dict[str, str]:
    """Frontiers as the spec's tables print them (``TOP``, ``empty``, ``<=3``, ``{e1:6}``)."""
    from protocols.falkirk.frontier import show

    return {p: show(flow.domain(p), fronts[p]) for p in flow.nodes}
