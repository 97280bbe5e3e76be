"""Paper 004 Fig. 5 at run level: progressive15 on the simulation host with nodes.

The setup of spec §8, scaled: 2 ``role=core`` nodes of 3 slots hold the source and the
parser, 8 ``role=sink`` nodes of 12 slots hold the 90 aggregate, subscriber and sink
instances. At ``kill`` all 8 sink nodes die at once; they come back one by one at the
paper's arrival offsets (``chaos/arrivals.py``, ``paper`` distribution, times ``scale``)
or, for BestCase, all together at 180 s x scale. Each sink's output latency is measured
from when the source first emitted the batch a record came from (the simulated source
drifts from its nominal schedule, so the schedule itself is no reference), and
``ftctl/metrics/queries.py`` turns it into relative latency and available queries.
"""

from __future__ import annotations

import bisect
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ftctl.config.topology import Topology
from ftctl.metrics.queries import (
    QueryAvailability,
    QueryMetricsParams,
    available_over_time,
    query_availability,
    up_intervals,
)
from ftctl.runtime.graph import ExecutionGraph
from ftctl.sim.cluster import SimCluster, SimNode
from ftctl.sim.golden import golden_output
from ftctl.sim.host import SimHost, SimResult
from ftctl.sim.runner import sim_params
from ftctl.verify.checker import verify
from protocols.contract.spec import ProtocolSpec

CORE_OPS = ("tweets", "parser")
CORE_NODES, CORE_SLOTS, SINK_NODES, SINK_SLOTS = 2, 3, 8, 12


def fig5_cluster(graph: ExecutionGraph) -> SimCluster:
    ops = {s.op for s in graph.instances.values()}
    nodes = [SimNode(f"core-{k}", CORE_SLOTS, {"role": "core"})
             for k in range(1, CORE_NODES + 1)]
    nodes += [SimNode(f"sink-{k}", SINK_SLOTS, {"role": "sink"})
              for k in range(1, SINK_NODES + 1)]
    return SimCluster(nodes, pins={op: {"role": "core" if op in CORE_OPS else "sink"}
                                   for op in ops})


class LatencyHost(SimHost):
    """A SimHost that records, per sink operator, ``(t, latency)`` of every record it
    outputs, latency counted from the source's first emission of the record's batch."""

    def __init__(self, *args: Any, **kw: Any):
        super().__init__(*args, **kw)
        topo = self.graph.topology
        src = self.graph.sources[0]
        params = topo.operator(self.graph.instances[src].op).params
        self.ms = float(params.get("ms_per_record", 1.0)) or 1.0
        self.batch = topo.input.batch
        self.los = sorted(self.graph.source_range(s)[0] for s in self.graph.sources)
        self.first_sent: dict[int, float] = {}  # batch start offset -> first emission
        self.latency: dict[str, list[tuple[float, float]]] = {}

    def _on_step(self, data: tuple[str, int]) -> None:
        unit = self._live(*data)
        before = unit.core.offset if unit is not None else None
        super()._on_step(data)
        if before is not None:
            self.first_sent.setdefault(before, self.now)

    def _start(self, iid: str, inc: int) -> tuple[Any, list[Any]]:
        unit, acts = super()._start(iid, inc)
        if unit is not None and unit.core.is_sink:
            series = self.latency.setdefault(self.graph.instances[iid].op, [])
            unit.core.on_sink_output = lambda recs, s=series: self._observe(s, recs)
        return unit, acts

    def _observe(self, series: list[tuple[float, float]], records: Sequence[Any]) -> None:
        for r in records[::4]:  # a systematic sample keeps long runs light
            i = int(r[2] / self.ms)
            lo = self.los[max(0, bisect.bisect_right(self.los, i) - 1)]
            sent = self.first_sent.get(lo + (i - lo) // self.batch * self.batch)
            if sent is not None:
                series.append((self.now, self.now - sent))


@dataclass
class Fig5Run:
    name: str
    arrivals: list[float]  # seconds after the kill
    result: SimResult
    exactly_once: bool
    availability: QueryAvailability
    available: list[int]  # per step: queries running with RL <= threshold (Fig. 5(b))
    recovered: dict[str, float]  # query -> seconds after the kill its instances all ran


def _host(graph: ExecutionGraph, protocol: Any, given: Mapping[str, Any],
          seed: int) -> LatencyHost:
    params = sim_params(graph, protocol, dict(given))
    return LatencyHost(graph, protocol, params, seed, cluster=fig5_cluster(graph),
                       max_events=None)


def baselines(topology: Topology, protocol: Any,
              given: Mapping[str, Any]) -> dict[str, float | None]:
    """Each query's fault-free latency: its 95th percentile over a run without failures.

    Not the median: a window fires when the next source batch brings the watermark, and
    the simulated source's pacing jitter (0.5-1.5 batch periods) alone spreads fault-free
    latency by +-50%, so RL against the median would cross 1.2 with no failure at all.
    """
    host = _host(ExecutionGraph(topology), protocol, given, 0)
    host.run()
    return {q: (statistics.quantiles([v for _, v in s], n=20)[-1] if len(s) > 1
                else (s[0][1] if s else None))
            for q, s in host.latency.items()}


def run_fig5(name: str, topology: Topology, protocol: ProtocolSpec[Any] | Any,
             given: Mapping[str, Any], kill: float, arrivals: Sequence[float],
             metrics: QueryMetricsParams, base: Mapping[str, float | None],
             golden: dict[str, Any] | None = None, seed: int = 1) -> Fig5Run:
    graph = ExecutionGraph(topology)
    host = _host(graph, protocol, given, seed)
    sinks = [f"sink-{k}" for k in range(1, SINK_NODES + 1)]
    for n in sinks:
        host.at(kill, lambda n=n: host.node_down(n))  # type: ignore[misc]
    for n, dt in zip(sinks, arrivals, strict=True):
        host.at(kill + dt, lambda n=n: host.node_up(n))  # type: ignore[misc]
    result = host.run()
    golden = golden if golden is not None else golden_output(graph)
    ok = verify(topology.sink_modes(), golden, result.outputs,
                protocol.guarantee_of(host.params), complete=result.complete).passed
    avail = query_availability(host.latency, base, 0.0, result.end_time, metrics,
                               t_fault=kill)
    queries = dict(host.kernel.graph.queries)
    ops = {i: s.op for i, s in graph.instances.items()}
    up = up_intervals(result.events, queries, ops, result.end_time)
    recovered = {q: round(spans[-1][0] - kill, 3) for q, spans in up.items()
                 if spans and spans[-1][0] >= kill}
    return Fig5Run(name, list(arrivals), result, ok, avail, available_over_time(avail, up),
                   recovered)
