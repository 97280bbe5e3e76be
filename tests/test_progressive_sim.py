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
from ftctl.sim.bursts import BurstRunner
from ftctl.sim.faults import FailureSchedule
from ftctl.sim.golden import golden_output
from ftctl.sim.host import SimHost
from ftctl.sim.runner import Simulator, nominal_duration
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
    modes = topo.sink_modes()
    for seed in range(4):
        rng = random.Random(seed)
        schedule = FailureSchedule.random(rng, fault_free.stats.events, 3, 3)
        res = SimHost(graph, SPEC, params, seed=rng.getrandbits(64), schedule=schedule).run()
        verdict = verify(modes, golden, res.outputs, SPEC.guarantee_of(params),
                         complete=res.complete)
        assert verdict.passed, (seed, verdict.totals())
        kinds = {e.note or e.kind for e in res.events}
        if "rollback" in kinds:  # (a failure after the final snapshot is ignored)
            assert "recovery-complete" in kinds, seed


@pytest.mark.parametrize("name", ["diamond", "progressive-small"])
def test_node_bursts_with_progressive_return_are_exactly_once(name: str) -> None:
    """Spec S2 at a test's size (benchmarks/progressive_bursts.py runs 2,000 per topology):
    3 of 4 nodes die within 5% of the run and return one by one, sometimes with one more
    crash during recovery; nothing starts without a free slot."""
    runner = BurstRunner(load_topology(TOPOLOGIES / f"{name}.yaml"), SPEC)
    for seed in range(1, 4):
        o = runner.run_one(seed)
        assert o.verdict.passed and o.result.complete, (seed, o.verdict.totals())
        ev = o.result.events
        assert [e.kind for e in ev].count("node-down") == 3
        plans = [e for e in ev if e.note == "plan"]
        assert plans and all(len(p.payload["started"]) <= p.payload["free"] for p in plans), seed
        assert any(p.payload["why"] == "capacity" and p.payload["started"] for p in plans), seed
        assert "recovery-complete" in {e.note for e in ev}, seed


def test_a_dead_incarnations_persist_does_not_end_recovery() -> None:
    """Seed 6 of the kit's every-failure-progressive case: an instance persists P_1, dies,
    and its replacement restores P_0. P_1 completing on the dead incarnation's report
    ended the episode while the replacement still replayed (out3 lost 19 counts); the
    coordinator now forgets a failed instance's part of checkpoints not yet complete."""
    sim = Simulator(load_topology(TOPOLOGIES / "progressive-small.yaml"), SPEC,
                    {"burst_unit": "instances", "burst_threshold": 0})
    outcome = sim.run_one(6)
    assert outcome.verdict.passed, outcome.verdict.totals()
    kinds = [e.note or e.kind for e in outcome.result.events]
    assert kinds.count("failed-during-recovery") == 2 and "recovery-complete" in kinds


def test_recovery_ends_past_what_a_source_failed_during_recovery_sent() -> None:
    """Seed 6 of the kit's every-failure-progressive case with every fault kind on
    replica-chain: the source survives the first rollback to P_2, sends P_3 and more, and
    dies; its replacement replays in mini-batch order. Normal at cp(P_3) renumbered its
    stream below what split had accepted from the dead source (out lost 79 records);
    the episode now ends at cp(P_4), past everything the dead source sent."""
    sim = Simulator(load_topology(TOPOLOGIES / "replica-chain.yaml"), SPEC,
                    {"burst_unit": "instances", "burst_threshold": 0},
                    kinds=("crash", "pause", "partition", "delay", "slow", "node"))
    outcome = sim.run_one(6)
    assert outcome.verdict.passed, outcome.verdict.totals()
    ev = outcome.result.events
    assert [e.payload["failed"] for e in ev if e.note == "failed-during-recovery"] == [
        ["lines[0]"]]
    assert [(e.payload["k"], e.payload["m"]) for e in ev if e.note == "recovery-complete"] == [
        (2, 4)]


def test_a_stale_persisted_report_does_not_complete_a_checkpoint() -> None:
    """Seed 71 of the kit's every-failure-progressive case: out1[0] reports P_2 of
    generation 0 after the rollback to P_1 discarded it; counted, cp(P_2) completed without
    it, and out1[0] failing next was restarted from a snapshot 2 the store did not have."""
    sim = Simulator(load_topology(TOPOLOGIES / "progressive-small.yaml"), SPEC,
                    {"burst_unit": "instances", "burst_threshold": 0})
    outcome = sim.run_one(71)
    assert outcome.verdict.passed and outcome.result.complete, outcome.verdict.totals()
    restores = [e.data.get("restore") for e in outcome.result.events
                if e.kind == "instance-started"]
    assert restores == [1, 1]
