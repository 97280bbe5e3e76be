"""falkirk's in-place rollback (``rollback=in-place``) end to end on the in-test kernel
(tests/falkirk_kernel.py).

Everything else runs on the simulation host (tests/test_falkirk_sim.py). In-place
rollback stays here because the kernel does not carry out ``RollBack`` yet
(ftctl/kernel/coordinator.py refuses it), so the simulation host cannot run it.
"""

from __future__ import annotations

import os
from collections import Counter
from functools import cache

import pytest

from ftctl.runtime.graph import ExecutionGraph
from ftctl.sim.golden import golden_output
from protocols.falkirk.params import FalkirkParams
from tests.conftest import load
from tests.falkirk_kernel import FalkirkKernel, judge, schedule

# seeded schedules per topology; raise it for a sweep:
#   FTCTL_FALKIRK_SEEDS=50 python -m pytest tests/test_falkirk_runs.py -k exactly_once
SEEDS = int(os.environ.get("FTCTL_FALKIRK_SEEDS", "2"))
HORIZON = {"wordcount": 0.09, "diamond": 0.05, "windowed": 0.09, "sharder": 0.17}
IN_PLACE = {"default_stateless": "log", "rollback": "in-place"}


@cache
def gold(name: str) -> Counter:
    return Counter(r for recs in golden_output(ExecutionGraph(load(name))).values()
                   for r in recs)


@pytest.mark.parametrize("name", ["wordcount", "diamond", "windowed", "sharder"])
def test_in_place_rollback_is_exactly_once_under_seeded_crashes(name: str) -> None:
    params = FalkirkParams(**IN_PLACE)
    for seed in range(SEEDS):
        k = FalkirkKernel(load(name), params, seed=seed)
        out = k.run(kills=schedule(seed, list(k.graph.instances), HORIZON[name]))
        assert (judge(out, gold(name)), k.coord.finished(k)) == ((0, 0), True), \
            f"{name} seed {seed}"


def test_without_a_firewall_live_shards_roll_back_in_place() -> None:
    """An ephemeral sharder drags the sharder and the 19 other shards back: the struck
    shard restarts, the others roll back without a restart."""
    k = FalkirkKernel(load("sharder"), FalkirkParams(default_stateful="eager",
                                                     rollback="in-place"))
    out = k.run(kills=((0.08, "shard[7]"),))
    assert judge(out, gold("sharder")) == (0, 0)
    assert k.restarts == Counter({"shard[7]": 1})
    assert set(k.rollbacks) == {"sharder[0]", *(f"shard[{i}]" for i in range(20)
                                                 if i != 7)}
