"""The golden run's producer: the fault-free output, from the same runtime code as every
run (the simulation host under the ``none`` protocol). ``ftctl.verify.golden`` caches
what a producer like this one computes."""

from __future__ import annotations

from ftctl.runtime.graph import ExecutionGraph
from ftctl.sim.host import SimHost
from ftctl.verify.golden import Outputs
from protocols.contract.params import NoParams
from protocols.registry import PROTOCOLS


def golden_output(graph: ExecutionGraph) -> Outputs:
    """The fault-free output: same topology, input and seed, no failures.

    No cap on the number of events: without failures the run always ends, and a golden
    output cut short would make every complete run look like it produced extra records.
    """
    result = SimHost(graph, PROTOCOLS["none"], NoParams(), seed=0, max_events=None).run()
    if not result.complete:
        raise RuntimeError(f"the fault-free run of {graph.topology.name} did not finish")
    return result.outputs
