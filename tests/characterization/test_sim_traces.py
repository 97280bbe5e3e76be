"""The simulation host's behaviour, pinned: refactoring the kernel must not change a trace."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

from tests.characterization.pin import CASES, PINNED, observe

pytestmark = pytest.mark.sim

REGENERATE = os.environ.get("FTCTL_REGENERATE") == "1"


@pytest.mark.parametrize(("name", "topology", "protocol", "params"), CASES,
                         ids=[c[0] for c in CASES])
def test_sim_behaviour_is_unchanged(name: str, topology: str, protocol: str,
                                    params: dict[str, Any]) -> None:
    got = observe(topology, protocol, params)
    pinned = json.loads(PINNED.read_text()) if PINNED.exists() else {}
    if REGENERATE:
        pinned[name] = got
        PINNED.write_text(json.dumps(pinned, indent=1, sort_keys=True) + "\n")
        return
    assert name in pinned, "not pinned yet: run with FTCTL_REGENERATE=1"
    assert got == pinned[name]
