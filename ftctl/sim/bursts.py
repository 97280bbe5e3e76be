"""Seeded correlated node loss with progressive return of capacity, for the simulation host.

A ``NodeBurst`` takes most of a ``SimCluster``'s nodes down within a short window at a
random point of the run, then brings them back one at a time at random gaps; optionally
one more unit crashes while the first returned node's restarts replay. Everything is
drawn from the burst's own seed, so a schedule replays exactly. ``BurstRunner`` runs such
schedules for one topology and protocol and judges each against the golden run.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any

from ftctl.config.topology import Topology
from ftctl.runtime.graph import ExecutionGraph
from ftctl.sim.cluster import SimCluster
from ftctl.sim.faults import Strike
from ftctl.sim.golden import golden_output
from ftctl.sim.host import SimHost, SimResult
from ftctl.sim.runner import nominal_duration, sim_params
from ftctl.verify.checker import Verdict, index_by_key, verify
from protocols.contract.spec import ProtocolSpec


def cluster_for(graph: ExecutionGraph, workers: int = 4, spare: int = 0) -> SimCluster:
    """``workers`` nodes with just enough slots for every instance (plus ``spare`` each):
    capacity lost is capacity missing until it returns."""
    slots = math.ceil(len(graph.instances) / workers) + spare
    return SimCluster.workers(workers, slots)


@dataclass(frozen=True)
class NodeBurst:
    down: tuple[tuple[float, str], ...]  # (time, node)
    up: tuple[tuple[float, str], ...]
    further: float | None  # time of one more unit crash during recovery, if any
    seed: int

    @classmethod
    def random(cls, seed: int, nodes: list[str], duration: float,
               lose: float = 0.75) -> NodeBurst:
        """Lose ``ceil(lose * len(nodes))`` nodes within 5% of ``duration`` starting in
        its first 70%; they return one by one, 10-50% of ``duration`` apart."""
        rng = random.Random(seed)
        lost = rng.sample(nodes, max(1, math.ceil(lose * len(nodes))))
        t0 = duration * rng.uniform(0.1, 0.7)
        down = tuple(sorted((t0 + duration * rng.uniform(0.0, 0.05), n) for n in lost))
        t = down[-1][0]
        up = []
        for n in rng.sample(lost, len(lost)):
            t += duration * rng.uniform(0.1, 0.5)
            up.append((t, n))
        further = (up[0][0] + duration * rng.uniform(0.0, 0.2)
                   if rng.random() < 0.5 else None)
        return cls(down, tuple(up), further, seed)

    def arm(self, host: SimHost) -> None:
        for t, n in self.down:
            host.at(t, lambda n=n: host.node_down(n))  # type: ignore[misc]
        for t, n in self.up:
            host.at(t, lambda n=n: host.node_up(n))  # type: ignore[misc]
        if self.further is not None:
            pick = random.Random(self.seed + 1)
            host.at(self.further, lambda: _crash_one(host, pick))


def _crash_one(host: SimHost, rng: random.Random) -> None:
    live = sorted(host.live)
    if live:
        host._strike(Strike(host.stats.events, 1, (rng.choice(live),)))


@dataclass
class BurstOutcome:
    seed: int
    burst: NodeBurst
    result: SimResult
    verdict: Verdict


class BurstRunner:
    """Node-burst schedules for one topology and protocol, judged against the golden run."""

    def __init__(self, topology: Topology, protocol: ProtocolSpec[Any],
                 given: dict[str, Any] | None = None, workers: int = 4, lose: float = 0.75):
        self.graph = ExecutionGraph(topology)
        self.duration = nominal_duration(self.graph)
        # Punctuations and the burst window scale with the run, as in ``ftctl sim``.
        scaled = {"interval": self.duration / 8, "burst_window": self.duration} | (given or {})
        self.protocol = protocol
        self.params = sim_params(self.graph, protocol, scaled)
        self.guarantee = protocol.guarantee_of(self.params)
        self.modes = topology.sink_modes()
        self.golden = golden_output(self.graph)
        self.index = {s: index_by_key(out) for s, out in self.golden.items()}
        self.workers, self.lose = workers, lose

    def run_one(self, seed: int) -> BurstOutcome:
        cluster = cluster_for(self.graph, self.workers)
        burst = NodeBurst.random(seed, list(cluster.nodes), self.duration, self.lose)
        host = SimHost(self.graph, self.protocol, self.params, seed, cluster=cluster)
        burst.arm(host)
        result = host.run()
        verdict = verify(self.modes, self.golden, result.outputs, self.guarantee,
                         complete=result.complete, golden_index=self.index)
        return BurstOutcome(seed, burst, result, verdict)
