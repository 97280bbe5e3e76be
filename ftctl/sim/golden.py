"""The golden run's producer: the fault-free output, from the same runtime code as every
run (the simulation host under the ``none`` protocol). ``ftctl.verify.golden`` caches
what a producer like this one computes."""

from __future__ import annotations

from pathlib import Path
from typing import Any, overload

from ftctl.runtime.graph import ExecutionGraph
from ftctl.sim.host import SimHost
from ftctl.spill import SpilledRecords
from ftctl.store import SinkStore
from ftctl.verify.golden import Outputs
from protocols.contract.params import NoParams
from protocols.registry import PROTOCOLS

# Records a sink instance keeps in memory before they go to the spill: bounded, so the
# golden run of ``run``/``chaos``/``compare``/``gate`` does not grow with the input.
SPILL_KEEP = 65_536


class _OnDisk(SinkStore):
    """Sinks whose output stays in their spill when the run ends: ``by_operator`` (which
    the simulation host's result would read it all back with) gives nothing, the caller
    streams it (``streamed``)."""

    def by_operator(self) -> dict[str, list[tuple[Any, Any]]]:
        return {}


@overload
def golden_output(graph: ExecutionGraph) -> Outputs: ...
@overload
def golden_output(graph: ExecutionGraph, spill: Path) -> dict[str, SpilledRecords]: ...
def golden_output(graph: ExecutionGraph, spill: Path | None = None
                  ) -> Outputs | dict[str, SpilledRecords]:
    """The fault-free output: same topology, input and seed, no failures.

    No cap on the number of events: without failures the run always ends, and a golden
    output cut short would make every complete run look like it produced extra records.

    With ``spill`` (a folder the caller removes once done), each sink instance holds at
    most ``SPILL_KEEP`` records in memory and the rest goes to files there as the run
    makes it; the output comes back as records read from those files when iterated.
    Without, as lists (the simulation's checker indexes them).
    """
    host = SimHost(graph, PROTOCOLS["none"], NoParams(), seed=0, max_events=None)
    sinks = _OnDisk(spill, keep=SPILL_KEEP) if spill is not None else None
    if sinks is not None:
        host.sinks = host.outputs.sinks = sinks  # as ``ftctl.sim.costs`` times them
    result = host.run()
    if not result.complete:
        raise RuntimeError(f"the fault-free run of {graph.topology.name} did not finish")
    return sinks.streamed() if sinks is not None else result.outputs
