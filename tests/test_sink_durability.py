"""A sink persists the state that counts its output before making the output visible: a
crash that loses writes not yet durable (lose-unsynced) must not leave output visible
that the replacement does not know it made (it would make it again)."""

from __future__ import annotations

import pytest

from ftctl.config.load import load_topology
from ftctl.sim.host import SimHost
from ftctl.sim.runner import Simulator
from ftctl.sim.store_faults import LoseUnsynced
from ftctl.verify.checker import verify
from protocols.registry import PROTOCOLS
from tests.conftest import TOPOLOGIES

pytestmark = pytest.mark.sim


@pytest.mark.parametrize("protocol", ["causal", "lineage", "progressive"])
def test_losing_a_sinks_unsynced_writes_makes_no_duplicate(protocol: str) -> None:
    sim = Simulator(load_topology(TOPOLOGIES / "windowed.yaml"), PROTOCOLS[protocol], {})
    end = sim.fault_free_end
    for k in range(1, 6):  # the sink loses its unsynced writes at five points of the run
        host = SimHost(sim.graph, PROTOCOLS[protocol], sim.params, seed=k)
        host.at(end * k / 6, lambda h=host: h.inject(LoseUnsynced(0, "out[0]")))
        result = host.run()
        v = verify(sim.modes, sim.golden, result.outputs, sim.guarantee,
                   complete=result.complete)
        assert v.passed, (k, v.totals())


def test_a_lineage_sink_whose_first_write_was_lost_restarts_empty() -> None:
    # seed 97 loses out[0]'s first state write (nothing emitted yet) before it fails:
    # the restart must not ask for what was never durable
    sim = Simulator(load_topology(TOPOLOGIES / "windowed.yaml"), PROTOCOLS["lineage"], {},
                    kinds=("crash", "lose-unsynced", "corrupt", "store-unavailable"))
    outcome = sim.run_one(97)
    lost = [e.data["lost"] for e in outcome.result.events
            if e.kind == "fault-injected" and e.data["type"] == "lose-unsynced"]
    assert lost == [[[1, "out[0]"]]]
    assert outcome.verdict.passed
