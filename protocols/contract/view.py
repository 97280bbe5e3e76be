"""What a protocol may read: its slot, the graph, the cluster. All read-only.

``InstanceView`` and ``GraphView`` are built once from the ``ExecutionGraph``;
``ClusterView`` is the kernel's live answer to the coordinator's questions.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Literal, Protocol

from ftctl.runtime.graph import Channel, ExecutionGraph
from protocols.contract.names import ChannelId, InstanceId, LogicalTime, SnapshotRef, UnitId


@dataclass(frozen=True, slots=True)
class InstanceView:
    """One slot, as its instance logic sees it (static for the whole run)."""

    id: InstanceId
    operator: str
    index: int
    inputs: tuple[ChannelId, ...]
    out_channels: tuple[ChannelId, ...]
    is_source: bool
    is_sink: bool
    ring: tuple[InstanceId, ...]  # every slot of the same operator, index order (self included)

    @property
    def successor(self) -> InstanceId:
        """The next slot of the ring (itself when the operator has one slot)."""
        return self.ring[(self.ring.index(self.id) + 1) % len(self.ring)]

    @classmethod
    def of(cls, graph: ExecutionGraph, iid: str) -> InstanceView:
        spec = graph.instances[iid]
        ring = tuple(InstanceId(i) for i, s in graph.instances.items() if s.op == spec.op)
        return cls(InstanceId(iid), spec.op, spec.index, tuple(spec.inputs),
                   tuple(graph.out_channels(iid)), spec.is_source, spec.is_sink,
                   tuple(sorted(ring, key=lambda i: graph.instances[i].index)))


class GraphView:
    """The execution graph, read-only: slots, channels, neighbours, sinks and queries.

    A *query* is a sink operator with every operator upstream of it (its closure): the
    unit progressive recovery restores one at a time.
    """

    def __init__(self, graph: ExecutionGraph):
        self._g = graph
        self.order: tuple[InstanceId, ...] = tuple(InstanceId(i) for i in graph.order)
        self.sources: tuple[InstanceId, ...] = tuple(InstanceId(i) for i in graph.sources)
        self.sinks: tuple[InstanceId, ...] = tuple(InstanceId(i) for i in graph.sinks)
        self.channels: tuple[Channel, ...] = tuple(graph.channels)

    @property
    def execution(self) -> ExecutionGraph:
        """The underlying graph (for hosts and the kernel; protocols should not need it)."""
        return self._g

    def instance(self, iid: str) -> InstanceView:
        return InstanceView.of(self._g, iid)

    def operator_of(self, iid: str) -> str:
        return self._g.instances[iid].op

    def inputs(self, iid: str) -> tuple[ChannelId, ...]:
        return tuple(self._g.instances[iid].inputs)

    def out_channels(self, iid: str) -> tuple[ChannelId, ...]:
        return tuple(self._g.out_channels(iid))

    def upstream(self, iid: str) -> tuple[InstanceId, ...]:
        return tuple(InstanceId(i) for i in self._g.upstream(iid))

    def downstream(self, iid: str) -> tuple[InstanceId, ...]:
        return tuple(InstanceId(i) for i in self._g.downstream(iid))

    def reachable_from(self, iids: set[str] | frozenset[str]) -> frozenset[InstanceId]:
        """``iids`` and every slot downstream of them."""
        return frozenset(InstanceId(i) for i in self._g.reachable_from(set(iids)))

    def is_sink(self, iid: str) -> bool:
        return self._g.instances[iid].is_sink

    def is_source(self, iid: str) -> bool:
        return self._g.instances[iid].is_source

    @cached_property
    def queries(self) -> Mapping[str, frozenset[str]]:
        """Sink operator -> the operators it depends on (itself included)."""
        ops = {s.op for s in self._g.instances.values()}
        preds: dict[str, set[str]] = {op: set() for op in ops}
        for ch in self._g.channels:
            a, b = self._g.instances[ch.src].op, self._g.instances[ch.dst].op
            if a != b:
                preds[b].add(a)
        out: dict[str, frozenset[str]] = {}
        for sink in sorted({self._g.instances[s].op for s in self._g.sinks}):
            seen, todo = {sink}, [sink]
            while todo:
                for p in preds[todo.pop()]:
                    if p not in seen:
                        seen.add(p)
                        todo.append(p)
            out[sink] = frozenset(seen)
        return out


@dataclass(frozen=True, slots=True)
class NodeView:
    """A cluster node (a sim node, a Spark worker): ``slots`` it offers, ``used`` of them."""

    id: str
    slots: int
    used: int = 0
    alive: bool = True
    labels: Mapping[str, str] = field(default_factory=dict)

    @property
    def free(self) -> int:
        return max(0, self.slots - self.used) if self.alive else 0


@dataclass(frozen=True, slots=True)
class Capacity:
    """The cluster's nodes and where each running slot is placed."""

    nodes: tuple[NodeView, ...] = ()
    placed: Mapping[InstanceId, str] = field(default_factory=dict)  # slot -> node id

    @property
    def free(self) -> int:
        return sum(n.free for n in self.nodes)

    @property
    def total(self) -> int:
        return sum(n.slots for n in self.nodes if n.alive)


Status = Literal["pending", "starting", "running", "stopped"]


class ClusterView(Protocol):
    """The coordinator's read-only view of the run, kept by the kernel."""

    @property
    def now(self) -> float: ...

    @property
    def graph(self) -> GraphView: ...

    @property
    def capacity(self) -> Capacity: ...

    @property
    def phases(self) -> frozenset[str]:
        """The kernel's ``recovering`` plus the phases instances declared."""
        ...

    def status(self, i: InstanceId) -> Status: ...

    def incarnation(self, i: InstanceId) -> int: ...

    def unit_of(self, slot: InstanceId) -> UnitId: ...

    def stored(self, i: InstanceId) -> tuple[SnapshotRef, ...]: ...

    def committed(self, sink: InstanceId) -> LogicalTime: ...
