"""progressive on the simulation host (the kernel drives its contract-v2 classes, through
``protocols.progressive.spec.SPEC``): seeded schedules of up to three failures, bursts of
up to three instances, exactly-once against the golden run on every small bundled
topology (spec S1, at a test's size; ``burst_unit: instances`` makes bursts progressive)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from ftctl.config.load import load_topology
from ftctl.runtime.graph import ExecutionGraph
from ftctl.sim.faults import FailureSchedule
from ftctl.sim.host import SimHost
from ftctl.sim.runner import golden_output, nominal_duration, sink_modes
from ftctl.verify.checker import verify
from protocols.progressive.params import ProgressiveParams
from protocols.progressive.spec import SPEC

pytestmark = pytest.mark.sim
TOPOLOGIES = Path(__file__).resolve().parent.parent / "topologies"


@pytest.mark.parametrize("name", ["wordcount", "diamond", "windowed", "sharder",
                                  "progressive-small"])
def test_seeded_failures_are_exactly_once(name: str) -> None:
    topo = load_topology(TOPOLOGIES / f"{name}.yaml")
    graph = ExecutionGraph(topo)
    nominal = nominal_duration(graph)
    params = ProgressiveParams(interval=nominal / 8, burst_window=nominal / 8,
                               burst_unit="instances")
    golden = golden_output(graph)
    fault_free = SimHost(graph, SPEC, params, 0).run()
    assert fault_free.complete
    modes = sink_modes(topo)
    for seed in range(4):
        rng = random.Random(seed)
        schedule = FailureSchedule.random(rng, fault_free.stats.events, 3, 3)
        res = SimHost(graph, SPEC, params, seed=rng.getrandbits(64), schedule=schedule).run()
        verdict = verify(modes, golden, res.outputs, SPEC.guarantee_of(params),
                         complete=res.complete)
        assert verdict.passed, (seed, verdict.totals())
        kinds = {e.get("event") for e in res.events}
        if "rollback" in kinds:  # (a failure after the final snapshot is ignored)
            assert "recovery-complete" in kinds, seed
