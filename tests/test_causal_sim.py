"""``causal`` and ``lineage`` under seeded crash schedules, and isolation.

Their planted bugs are in protocols/*_mutants.py, run by tests/conformance/."""

from __future__ import annotations

from typing import Any

import pytest

from ftctl.runtime.graph import ExecutionGraph
from ftctl.sim.faults import FailureSchedule, Strike, parse_kinds
from ftctl.sim.golden import golden_output
from ftctl.sim.host import SimHost
from ftctl.sim.runner import Simulator, sim_params
from ftctl.verify.checker import verify
from protocols.causal.recovery import CausalIncomplete
from protocols.contract.spec import Guarantee
from protocols.registry import PROTOCOLS, resolve
from tests.conftest import load

pytestmark = pytest.mark.sim

# Causal on sharder is the slowest pair (20 shards, each snapshot copying payload logs).
SCHEDULES = {("causal", "sharder"): 30}


@pytest.mark.parametrize("topology", ["sharder", "diamond", "wordcount"])
@pytest.mark.parametrize("protocol", ["causal", "lineage"])
def test_no_violations(protocol: str, topology: str) -> None:
    sim = Simulator(load(topology), PROTOCOLS[protocol], {})
    summary = sim.run_many(SCHEDULES.get((protocol, topology), 60), seed=2000)
    assert summary.failures > 0
    assert summary.failing_seeds == [], summary.violations


def test_a_restarted_sink_keeps_its_predecessors_visible_counts() -> None:
    # Schedules where out[0] restarts more than once: a later sink must still know what
    # an earlier one made visible since its last local snapshot, or it outputs those
    # records again (both seeds fail when a replacement starts with no visible counts).
    for topology, seed in (("diamond", 133), ("wordcount", 30)):
        sim = Simulator(load(topology), PROTOCOLS["causal"], {})
        summary = sim.run_many(1, seed=seed)
        assert summary.failures > 0
        assert summary.failing_seeds == [], (topology, summary.violations)


@pytest.mark.parametrize("depth", [2, 3])
def test_a_stateless_childs_restart_stays_adjacent_to_its_parent_until_g_covers_it(
        depth: int) -> None:
    # Nexmark Q3 at 20,000 events, seed 120, every fault kind: project[0] (a stateless
    # map, the only child of the join match[0]) restarts from T* at match[0]-time 20,
    # its predecessor's diff log about match[0] lost with it. Later a node loss takes
    # match[0], which restores its time-0 snapshot: B-times 1-20 were logged nowhere
    # (CausalIncomplete). Until match[0]'s g reaches 20, project[0]'s recovery is not
    # over, so the two are one component: by-id -> match -> project, L = 3. Within f
    # (depth 3) project[0] restarts with match[0], which reads its history through
    # project[0]'s child (spec M3); beyond it (depth 2) the fallback names project[0].
    sim = Simulator(load("nexmark/q3").with_input(records=20_000), PROTOCOLS["causal"],
                    {"depth": depth},
                    kinds=parse_kinds("crash,pause,partition,delay,slow,node"))
    outcome = sim.run_one(120)
    assert outcome.verdict.passed, outcome.verdict
    notes = [e.payload for e in outcome.result.events
             if e.note in ("causal-recover", "causal-fallback")]
    if depth == 3:
        assert {"members": ["by-id[2]", "by-seller[1]", "match[0]", "match[3]", "project[0]"],
                "failed": ["by-id[2]", "by-seller[1]", "match[0]", "match[3]"],
                "L": 3, "f": 3} in notes, notes
    else:
        fallback = [n for n in notes if "reason" in n]
        assert [(n["reason"], n["component"], n["L"]) for n in fallback] == [
            ("beyond-f", ["by-id[2]", "by-seller[1]", "match[0]", "match[3]", "project[0]"],
             3)], notes


def test_an_event_that_sends_nothing_is_still_seen_by_every_child() -> None:
    # progressive-small seed 4: cnt[0] fails; one of its events had an empty input batch
    # and no watermark advance, so it sent nothing and no child logged it. Replayed later
    # than it ran, that batch advanced the watermark and sent a batch that never existed,
    # shifting every later seq: 28 duplicated records. An empty batch on every channel
    # (spec N5) lets each child log every event, so the replay places it. Without it the
    # completeness check (spec R7) now refuses the plan: on seed 3, cnt[0]'s silent
    # B-times 3 and 5 are observed nowhere.
    sim = Simulator(load("progressive-small"), PROTOCOLS["causal"], {})
    for seed in (1, 4):
        summary = sim.run_many(1, seed=seed)
        assert summary.failures > 0
        assert summary.failing_seeds == [], summary.violations
    info, params = resolve("causal/silent-events")
    mutant = Simulator(load("progressive-small"), info, params)
    with pytest.raises(CausalIncomplete, match=r"cnt\[0\]: B-times \[3, 5\] after 0"):
        mutant.run_one(3)


