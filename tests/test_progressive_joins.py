"""``progressive`` on topologies/joins/: a keyed join, a tumbling window after a fan-in,
two multiset sinks (seeded simulation).

A blocking rollback replays the join in another order than the first execution, so a
multiset sink that counted visible records per key took one record for another; it counts
per record identity (spec causal.md E4). The 300-schedule figures are in
docs/protocols.md with their commands; here the exact seeds on which per-key counts lose
and duplicate records while identity-based counts hold.
"""

from __future__ import annotations

import dataclasses

import pytest

from ftctl.config.load import load_topology
from ftctl.runtime.topology import Topology
from ftctl.sim.runner import Simulator
from protocols.progressive.mutants import SinkDedupPerKey
from protocols.registry import PROTOCOLS
from tests.conftest import TOPOLOGIES

pytestmark = pytest.mark.sim


def _load(name: str) -> Topology:
    return load_topology(TOPOLOGIES / "joins" / f"{name}.yaml")


@pytest.mark.parametrize(("topology", "seed"), [
    ("join-window", 1),  # join[0] fails; the blocking replay reorders pairs' input
    ("join-then-window", 2),  # the same after the fan-in of the join's two inputs
])
def test_per_key_sink_counts_break_where_identity_holds(topology: str, seed: int) -> None:
    topo = _load(topology)
    held = Simulator(topo, PROTOCOLS["progressive"], {}).run_many(1, seed=seed)
    assert held.failures > 0 and held.failing_seeds == [], held.violations
    planted = dataclasses.replace(PROTOCOLS["progressive"], instance=SinkDedupPerKey)
    broken = Simulator(topo, planted, {}).run_many(1, seed=seed)
    assert broken.failing_seeds == [seed]
    assert broken.violations["lost"] > 0 and broken.violations["duplicated"] > 0
