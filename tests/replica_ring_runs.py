"""Running replica-ring on the real simulation host with kills at given simulated times,
judged against the fault-free run (lost, duplicated records at the sink)."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from typing import Any

from ftctl.config.topology import Topology
from ftctl.runtime.graph import ExecutionGraph
from ftctl.sim.faults import Strike
from ftctl.sim.host import SimHost, SimResult
from protocols.replica_ring.params import ReplicaRingParams
from protocols.replica_ring.spec import SPEC

STALL = "stall"
_GOLDEN: dict[tuple[str, int], Counter[Any]] = {}  # fault-free output per (topology, seed)
Kills = tuple[tuple[float, str], ...]


def spec_with(instance: type | None = None, coordinator: type | None = None) -> Any:
    """The registered spec, or a mutant's (its classes replaced)."""
    return replace(SPEC, instance=instance or SPEC.instance,
                   coordinator=coordinator or SPEC.coordinator)


def run(topo: Topology, params: ReplicaRingParams, kills: Kills = (), seed: int = 1,
        spec: Any = SPEC) -> SimResult:
    """One run; each ``(t, slot)`` crashes the unit of that name at simulated time t."""
    host = SimHost(ExecutionGraph(topo), spec, params, seed=seed, max_events=20_000)
    for t, slot in kills:
        host.at(t, lambda s=slot: host._strike(Strike(0, 1, (s,))))
    return host.run()


def output(res: SimResult) -> Counter[Any]:
    return Counter(rec for recs in res.outputs.values() for rec in recs)


def judge(topo: Topology, params: ReplicaRingParams, kills: Kills = (), seed: int = 1,
          spec: Any = SPEC) -> tuple[int, int] | str:
    """(lost, duplicated) against the fault-free at-most-once run; STALL if unfinished."""
    key = (topo.model_dump_json(), seed)
    if key not in _GOLDEN:
        _GOLDEN[key] = output(run(topo, ReplicaRingParams(semantics="at-most-once"), seed=seed))
    gold = _GOLDEN[key]
    res = run(topo, params, kills, seed, spec)
    if not res.complete:
        return STALL
    got = output(res)
    return sum((gold - got).values()), sum((got - gold).values())
