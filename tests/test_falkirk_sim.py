"""falkirk on the simulation host (``ftctl sim``): exact regressions for schedules that once
broke, replayed by seed."""

from __future__ import annotations

from typing import Any

import pytest

from ftctl.sim.runner import ScheduleOutcome, Simulator
from protocols.falkirk.spec import SPEC
from tests.conftest import load

pytestmark = pytest.mark.sim

FIREWALL = {"default_stateless": "log"}

# Policy mixes (the falkirk section of docs/protocols.md has 2,000 schedules of each per
# bundled topology); here a few hundred per mix, on the cheap topologies.
MIXES: dict[str, dict[str, str]] = {
    "default": {},
    "firewall": FIREWALL,
    "eager": {"default_stateful": "eager"},
    "eager-firewall": {**FIREWALL, "default_stateful": "eager+log"},
    "lazy-staggered": {"default_stateful": "lazy:3", "stagger": "on"},
    "batch": {"default_stateful": "batch"},
}
PER_MIX = {"diamond": 100, "windowed": 30, "wordcount": 20}


def replay(topology: str, params: dict[str, Any], seed: int) -> ScheduleOutcome:
    """``ftctl sim topologies/<topology>.yaml -p falkirk --param ... --seed <seed>``."""
    return Simulator(load(topology), SPEC, params).run_one(seed)


def rounds(outcome: ScheduleOutcome) -> list[dict[str, Any]]:
    return [e for e in outcome.result.events if e.get("event") == "falkirk-rollback"]


def test_a_checkpoint_above_a_rollback_is_forgotten() -> None:
    """diamond, firewall, seed 19. Round 1: evens[0] fails having reported only epoch 1,
    so merge[1] (which consumed its epochs 2-3) restarts empty and the sink's channel
    from merge[1] is rewound to nothing, although merge[1] had reported a checkpoint at
    epoch 3 and the sink had committed epochs 0-3. Round 3: the new merge[1] dies before
    closing anything on that channel. By §3.6, F*'(p) = {f ∈ F*(p) : f ⊆ f(p)}: the old
    checkpoint is void after round 1, so merge[1] restarts empty again and the sink keeps
    its channel (rewound to what it closed, nothing). Kept, the stale checkpoint was the
    only entry left (GC had risen on it) and its sent epoch 3 met the sink's closed -1:
    NoFrontier."""
    out = replay("diamond", FIREWALL, 19)
    assert out.verdict.passed and out.result.complete
    first, last = rounds(out)[0], rounds(out)[-1]
    assert first["failed"] == ["evens[0]"] and first["frontiers"]["merge[1]"] == -1
    assert last["failed"] == ["merge[1]", "tags[1]"]
    assert last["frontiers"]["merge[1]"] == -1
    assert last["frontiers"]["out[0]@19"] == -2  # TOP: the sink keeps running
    assert last["rewound"] == ["out[0]"]


def test_a_rewound_sink_channel_forgets_its_commits() -> None:
    """progressive-small, firewall, seed 41: out1 fails and every stateful instance
    restarts empty, rewinding out2's channels; a burst then kills win[0] while its new
    closes are in flight. out2's commits of win[0]'s channel from before the rewind must
    not count as restorable (nor raise the low-watermark)."""
    out = replay("progressive-small", FIREWALL, 41)
    assert out.verdict.passed and out.result.complete
    assert [r["failed"] for r in rounds(out)] == [["out1[0]"],
                                                  ["ones[1]", "tags[0]", "win[0]"]]
    assert rounds(out)[-1]["frontiers"]["win[0]"] == -1


@pytest.mark.parametrize("mix", list(MIXES))
def test_exactly_once_over_a_few_hundred_schedules(mix: str) -> None:
    """Seeded crash schedules, bursts of up to 3 instances and up to 3 strikes (failures
    during recovery included): no record lost or duplicated, every run complete."""
    failures = 0
    for topology, n in PER_MIX.items():
        sim = Simulator(load(topology), SPEC, MIXES[mix], max_failures=3, max_burst=3)
        summary = sim.run_many(n, 1)
        assert summary.passed, (topology, mix, summary.failing_seeds[:5],
                                dict(summary.violations))
        failures += summary.failures
    assert failures > sum(PER_MIX.values())  # bursts and repeated strikes did happen
