"""``none``'s source commits its resume offset before it sends the batch the offset covers:
the commit must be durable first, or a crash that loses writes not yet durable
(lose-unsynced) sends the replacement back to an older offset, and it sends records twice
where ``none`` promises at most once."""

from __future__ import annotations

import pytest

from ftctl.config.load import load_topology
from ftctl.sim.host import SimHost
from ftctl.sim.runner import Simulator
from ftctl.sim.store_faults import LoseUnsynced
from ftctl.verify.checker import verify
from protocols.contract.spec import Guarantee
from protocols.registry import PROTOCOLS
from tests.conftest import TOPOLOGIES

pytestmark = pytest.mark.sim


@pytest.mark.parametrize("topology", ["replica-chain", "ring-merge"])
def test_losing_a_sources_unsynced_writes_sends_nothing_twice(topology: str) -> None:
    sim = Simulator(load_topology(TOPOLOGIES / f"{topology}.yaml"), PROTOCOLS["none"], {})
    assert sim.guarantee is Guarantee.AT_MOST_ONCE
    end = sim.fault_free_end
    for k in range(1, 8):  # the source loses its unsynced writes at seven points of the run
        host = SimHost(sim.graph, PROTOCOLS["none"], sim.params, seed=k)

        def lose(h: SimHost = host) -> None:
            h.inject(LoseUnsynced(0, "lines[0]"))

        host.at(end * k / 8, lose)
        result = host.run()
        struck = [e for e in result.events
                  if e.kind == "fault-injected" and e.data["type"] == "lose-unsynced"]
        assert struck, k
        v = verify(sim.modes, sim.golden, result.outputs, sim.guarantee,
                   complete=result.complete)
        assert v.passed, (k, v.totals())
