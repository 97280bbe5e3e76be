"""``causal`` and ``lineage`` on topologies/joins/: a keyed join, a tumbling window after a
fan-in, two multiset sinks (seeded simulation).

The 2,000-schedule figures are in docs/protocols.md with their commands; here a few dozen
schedules per case, and the exact seeds on which the old per-key sink counts lose and
duplicate records while identity-based de-duplication holds (spec causal.md E4, S1, S2).
"""

from __future__ import annotations

import dataclasses

import pytest

from ftctl.config.load import load_topology
from ftctl.runtime.topology import Topology
from ftctl.sim.faults import FAULT_KINDS
from ftctl.sim.runner import Simulator
from protocols.causal.mutants import SinkDedupPerKey as CausalPerKey
from protocols.lineage.mutants import SinkDedupPerKey as LineagePerKey
from protocols.registry import PROTOCOLS
from tests.conftest import TOPOLOGIES

JOINS = ("join-window", "join-then-window")


def _load(name: str) -> Topology:
    return load_topology(TOPOLOGIES / "joins" / f"{name}.yaml")


@pytest.mark.parametrize("topology", JOINS)
@pytest.mark.parametrize("protocol", ["causal", "lineage"])
def test_exactly_once_on_the_join_topologies(protocol: str, topology: str) -> None:
    summary = Simulator(_load(topology), PROTOCOLS[protocol], {}).run_many(20, seed=1)
    assert summary.failures > 0
    assert summary.failing_seeds == [], summary.violations


@pytest.mark.parametrize("protocol", ["causal", "lineage"])
def test_exactly_once_on_join_window_under_every_fault_kind(protocol: str) -> None:
    sim = Simulator(_load("join-window"), PROTOCOLS[protocol], {}, kinds=FAULT_KINDS)
    summary = sim.run_many(10, seed=1)
    assert summary.failures > 0
    assert summary.failing_seeds == [], summary.violations


def test_join_window_seed_884_with_every_fault_kind() -> None:
    # A fallback, then the sink crashes in the new epoch after suppressing a recomputed
    # record: the replacement lost that count and hid the record's second occurrence
    # (lost 2) until suppressed records were stored with the positions.
    sim = Simulator(_load("join-window"), PROTOCOLS["causal"], {}, kinds=FAULT_KINDS)
    summary = sim.run_many(1, seed=884)
    assert summary.failures > 0
    assert summary.failing_seeds == [], summary.violations


@pytest.mark.parametrize(("protocol", "mutant", "seed"), [
    ("causal", CausalPerKey, 17),  # pairs[0] and by-window restart; arrivals reorder
    ("lineage", LineagePerKey, 1),  # a purge recomputes the join in another order
])
def test_per_key_sink_counts_break_where_identity_holds(protocol: str, mutant: type,
                                                         seed: int) -> None:
    topo = _load("join-window")
    held = Simulator(topo, PROTOCOLS[protocol], {}).run_many(1, seed=seed)
    assert held.failures > 0 and held.failing_seeds == [], held.violations
    planted = dataclasses.replace(PROTOCOLS[protocol], instance=mutant)
    broken = Simulator(topo, planted, {}).run_many(1, seed=seed)
    assert broken.failing_seeds == [seed]
    assert broken.violations["lost"] > 0 and broken.violations["duplicated"] > 0
