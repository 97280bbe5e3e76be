from __future__ import annotations

from pathlib import Path

import pytest

from ftctl.config.load import load_topology
from ftctl.config.topology import Topology

ROOT = Path(__file__).resolve().parent.parent
TOPOLOGIES = ROOT / "topologies"


@pytest.fixture
def topology_file() -> object:
    def get(name: str) -> Path:
        return TOPOLOGIES / f"{name}.yaml"

    return get


def load(name: str) -> Topology:
    return load_topology(TOPOLOGIES / f"{name}.yaml")
