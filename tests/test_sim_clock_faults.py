"""Clock faults on the simulation host (ftctl/sim/clock_faults.py): a unit's events and
timers go by its own clock, and replica-ring's ping detector keeps the bound docs/chaos.md
states: no suspicion of a live replica within it, a takeover of a live replica past it,
exactly-once either way."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from itertools import pairwise
from typing import Any

import pytest

from ftctl.kernel.clocks import ClockFault, Drift, Jump, Skew, Stall
from ftctl.kernel.history import HistoryEvent
from ftctl.runtime.graph import ExecutionGraph
from ftctl.sim import faults as sf
from ftctl.sim.clock_faults import apply_clock_fault
from ftctl.sim.faults import NET_DELAY
from ftctl.sim.golden import golden_output
from ftctl.sim.host import SimHost, SimResult
from ftctl.sim.runner import sim_params
from ftctl.verify.checker import verify
from protocols.contract.events import TimerFired
from protocols.contract.spec import Guarantee
from protocols.registry import PROTOCOLS
from protocols.replica_ring.messages import Ping
from protocols.replica_ring.mutants import CLOCK_MUTANTS
from protocols.replica_ring.unit import PING
from tests.conftest import load
from tests.replica_ring_topologies import replica_chain

pytestmark = pytest.mark.sim

RING = {"semantics": "exactly-once", "variant": "fixed"}
PINGER, PINGED = "split[0]", "split[1]"  # split[0] pings its ring successor
RTT_MAX = 2 * NET_DELAY * 2.2  # the longest ping round trip the simulated network draws
TIMEOUT = 0.15  # replica-ring's simulated ping_timeout (a multiple of ping_every)


def _host(protocol: str, topology: Any, given: dict[str, Any], seed: int = 1,
          instance: type | None = None) -> SimHost:
    graph = ExecutionGraph(topology)
    spec = PROTOCOLS[protocol]
    if instance is not None:  # a mutant's instance logic
        spec = replace(spec, instance=instance)
    return SimHost(graph, spec, sim_params(graph, spec, given), seed)


def _ring(seed: int = 1, instance: type | None = None, records: int = 600) -> SimHost:
    return _host("replica-ring", replica_chain(records), RING, seed, instance)


def _clock_at(host: SimHost, t: float, unit: str, fault: ClockFault) -> None:
    host.at(t, lambda: apply_clock_fault(host, unit, fault))


def _exactly_once(host: SimHost, result: SimResult) -> bool:
    topo = host.graph.topology
    v = verify(topo.sink_modes(), golden_output(host.graph), result.outputs,
               Guarantee.EXACTLY_ONCE, complete=result.complete, stopped=result.stopped)
    return v.passed


def _kinds(result: SimResult, kind: str) -> list[HistoryEvent]:
    return [e for e in result.events if e.kind == kind]


def _spy(host: SimHost, unit: str, seen: list[tuple[float, float, Any]]) -> Callable[[], None]:
    """Record (host time, the unit's now, event) of every event ``unit``'s logic handles."""
    def wrap() -> None:
        logic = host.live[unit].logic
        inner = logic.handle

        def handle(ev: Any, now: float) -> Any:
            seen.append((host.now, now, ev))
            return inner(ev, now)
        logic.handle = handle  # type: ignore[method-assign]
    return wrap


def test_a_skewed_unit_sees_its_clock_and_the_others_keep_the_hosts() -> None:
    host = _host("checkpoint", load("windowed"), {})
    src, other = "tags[0]", "win[0]"
    assert src in host.graph.instances and other in host.graph.instances
    mine: list[tuple[float, float, Any]] = []
    theirs: list[tuple[float, float, Any]] = []
    host.at(0.005, _spy(host, src, mine))
    host.at(0.005, _spy(host, other, theirs))
    _clock_at(host, 0.01, src, Skew(7.0))
    result = host.run()
    after = [(t, now, ev) for t, now, ev in mine if t >= 0.01]
    assert after and all(now == pytest.approx(t + 7.0) for t, now, _ in after)
    # the times events carry are the unit's too
    assert all(ev.now == now for _, now, ev in after if hasattr(ev, "now"))
    assert theirs and all(now == t for t, now, _ in theirs)
    (inj,) = _kinds(result, "fault-injected")
    assert inj.data["type"] == "clock-skew" and inj.data["target"] == src
    assert _exactly_once(host, result)


def test_pending_timers_follow_the_clock_a_stall_holds_them_a_jump_fires_them() -> None:
    stalled, jumped = _ring(), _ring()
    seen_s: list[tuple[float, float, Any]] = []
    seen_j: list[tuple[float, float, Any]] = []
    for host, seen in ((stalled, seen_s), (jumped, seen_j)):
        host.at(0.005, _spy(host, PINGER, seen))
    _clock_at(stalled, 0.02, PINGER, Stall(0.2))
    _clock_at(jumped, 0.02, PINGER, Jump(1.0))
    stalled.run()
    jumped.run()

    def pings(seen: list[tuple[float, float, Any]]) -> list[float]:
        return [t for t, _, ev in seen if isinstance(ev, TimerFired) and ev.key == PING]
    assert pings(seen_s) and not [t for t in pings(seen_s) if 0.02 < t < 0.22]
    assert [t for t in pings(seen_s) if t >= 0.22]  # ticking again after the stall
    assert 0.02 in pings(seen_j)  # the pending tick came due at the jump


def test_a_fault_on_a_unit_not_running_is_skipped_and_an_unknown_one_refused() -> None:
    host = _ring()
    assert not apply_clock_fault(host, PINGER, Skew(1.0))  # nothing started yet
    assert _kinds_now(host, "fault-skipped")[0].data["type"] == "clock-skew"
    with pytest.raises(ValueError, match="no instance 'nope'"):
        apply_clock_fault(host, "nope", Skew(1.0))


def _kinds_now(host: SimHost, kind: str) -> list[HistoryEvent]:
    return [e for e in host.events if e.kind == kind]


# ------------------------------------------------------------ replica-ring's bound

WITHIN = [
    Skew(-100.0), Skew(100.0),  # any offset: the detector compares readings of one clock
    Drift(0.05), Drift(0.8 * TIMEOUT / RTT_MAX),  # rate x round trip below the timeout
    Jump(-5.0),  # back: pings pause for the jump, nothing is suspected
    Jump(TIMEOUT - 2 * RTT_MAX),  # forward, short of the timeout less a round trip
    Stall(0.3), Stall(0.3, catch_up=True),  # no ticks while stalled; pongs still come
]


@pytest.mark.parametrize("fault", WITHIN, ids=repr)
def test_within_the_bound_no_live_replica_is_suspected(fault: ClockFault) -> None:
    for seed in (1, 2):
        host = _ring(seed)
        _clock_at(host, 0.011, PINGER, fault)
        _clock_at(host, 0.011, PINGED, fault)  # the pinged side's clock plays no part
        result = host.run()
        assert not _kinds(result, "failure-suspected"), fault
        assert _exactly_once(host, result)


def _past_the_drift_bound(seed: int) -> tuple[SimHost, SimResult]:
    host = _ring(seed)
    _clock_at(host, 0.011, PINGER, Drift(2 * TIMEOUT / RTT_MAX))
    return host, host.run()


def test_past_the_drift_bound_a_live_replica_is_taken_over_exactly_once() -> None:
    host, result = _past_the_drift_bound(2)
    suspected = _kinds(result, "failure-suspected")
    assert suspected and {(e.instance, e.data["by"]) for e in suspected} == {(PINGED, PINGER)}
    assert [e for e in _kinds(result, "route-changed")]  # its slot moved to the taker
    assert _exactly_once(host, result)


def test_a_takeover_of_a_live_replica_loses_nothing() -> None:
    # seed 8 lost records while the fenced replica's record syncs reaching its taker
    # after the takeover were never re-fetched (docs/protocols.md, replica-ring)
    host, result = _past_the_drift_bound(8)
    assert _kinds(result, "failure-suspected")
    assert _exactly_once(host, result)


def test_a_forward_jump_of_the_timeout_during_a_ping_suspects_its_target() -> None:
    host = _ring(2)
    sent = host.send_peer

    def send_peer(sender: str, to: str, msg: Any, unit: str | None = None) -> None:
        sent(sender, to, msg, unit)
        if isinstance(msg, Ping) and sender == PINGER and host.now > 0.03 and not jumped:
            jumped.append(host.now)  # the ping is outstanding: jump now
            _clock_at(host, host.now, PINGER, Jump(TIMEOUT))
    jumped: list[float] = []
    host.send_peer = send_peer  # type: ignore[method-assign]
    result = host.run()
    suspected = _kinds(result, "failure-suspected")
    assert jumped and suspected and suspected[0].instance == PINGED
    assert suspected[0].t == pytest.approx(jumped[0], abs=0.001)
    assert _exactly_once(host, result)


def test_a_stalled_pinger_detects_a_real_crash_after_its_stall() -> None:
    def detected_after(stall: float | None) -> float:
        host = _ring()
        if stall is not None:
            _clock_at(host, 0.011, PINGER, Stall(stall))
        host.at(0.012, lambda: host.inject(sf.Strike(0, 0, (PINGED,))))
        result = host.run()
        assert _exactly_once(host, result)
        return min(e.t for e in _kinds(result, "failure-suspected")) - 0.012
    prompt, late = detected_after(None), detected_after(0.4)
    assert prompt <= TIMEOUT + 0.05 + 0.01  # timeout + one ping period + network
    assert late >= 0.4  # no tick while the clock stood still


# ------------------------------------------------------------ timers that only pace


def test_a_faster_source_clock_takes_more_checkpoints_and_stays_exactly_once() -> None:
    def snapshots(fault: ClockFault | None, crash: bool = False) -> int:
        host = _host("checkpoint", load("windowed"), {})
        if fault is not None:
            _clock_at(host, 0.006, "tags[0]", fault)
        if crash:  # a rollback restarts the source: its new incarnation has a true clock
            host.at(0.02, lambda: host.inject(sf.Strike(0, 0, ("win[0]",))))
        result = host.run()
        assert _exactly_once(host, result)
        assert not _kinds(result, "fault-skipped")
        return result.stats.persists
    base = snapshots(None)
    assert snapshots(Drift(4.0)) > base
    assert snapshots(Jump(-10.0)) < base  # no token until the clock is back where it was
    assert snapshots(Stall(0.05)) < base
    snapshots(Jump(-10.0), crash=True)


# ------------------------------------------------------------ clock mutants


@pytest.mark.parametrize("mutant", CLOCK_MUTANTS, ids=lambda m: m.name)
def test_a_skew_the_protocol_tolerates_catches_each_clock_mutant(mutant: Any) -> None:
    assert mutant.params == RING
    for instance in (None, mutant.instance):
        host = _ring(2, instance, records=3000)  # long enough for several pings
        _clock_at(host, 0.011, PINGED, Skew(-1.0))  # behind by far more than the timeout
        result = host.run()
        suspected = {(e.instance, e.data["by"]) for e in _kinds(result, "failure-suspected")}
        if instance is None:
            assert not suspected and _exactly_once(host, result)
        else:
            assert (PINGED, PINGER) in suspected  # a live replica, taken over


EXACTLY_ONCE = ("checkpoint", "causal", "lineage", "falkirk", "progressive")
MIXED = (Drift(3.0), Jump(-5.0), Stall(0.05), Skew(2.0), Jump(1.0), Drift(0.3))


@pytest.mark.parametrize("protocol", EXACTLY_ONCE)
def test_clock_faults_on_every_unit_change_no_exactly_once_output(protocol: str) -> None:
    host = _host(protocol, load("windowed"), {})
    units = sorted(host.graph.instances)
    for k, unit in enumerate(units):  # each unit its own fault, before the crash
        _clock_at(host, 0.006, unit, MIXED[k % len(MIXED)])
    host.at(0.02, lambda: host.inject(sf.Strike(0, 0, ("win[0]",))))
    result = host.run()
    injected = [e for e in _kinds(result, "fault-injected") if e.data["type"].startswith("clock")]
    assert len(injected) == len(units)  # every unit was running and struck
    assert [e for e in _kinds(result, "instance-started") if e.instance == "win[0]"]
    assert not _kinds(result, "failure-suspected")
    assert _exactly_once(host, result)


@pytest.mark.parametrize("fault", [Drift(0.01), Stall(1.0), Jump(-5.0), Drift(50.0)], ids=repr)
def test_the_hosts_hang_detection_keeps_the_hosts_time_under_a_clock_fault(
        fault: ClockFault) -> None:
    def detected(pause: float) -> list[HistoryEvent]:
        host = _host("checkpoint", load("windowed"), {})
        _clock_at(host, 0.006, "win[0]", fault)
        host.at(0.01, lambda: host.inject(sf.Pause(0, pause, "win[0]")))
        result = host.run()
        assert _exactly_once(host, result)
        return [e for e in _kinds(result, "failure-detected")
                if "win[0]" in e.data["instances"]]
    assert not detected(0.5 * sf.HANG_TIMEOUT)  # a short pause is waited out
    (hung,) = detected(3 * sf.HANG_TIMEOUT)
    assert hung.t == pytest.approx(0.01 + sf.HANG_TIMEOUT, abs=0.006)  # after the host's timeout


def test_a_drifting_units_timers_keep_their_period_on_its_own_clock() -> None:
    host = _ring()
    seen: list[tuple[float, float, Any]] = []
    host.at(0.005, _spy(host, PINGER, seen))
    _clock_at(host, 0.011, PINGER, Drift(4.0))
    host.run()
    ticks = [(t, now) for t, now, ev in seen
             if isinstance(ev, TimerFired) and ev.key == PING and t > 0.011]
    assert len(ticks) >= 3
    every = 0.05  # replica-ring's simulated ping_every
    for (t1, n1), (t2, n2) in pairwise(ticks[1:]):  # the first was armed before
        assert n2 - n1 == pytest.approx(every)  # its clock's period
        assert t2 - t1 == pytest.approx(every / 4)  # a quarter of it on the host's