def _run(protocol: str, schedule: FailureSchedule, seed: int = 4,
         given: dict[str, Any] | None = None) -> tuple[Any, bool]:
    graph = ExecutionGraph(load("sharder"))
    params = sim_params(graph, PROTOCOLS[protocol], given or {})
    result = SimHost(graph, PROTOCOLS[protocol], params, seed, schedule).run()
    ok = verify(graph.topology.sink_modes(), golden_output(graph), result.outputs,
                Guarantee.EXACTLY_ONCE, complete=result.complete).passed
    return result, ok


@pytest.mark.parametrize("at", [150, 400, 700])
def test_causal_sharder_failure_restarts_only_the_sharder(at: int) -> None:
    result, ok = _run("causal", FailureSchedule([Strike(at, 1, ("sharder[0]",))]))
    assert ok and result.complete
    restarted = [e for e in result.events if e.kind == "instance-started"]
    assert [e.instance for e in restarted] == ["sharder[0]"]
    # The sharder has no state (spec R3): it never took a local snapshot and its
    # replacement restores none, 0 bytes read; it starts from T*.
    assert restarted[0].payload["restore"] is None
    kinds = {e.note for e in result.events}
    assert "causal-replay" in kinds
    assert "causal-fallback" not in kinds


def test_lineage_sharder_failure_purges_the_downstream() -> None:
    result, ok = _run("lineage", FailureSchedule([Strike(400, 1, ("sharder[0]",))]))
    assert ok and result.complete
    restarted = {e.instance for e in result.events if e.kind == "instance-started"}
    assert "sharder[0]" in restarted and "out[0]" in restarted
    assert len([i for i in restarted if i.startswith("shard[")]) == 20
    assert "votes[0]" not in restarted


def test_without_clocks_a_failure_restarts_everything_and_stays_exactly_once() -> None:
    # ``clocks: off`` (the Fig. 3 baseline) logs no diffs: nothing can pin the order a
    # replacement must follow, so every failure takes the whole-graph fallback.
    result, ok = _run("causal", FailureSchedule([Strike(400, 1, ("sharder[0]",))]),
                      given={"clocks": "off"})
    assert ok and result.complete
    fallbacks = [e for e in result.events if e.note == "causal-fallback"]
    assert fallbacks and fallbacks[0].payload["reason"] == "no-clocks"
    restarted = {e.instance for e in result.events if e.kind == "instance-started"}
    assert "votes[0]" in restarted and "out[0]" in restarted
    sim = Simulator(load("diamond"), PROTOCOLS["causal"], {"clocks": "off"})
    summary = sim.run_many(40, seed=2000)
    assert summary.failures > 0
    assert summary.failing_seeds == [], summary.violations


class _DiesBeforeItRuns(SimHost):
    """``target``'s first task dies during start-up, before it handled anything: the
    snapshot a start takes first is never written, and the crash comes before any batch."""

    target = ""

    def _start(self, iid: str, inc: int) -> tuple[Any, list[Any]]:
        unit, acts = super()._start(iid, inc)
        if iid != self.target or inc != 0 or unit is None:
            return unit, acts
        self.at(self.now, lambda: self._strike(Strike(0, 1, (iid,))))
        return unit, []  # what its start did is lost with it


@pytest.mark.parametrize("target", ["count[0]", "out[0]", "lines[0]"])
@pytest.mark.parametrize("clocks", ["on", "off"])  # off: every failure is a fallback
def test_an_instance_that_died_before_it_ever_ran_restarts_from_nothing(
        target: str, clocks: str) -> None:
    graph = ExecutionGraph(load("wordcount").with_input(records=2_000))
    params = sim_params(graph, PROTOCOLS["causal"], {"clocks": clocks})
    host = _DiesBeforeItRuns(graph, PROTOCOLS["causal"], params, 1, FailureSchedule([]))
    host.target = target
    result = host.run()
    assert verify(graph.topology.sink_modes(), golden_output(graph), result.outputs,
                  Guarantee.EXACTLY_ONCE, complete=result.complete).passed
    # It stored no slot, so its replacement restores none (reading one is a store fault
    # that stops the run, or a protocol error): it starts from nothing.
    [started] = [e for e in result.events if e.kind == "instance-started"
                 and e.instance == target]
    assert started.payload["restore"] is None
    assert not [e for e in result.events if e.kind in ("run-stopped", "store-read-failed")]
