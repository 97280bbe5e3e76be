"""falkirk's in-place rollback (``rollback=in-place``) on the simulation host: live
instances whose frontier moved roll back through the kernel's ``RollBack`` without a
restart; failed ones restart; everybody else keeps running."""

from __future__ import annotations

import pytest

from ftctl.sim.runner import Simulator
from protocols.falkirk.spec import SPEC
from tests.conftest import load
from tests.test_falkirk_sim import restarted, rounds, strike

pytestmark = pytest.mark.sim

ROLLED_BACK = "instance-rolled-back"  # the history kind of a RollBack

IN_PLACE = {"rollback": "in-place"}
MIXES = {"default": IN_PLACE, "firewall": {**IN_PLACE, "default_stateless": "log"}}
PER_TOPOLOGY = {"wordcount": 30, "diamond": 60, "windowed": 40, "sharder": 12}


@pytest.mark.parametrize("mix", list(MIXES))
def test_in_place_rollback_is_exactly_once_under_seeded_crashes(mix: str) -> None:
    """Up to 3 strikes of bursts of up to 3 instances (failures during recovery
    included): every run complete and exactly-once, and live instances did roll back
    in place (not restart) on every topology."""
    for topology, n in PER_TOPOLOGY.items():
        sim = Simulator(load(topology), SPEC, MIXES[mix], max_failures=3, max_burst=3)
        rolled = 0
        for seed in range(1, n + 1):
            out = sim.run_one(seed)
            assert out.verdict.passed and out.result.complete, (topology, mix, seed)
            # every RollBack the coordinator asked for went through the kernel; the
            # unit carried it out unless it was lost before it got there
            asked = sum(len(r["rolled_back"]) for r in rounds(out))
            assert len([e for e in out.result.events if e.kind == ROLLED_BACK]) == asked
            assert out.result.stats.rollbacks <= asked
            rolled += out.result.stats.rollbacks
        assert rolled > 0, (topology, mix)


def rolled_back(events: list) -> list[str]:
    return sorted(e.instance for e in events if e.kind == ROLLED_BACK
                  and "skipped" not in e.data)


def test_without_a_firewall_live_shards_roll_back_in_place() -> None:
    """An ephemeral sharder drags the sharder and the 19 other shards back: the struck
    shard restarts, the others roll back in place (same incarnation), the source and
    the sink keep running."""
    out, sim = strike("sharder", {**IN_PLACE, "default_stateful": "eager"},
                      (0.5, "shard[7]"))
    assert out.verdict.passed and out.result.complete
    events = out.result.events
    assert restarted(out) == ["shard[7]"]
    others = sorted(["sharder[0]", *(f"shard[{i}]" for i in range(20) if i != 7)])
    assert rolled_back(events) == others
    assert [(r["restarted"], r["rolled_back"]) for r in rounds(out)] == [(["shard[7]"], others)]
    assert {e.incarnation for e in events if e.kind == ROLLED_BACK} == {0}
    assert out.result.stats.rollbacks == 20
    kept = set(sim.graph.order) - set(others) - {"shard[7]"}
    assert kept == {*sim.graph.sources, *sim.graph.sinks}
    assert not {e.instance for e in events if e.kind in (ROLLED_BACK, "instance-started")} & kept


def test_with_a_firewall_nothing_rolls_back_in_place() -> None:
    """A logging sharder is a firewall: the struck shard restarts alone and replays
    from the sharder's log; nobody rolls back."""
    out, _ = strike("sharder", {**IN_PLACE, "policy": "sharder=log",
                                "default_stateful": "eager"}, (0.5, "shard[7]"))
    assert out.verdict.passed and out.result.complete
    assert restarted(out) == ["shard[7]"]
    assert rolled_back(out.result.events) == [] and out.result.stats.rollbacks == 0
