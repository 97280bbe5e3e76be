"""The kit's clock cases (ftctl/conformance/clocks.py): crashes with the clock faults each
protocol tolerates, judged on exactly-once and on false suspicions
(ftctl/sim/suspicions.py); replica-ring's clock mutant caught by them."""

from __future__ import annotations

import os
import random
from typing import Any

import pytest
from typer.testing import CliRunner

from ftctl.cli import app
from ftctl.config.load import load_topology
from ftctl.conformance.cases import (
    CLOCK_SUFFIX,
    GuaranteeCase,
    short_timings,
    timing_overlays,
    topology_named,
)
from ftctl.conformance.clocks import (
    CLOCK_KINDS,
    RTT_MAX,
    clock_cases,
    tolerated_clock_kinds,
)
from ftctl.conformance.kit import Kit
from ftctl.kernel.clocks import Drift, Jump, Skew, Stall
from ftctl.kernel.history import HistoryEvent
from ftctl.sim.clock_faults import DRIFT_RATES, MAX_STEP, ClockStrike, draw
from ftctl.sim.runner import Simulator
from ftctl.sim.suspicions import false_suspicions
from protocols.mutants import get_mutant
from protocols.registry import PROTOCOLS, get_protocol

pytestmark = pytest.mark.sim

N = max(3, int(os.environ.get("FTCTL_KIT_N", "3")))  # seeds 1-3 strike a clock in each
RING = "replica-ring"
FIXED = {"semantics": "exactly-once", "variant": "fixed"}
SHORT = short_timings(RING, FIXED)


def _ev(seq: int, kind: str, instance: str | None = None, **data: Any) -> HistoryEvent:
    return HistoryEvent(seq, seq / 1000, "sim", kind, data, instance)


def test_a_suspicion_counts_as_false_only_for_a_unit_no_fault_reached() -> None:
    events = [
        _ev(1, "fault-injected", type="clock-skew", target="a[0]", offset=0.01),
        _ev(2, "failure-suspected", "a[0]", by="a[2]", reason="ping timeout"),  # false
        _ev(3, "route-changed", slot="a[0]", to="a[1]"),  # its slot taken over: false
        _ev(4, "fault-injected", type="crash", instances=["a[1]"]),
        _ev(5, "failure-suspected", "a[1]", by="a[0]", reason="ping timeout"),
        _ev(6, "route-changed", slot="a[1]", to="a[2]"),
        _ev(7, "instance-started", "a[1]", reason="restart"),
        _ev(8, "route-changed", slot="a[1]", to="a[1]"),  # back home: no takeover
        # a ping the dead incarnation left unanswered, timing out after the restart
        _ev(9, "failure-suspected", "a[1]", by="a[0]", reason="ping timeout"),
        _ev(10, "frame-lost", "b[0]", sender="a[2]"),  # a partition failed b[0]
        _ev(11, "failure-suspected", "b[0]", by="b[1]", reason="ping timeout"),
        _ev(12, "instance-stopped", instances=["c[0]"]),  # a rollback's stop: no suspicion
    ]
    assert false_suspicions(events) == {"live-suspected": 1, "live-taken-over": 1}
    assert false_suspicions(events[3:]) == {}


def test_the_draws_stay_within_the_ranges_the_bounds_are_computed_from() -> None:
    rng = random.Random(5)
    for kind in CLOCK_KINDS:
        for _ in range(300):
            strike = draw(kind, rng, 100, 1)
            assert isinstance(strike, ClockStrike)
            f = strike.fault
            if isinstance(f, Drift):
                assert DRIFT_RATES[0] <= f.rate <= DRIFT_RATES[1]
            elif isinstance(f, Stall):
                assert 0 < f.seconds <= MAX_STEP and not f.catch_up
            else:
                assert isinstance(f, Skew | Jump)
                assert 0 < abs(f.offset if isinstance(f, Skew) else f.by) <= MAX_STEP


