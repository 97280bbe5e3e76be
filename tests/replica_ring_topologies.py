"""Topologies the replica-ring tests run: the paper's chain of two ring operators, and
the bundled topologies/replica-chain.yaml."""

from __future__ import annotations

from pathlib import Path

from ftctl.config.load import load_topology
from ftctl.config.topology import Topology


def chain(r: int, records: int, sources: int = 1) -> Topology:
    """``src (sources) -> A (r) -> B (r) -> out``, one record per tuple (Table 1's setup)."""
    return Topology.model_validate({
        "name": "chain", "input": {"records": records, "batch": 1, "seed": 3},
        "operators": [
            {"name": "src", "type": "source.text", "parallelism": sources,
             "params": {"words_per_line": 1, "vocabulary": 50}},
            {"name": "A", "type": "map", "function": "identity", "parallelism": r},
            {"name": "B", "type": "map", "function": "identity", "parallelism": r},
            {"name": "out", "type": "sink"}],
        "edges": [{"from": "src", "to": "A", "partition": "forward" if sources == r
                   else "round-robin"},
                  {"from": "A", "to": "B", "partition": "round-robin"},
                  {"from": "B", "to": "out"}]})


def replica_chain(records: int = 600) -> Topology:
    """The bundled topology, with ``records`` input records."""
    topo = load_topology(Path(__file__).resolve().parent.parent / "topologies"
                         / "replica-chain.yaml")
    return topo.model_copy(update={"input": topo.input.model_copy(update={"records": records})})
