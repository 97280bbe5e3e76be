"""Topologies the replica-ring tests run: the paper's chain of two ring operators, and
the bundled topologies/replica-chain.yaml."""

from __future__ import annotations

from pathlib import Path

from ftctl.config.load import load_topology
from ftctl.config.topology import Topology
from ftctl.figures.fig_002_table1 import chain

__all__ = ["chain", "replica_chain"]


def replica_chain(records: int = 600) -> Topology:
    """The bundled topology, with ``records`` input records."""
    topo = load_topology(Path(__file__).resolve().parent.parent / "topologies"
                         / "replica-chain.yaml")
    return topo.model_copy(update={"input": topo.input.model_copy(update={"records": records})})