def test_a_ping_detector_is_drawn_no_forward_step_and_a_drift_only_within_its_bound() -> None:
    for timing in timing_overlays(RING, FIXED):
        assert tolerated_clock_kinds(RING, {**FIXED, **timing}) == ("clock-drift",
                                                                    "clock-stall")
    # a timeout shorter than the fastest drawn clock's round trip: no drift either
    tight = {**FIXED, "ping_every": 0.001, "ping_timeout": 0.0015}
    assert DRIFT_RATES[1] * RTT_MAX > 0.002  # T: the first tick past the deadline
    assert tolerated_clock_kinds(RING, tight) == ("clock-stall",)
    assert tolerated_clock_kinds(f"{RING}/pong-peer-clock", FIXED) == ("clock-drift",
                                                                       "clock-stall")
    for protocol in PROTOCOLS:  # timers that only pace: every clock fault
        if protocol != RING:
            assert tolerated_clock_kinds(protocol, {}) == CLOCK_KINDS, protocol


def test_every_protocol_has_a_clock_case_per_timing_drawing_crashes_too() -> None:
    for protocol in PROTOCOLS:
        cases = clock_cases(protocol)
        assert len(cases) == len(timing_overlays(protocol, {})), protocol
        for c in cases:
            assert c.name.endswith(CLOCK_SUFFIX) and c.kinds[0] == "crash"
            assert c.kinds[1:] == tolerated_clock_kinds(protocol, c.params)
            assert c.topology.stem == ("replica-chain" if protocol == RING else "wordcount")
    ring = clock_cases(RING)
    assert [dict(c.timings) for c in ring] == [{}, short_timings(RING, ring[0].params)]


@pytest.mark.parametrize("case", [c for p in PROTOCOLS for c in clock_cases(p)],
                         ids=lambda c: c.name)
def test_the_clock_cases_hold_with_no_false_suspicion(case: GuaranteeCase) -> None:
    kit = Kit()
    result = kit.run_case(case, N)
    assert result.failures_injected > 0 and result.passed, (result.violations,
                                                            result.reproduce())
    assert result.to_json()["faults"] == list(case.kinds)
    sim = kit._sim(case.protocol, case.params, case.topology, case.kinds)
    struck = [e for seed in range(1, N + 1) for e in sim.run_one(seed).result.events
              if e.kind == "fault-injected" and e.data["type"].startswith("clock-")]
    assert struck  # the clock faults did strike


def test_a_forward_step_past_the_bound_is_a_false_suspicion_and_replays() -> None:
    # A skew drawn mid-run steps the pinger's clock forward by more than the short
    # timings' 6 ms timeout while a ping is out (seed 14): the live successor is taken
    # over. Its output stays exactly-once; only the suspicion check sees it.
    topology = topology_named("replica-chain")
    kinds = ("crash", "clock-skew", "clock-drift", "clock-stall")
    sim = Simulator(load_topology(topology), get_protocol(RING), {**FIXED, **SHORT},
                    kinds=kinds)
    verdict = sim.run_one(14).verdict
    assert all(s.holds(verdict.guarantee) for s in verdict.sinks)
    assert not verdict.passed and verdict.suspicions == {"live-suspected": 1,
                                                         "live-taken-over": 1}
    # and ``ftctl sim`` replays it
    params = [a for k, v in {**FIXED, **SHORT}.items() for a in ("--param", f"{k}={v}")]
    res = CliRunner().invoke(app, ["sim", str(topology), "-p", RING, *params, "--faults",
                                   ",".join(kinds), "--seed", "14"])
    assert res.exit_code == 1 and "live-suspected" in res.output, res.output


def test_the_clock_mutant_is_caught_by_a_false_suspicion_at_short_timings() -> None:
    protocol, mutant = get_mutant(f"{RING}/pong-peer-clock")
    # it draws what the protocol tolerates at each timing
    for timing in timing_overlays(RING, mutant.params):
        tolerated = tolerated_clock_kinds(RING, {**mutant.params, **timing})
        assert set(mutant.kinds) <= {"crash", *tolerated}
    result = Kit().run_mutant(protocol, mutant, 2, only=[topology_named("replica-chain")])
    assert result.caught and result.timings == SHORT
    assert result.kinds == mutant.kinds and "live-suspected" in result.violations
    assert "--faults crash,clock-drift,clock-stall" in (result.reproduce() or "")
