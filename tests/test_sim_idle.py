"""A slow input.rate leaves the simulated run idle between batches; ``ftctl sim``'s runs
skip that idle time, so a schedule's wall time does not grow with it."""

from __future__ import annotations

import time

import pytest

from ftctl.sim.host import SimHost
from ftctl.sim.runner import Simulator
from protocols.registry import PROTOCOLS
from tests.conftest import load

pytestmark = pytest.mark.sim

RECORDS, BATCH = 200, 10


def _simulate(rate: float) -> tuple[Simulator, float]:
    """A simulator of replica-ring (its pings run through every idle gap) and the wall
    seconds it took to build (golden and fault-free runs) and run one schedule."""
    topo = load("replica-chain").with_input(records=RECORDS, batch=BATCH, rate=rate)
    started = time.perf_counter()
    sim = Simulator(topo, PROTOCOLS["replica-ring"], {})
    assert sim.run_one(1).result.complete
    return sim, time.perf_counter() - started


def test_a_slow_rate_simulates_in_well_under_its_paced_duration() -> None:
    paced = RECORDS / 0.5  # 400 s at 0.5 records/s
    slow, wall = _simulate(0.5)
    assert slow.fault_free_end < paced / 100
    assert wall < paced / 20
    # Ten times the idle time costs no more events: pings do not fill the gaps.
    fast, _ = _simulate(5.0)
    assert slow.horizon <= 1.1 * fast.horizon


def test_a_host_built_without_max_step_keeps_the_paced_clock() -> None:
    """Figures measure latency on the paced clock (``ftctl figure 004-fig5``)."""
    topo = load("wordcount").with_input(records=400, batch=100, rate=1000.0)
    sim = Simulator(topo, PROTOCOLS["none"], {})
    paced = SimHost(sim.graph, sim.protocol, sim.params, 0).run()
    assert paced.end_time >= 0.3  # 4 batches, 0.1 s apart
    assert sim.fault_free_end < paced.end_time / 1.5
