"""The execution graph: a topology expanded into instances and the channels between them."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from ftctl.runtime.memo import BatchMemo
from ftctl.runtime.operators import OPERATORS, Operator, build_operator, is_source
from ftctl.runtime.records import ANY, Record
from ftctl.runtime.sources import make_source
from ftctl.runtime.topology import Topology
from ftctl.runtime.types import record_types


@dataclass(frozen=True, slots=True)
class Channel:
    id: int
    src: str
    dst: str
    port: int


@dataclass(slots=True)
class OutputGroup:
    """The channels of one edge leaving an instance, indexed by destination instance."""

    partition: str
    channels: list[int]


@dataclass(slots=True)
class InstanceSpec:
    id: str
    op: str
    index: int
    kind: str
    inputs: list[int] = field(default_factory=list)
    outputs: list[OutputGroup] = field(default_factory=list)

    @property
    def is_source(self) -> bool:
        return is_source(self.kind)

    @property
    def is_sink(self) -> bool:
        return self.kind == "sink"


def instance_id(op: str, index: int) -> str:
    return f"{op}[{index}]"


class ExecutionGraph:
    """Instances in topological order and numbered channels. Assumes a checked topology."""

    def __init__(self, topology: Topology):
        self.topology = topology
        # Set by an owner that runs this graph many times (``Simulator``).
        self.memo: BatchMemo | None = None
        self.instances: dict[str, InstanceSpec] = {}
        self.channels: list[Channel] = []
        order = topo_order(topology)
        for name in order:
            spec = topology.operator(name)
            for i in range(spec.parallelism):
                iid = instance_id(name, i)
                self.instances[iid] = InstanceSpec(iid, name, i, spec.type)
        for edge in topology.edges:
            src_p = topology.operator(edge.src).parallelism
            dst_p = topology.operator(edge.dst).parallelism
            for s in range(src_p):
                src = self.instances[instance_id(edge.src, s)]
                targets = [s % dst_p] if edge.partition == "forward" else list(range(dst_p))
                chans = []
                for d in targets:
                    ch = Channel(len(self.channels), src.id, instance_id(edge.dst, d), edge.port)
                    self.channels.append(ch)
                    self.instances[ch.dst].inputs.append(ch.id)
                    chans.append(ch.id)
                src.outputs.append(OutputGroup(edge.partition, chans))
        self.order = list(self.instances)
        self.sources = [i for i, s in self.instances.items() if s.is_source]
        self.sinks = [i for i, s in self.instances.items() if s.is_sink]
        # Watermarks only cost messages; send them only when some operator reads them.
        self.needs_watermarks = any(
            op.type in OPERATORS and OPERATORS[op.type].event_time for op in topology.operators
        )
        self._types = record_types(topology)

    # ------------------------------------------------------------ structure queries

    def upstream(self, iid: str) -> list[str]:
        return sorted({self.channels[c].src for c in self.instances[iid].inputs})

    def downstream(self, iid: str) -> list[str]:
        return sorted(
            {self.channels[c].dst for g in self.instances[iid].outputs for c in g.channels}
        )

    def reachable_from(self, iids: set[str]) -> set[str]:
        """The instances in ``iids`` and everything downstream of them."""
        seen = set(iids)
        todo = deque(iids)
        while todo:
            for d in self.downstream(todo.popleft()):
                if d not in seen:
                    seen.add(d)
                    todo.append(d)
        return seen

    def out_channels(self, iid: str) -> list[int]:
        return [c for g in self.instances[iid].outputs for c in g.channels]

    # ------------------------------------------------------------ builders

    def source_range(self, iid: str) -> tuple[int, int]:
        """The record indices [lo, hi) this source instance reads."""
        spec = self.instances[iid]
        op = self.topology.operator(spec.op)
        n = self.topology.source_records(op)
        p = op.parallelism
        if op.split == "strided":  # local offsets j = 0, 1, ... read events index + j * p
            return (0, max(0, -(-(n - spec.index) // p)))
        return (n * spec.index // p, n * (spec.index + 1) // p)

    def make_operator(self, iid: str) -> Operator | Callable[[int, int], list[Record]]:
        """The operator of an instance, or for a source its generator ``gen(start, end)``."""
        spec = self.instances[iid]
        op = self.topology.operator(spec.op)
        if spec.is_source:
            gen = make_source(spec.kind, self.topology.source_seed(op), op.params)
            if op.split == "strided":
                return _strided(gen, spec.index, op.parallelism)
            return gen
        ins = self._types[spec.op][0]
        return build_operator(spec.kind, op.params, op.function, ins.get(0, ANY))


def _strided(
    gen: Callable[[int, int], list[Record]], index: int, p: int
) -> Callable[[int, int], list[Record]]:
    """Local offsets [lo, hi) of instance ``index`` of ``p``: events index + j * p.

    Every instance then covers the whole event-time range at once (Noir's split), so the
    minimum watermark is not held back by an instance that starts late in event time.
    """
    if p == 1:
        return gen
    if getattr(gen, "strides", False):  # the generator draws only the events it needs
        return lambda lo, hi: gen(lo, hi, index, p)  # type: ignore[call-arg]

    def strided(lo: int, hi: int) -> list[Record]:
        if hi <= lo:
            return []
        return gen(index + lo * p, index + (hi - 1) * p + 1)[::p]

    return strided


def topo_order(topology: Topology) -> list[str]:
    indeg = {op.name: 0 for op in topology.operators}
    succ: dict[str, list[str]] = {op.name: [] for op in topology.operators}
    for e in topology.edges:
        succ[e.src].append(e.dst)
        indeg[e.dst] += 1
    ready = deque(op.name for op in topology.operators if indeg[op.name] == 0)
    order = []
    while ready:
        n = ready.popleft()
        order.append(n)
        for d in succ[n]:
            indeg[d] -= 1
            if indeg[d] == 0:
                ready.append(d)
    return order
