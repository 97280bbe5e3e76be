"""falkirk on the simulation host (``ftctl sim``): exact regressions for schedules that once
broke, replayed by seed; a few hundred seeded schedules per policy mix; the firewall's
restart count; every shipped mutant caught by a recorded seed."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

import pytest

from ftctl.sim.faults import CRASH_ONLY, FailureSchedule, FaultKind, Strike
from ftctl.sim.host import SimHost
from ftctl.sim.runner import ScheduleOutcome, Simulator
from ftctl.verify.checker import verify
from protocols.contract.spec import Mutant
from protocols.falkirk.fixedpoint import NoFrontier
from protocols.falkirk.spec import SPEC
from protocols.registry import resolve
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


def rounds(outcome: ScheduleOutcome) -> list[Mapping[str, Any]]:
    return [e.payload for e in outcome.result.events if e.note == "falkirk-rollback"]


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


def test_a_second_reset_forgets_what_the_first_undid() -> None:
    """progressive-small, firewall, seed 6. Round 2: ones[0], ones[1] and cnt[0] fail and
    every stateful instance restarts empty, rewinding each sink's channels to nothing;
    round 3: both[1] fails before the new instances have checkpointed again. By §3.6 the
    checkpoints reported before round 2 and the sinks' commits of the rewound channels
    are void, so round 3 restarts them empty again (every frontier -1; out3's channel
    from both[1], empty since its rewind, is left as it is). Kept (mutant
    ``stale-checkpoints-kept``, which reverts the rule for instances and sink channels
    alike), round 3 has no consistent frontier for both[1] (NoFrontier). Either half of
    the rule alone passes this schedule; no seed of 1-800 here needs the sink-channel
    half by itself."""
    out = replay("progressive-small", FIREWALL, 6)
    assert out.verdict.passed and out.result.complete
    assert [r["failed"] for r in rounds(out)] == [
        ["tags[0]"], ["cnt[0]", "ones[0]", "ones[1]"], ["both[1]"]]
    second, third = rounds(out)[1:]
    assert second["restarted"] == ["both[0]", "both[1]", "cnt[0]", "cnt[1]", "ones[0]",
                                   "ones[1]", "win[0]", "win[1]"]
    stateful = ("cnt[0]", "cnt[1]", "win[0]", "win[1]", "both[0]", "both[1]")
    assert all(third["frontiers"][i] == -1 for i in stateful)
    assert third["frontiers"]["out3[0]@23"] == -2 and third["rewound"] == [
        "out1[0]", "out2[0]", "out3[0]"]
    info, params = resolve("falkirk/stale-checkpoints-kept")
    with pytest.raises(NoFrontier, match=r"both\[1\]"):
        Simulator(load("progressive-small"), info, params).run_one(6)


@pytest.mark.parametrize("seed", [5, 11])
def test_a_window_after_a_fan_in_fires_in_the_same_epoch_on_replay(seed: int) -> None:
    """joins/join-window, lazy-staggered: the stateless fan-in ``ones`` interleaves epochs,
    so the watermark on its batches depended on arrival order. A window restarted empty
    then fired windows of epochs its sink had already committed into another epoch
    (seed 5: windows ending 400 and 600 committed twice, 559 records; seed 11: the
    window ending 800). With watermarks moved only by close(t).wm at completion (N4)
    each window fires in the epoch it fired in the first time."""
    out = Simulator(load("joins/join-window"), SPEC, MIXES["lazy-staggered"]).run_one(seed)
    assert len(rounds(out)) >= 2  # the window restarted empty after committing
    assert out.verdict.passed and out.result.complete, out.verdict


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


def strike(topology: str, params: dict[str, Any], *strikes: tuple[float | int, str],
           seed: int = 5) -> tuple[ScheduleOutcome, Simulator]:
    """One run with crashes of named instances, each at an event index (int) or a
    fraction of the fault-free run's events (float)."""
    sim = Simulator(load(topology), SPEC, params)
    schedule = FailureSchedule([
        Strike(at if isinstance(at, int) else int(at * sim.horizon), 1, (victim,))
        for at, victim in strikes])
    result = SimHost(sim.graph, sim.protocol, sim.params, seed=seed, schedule=schedule,
                     max_events=sim.stall_after).run()
    verdict = verify(sim.modes, sim.golden, result.outputs, sim.guarantee,
                     complete=result.complete, golden_index=sim.golden_index)
    return ScheduleOutcome(seed, result, verdict), sim


