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



@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """A ``docker`` test is skipped, saying why, when no engine answers; asked only when
    one is about to run (before its fixtures, which would start containers), so
    ``-m browser`` or ``-m sim`` report no Docker skips."""
    if item.get_closest_marker("docker") is not None:
        from tests.dockerkit import skip_unless_engine

        skip_unless_engine()