def restarted(outcome: ScheduleOutcome) -> list[str]:
    return sorted(e.instance for e in outcome.result.events
                  if e.kind == "instance-started")


def test_the_firewall_restarts_the_struck_shard_alone() -> None:
    """Spec §1 (c): with a logging sharder, one failed shard restarts 1 of 23 instances
    and nobody else rolls back; without it the ephemeral fan-out drags the sharder and
    every other shard back (restarted at their frontiers, rollback=restart)."""
    fw, _ = strike("sharder", {"policy": "sharder=log", "default_stateful": "eager"},
                   (0.5, "shard[7]"))
    assert fw.verdict.passed and fw.result.complete
    assert restarted(fw) == ["shard[7]"]
    assert [r["restarted"] for r in rounds(fw)] == [["shard[7]"]]
    plain, _ = strike("sharder", {"default_stateful": "eager"}, (0.5, "shard[7]"))
    assert plain.verdict.passed and plain.result.complete
    assert restarted(plain) == sorted(["sharder[0]", *(f"shard[{i}]" for i in range(20))])


def test_a_restarted_logger_still_has_what_a_later_round_asks_for() -> None:
    """split[1] (a logger) restarts at epoch 1; the sink then fails, rolling the counts
    back to nothing: split[1] must replay epochs 0 and 1 from the segments it got back."""
    out, sim = strike("wordcount", FIREWALL, (40, "split[1]"), (77, "out[0]"), seed=3)
    assert out.verdict.passed and out.result.complete
    first, second = rounds(out)
    assert first["failed"] == ["split[1]"] and first["frontiers"]["split[1]"] == 1
    assert second["failed"] == ["out[0]"] and "split[1]" not in second["restarted"]
    assert second["frontiers"]["count[0]"] == -1  # reached back past split[1]'s restart
    split1_to_count0 = next(c.id for c in sim.graph.channels
                            if (c.src, c.dst) == ("split[1]", "count[0]"))
    assert second["replay"][str(split1_to_count0)][0] == 0


# Every shipped mutant, with the seed that catches it (the conformance kit's pins,
# tests/conformance/test_kit.py): the protocol passes that schedule, the mutant loses,
# duplicates or reorders output, or crashes (a restore of a deleted checkpoint, no
# admissible frontier).
CAUGHT_AT = {
    "phi-off-by-one": ("diamond", 1), "firewall-ignored": ("diamond", 1),
    "no-rewind": ("replica-chain", 1), "skip-fixpoint-iteration": ("diamond", 1),
    "no-inflight": ("wordcount", 3), "source-resumes-late": ("replica-chain", 2),
    "logging-after-sending": ("replica-chain", 3),
    "sink-keeps-rewound-output": ("replica-chain", 1), "sink-keeps-staged": ("diamond", 4),
    "no-positional-skip": ("replica-chain", 27), "gc-too-eager": ("progressive-small", 2),
    "report-without-persist": ("diamond", 1), "stateful-not-aligned": ("diamond", 1),
    "stale-checkpoints-kept": ("diamond", 19),
    "fallback-alone": ("wordcount", 1),  # on crash and corrupt schedules (its kinds)
}


def test_at_least_thirteen_mutants_ship_each_with_a_seed() -> None:
    assert len(SPEC.mutants) >= 13 and set(CAUGHT_AT) == {m.name for m in SPEC.mutants}


@pytest.mark.parametrize("mutant", SPEC.mutants, ids=lambda m: m.name)
def test_every_shipped_mutant_is_caught(mutant: Mutant) -> None:
    topology, seed = CAUGHT_AT[mutant.name]
    info, params = resolve(f"falkirk/{mutant.name}")
    kinds = cast(tuple[FaultKind, ...], mutant.kinds or CRASH_ONLY)
    # the protocol passes it
    assert Simulator(load(topology), SPEC, params, kinds=kinds).run_one(seed).verdict.passed
    try:
        got = Simulator(load(topology), info, params, kinds=kinds).run_one(seed)
    except Exception:  # the planted bug crashed the run: caught
        return
    assert not got.verdict.passed, f"{mutant.name} survived {topology} seed {seed}"
