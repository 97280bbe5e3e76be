"""The unit clock model (ftctl/kernel/clocks.py): each fault's reading, the timer inverse
``when``, and properties over random fault sequences."""

from __future__ import annotations

import math
from itertools import pairwise

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ftctl.kernel.clocks import (
    ClockFault,
    Drift,
    Jump,
    Skew,
    Stall,
    UnitClock,
    fault_from_dict,
    fault_to_dict,
)

APPROX = 1e-9


def test_no_fault_reads_true_time() -> None:
    c = UnitClock()
    assert [c.read(t) for t in (0.0, 1.5, 1e6)] == [0.0, 1.5, 1e6]
    assert c.when(3.0, 1.0) == 3.0
    assert c.when(0.5, 1.0) == 1.0  # already past: due at once


def test_skew_is_an_offset_from_true_time_from_its_instant() -> None:
    c = UnitClock().apply(Skew(-2.0), at=1.0)
    assert c.read(0.5) == 0.5
    assert c.read(1.0) == pytest.approx(-1.0)
    assert c.read(4.0) == pytest.approx(2.0)
    # a second skew replaces the first (it is an offset, not a step)
    c2 = c.apply(Skew(0.5), at=5.0)
    assert c2.read(6.0) == pytest.approx(6.5)
    assert c2.apply(Skew(0.0), at=7.0).read(8.0) == pytest.approx(8.0)


def test_drift_scales_elapsed_time_from_the_reading_it_had() -> None:
    c = UnitClock().apply(Jump(1.0), at=1.0).apply(Drift(1.5), at=2.0)
    assert c.read(2.0) == pytest.approx(3.0)
    assert c.read(4.0) == pytest.approx(6.0)
    assert c.apply(Drift(1.0), at=4.0).read(5.0) == pytest.approx(7.0)
    with pytest.raises(ValueError, match="positive"):
        Drift(0.0)


def test_jump_steps_once_forward_or_back() -> None:
    c = UnitClock().apply(Jump(-3.0), at=2.0)
    assert c.read(1.999) == pytest.approx(1.999)
    assert c.read(2.0) == pytest.approx(-1.0)
    assert c.read(10.0) == pytest.approx(7.0)


def test_stall_stops_time_then_runs_on_behind_or_catches_up() -> None:
    behind = UnitClock().apply(Stall(2.0), at=1.0)
    assert [behind.read(t) for t in (1.0, 2.0, 2.999)] == pytest.approx([1.0, 1.0, 1.0])
    assert behind.read(5.0) == pytest.approx(3.0)
    caught = UnitClock().apply(Stall(2.0, catch_up=True), at=1.0)
    assert caught.read(2.0) == pytest.approx(1.0)
    assert caught.read(3.0) == pytest.approx(3.0)
    # under drift, a stall holds back what the drifted clock would have run
    drifted = UnitClock().apply(Drift(2.0), at=0.0).apply(Stall(1.0, catch_up=True), at=1.0)
    assert drifted.read(1.5) == pytest.approx(2.0)
    assert drifted.read(2.0) == pytest.approx(4.0)
    # a drift set during a stall waits for its end
    assert behind.apply(Drift(3.0), at=2.0).read(4.0) == pytest.approx(1.0 + 3.0)


def test_when_is_the_timer_inverse_under_each_fault() -> None:
    # a timer for local 2.0 on a clock stalled over [1, 3): due when the stall ends + 1
    c = UnitClock().apply(Stall(2.0), at=1.0)
    assert c.when(2.0, 0.5) == pytest.approx(4.0)
    # a forward jump past the due reading makes it due at the jump
    assert UnitClock().apply(Jump(5.0), at=1.0).when(3.0, 0.0) == pytest.approx(1.0)
    # a jump back delays it by the jump
    assert UnitClock().apply(Jump(-2.0), at=1.0).when(3.0, 0.0) == pytest.approx(5.0)
    assert UnitClock().apply(Drift(2.0), at=0.0).when(3.0, 0.0) == pytest.approx(1.5)
    # an endless stall is impossible to build: stalls end
    with pytest.raises(ValueError, match="positive"):
        Stall(math.inf)


@pytest.mark.parametrize("f", [Skew(-1.5), Drift(1.05), Jump(2.0), Stall(0.3, True),
                               Stall(0.2)])
def test_fault_round_trips_as_plain_data(f: ClockFault) -> None:
    assert fault_from_dict(fault_to_dict(f)) == f


def test_bad_fault_data_names_what_is_wrong() -> None:
    with pytest.raises(ValueError, match="unknown clock fault 'warp'"):
        fault_from_dict({"clock": "warp"})
    with pytest.raises(ValueError, match="needs 'rate'"):
        fault_from_dict({"clock": "drift"})


# ---------------------------------------------------------------- properties

times = st.floats(0.0, 100.0, allow_nan=False)
forward = st.one_of(
    st.builds(Drift, st.floats(0.01, 10.0)),
    st.builds(Stall, st.floats(0.01, 20.0), st.booleans()),
    st.builds(Jump, st.floats(0.0, 20.0)),
)
anything = st.one_of(forward, st.builds(Jump, st.floats(-20.0, 20.0)),
                     st.builds(Skew, st.floats(-20.0, 20.0)))


def _build(faults: list[tuple[float, ClockFault]]) -> UnitClock:
    c = UnitClock()
    for at, f in sorted(faults, key=lambda x: x[0]):
        c = c.apply(f, at)
    return c


def _samples(faults: list[tuple[float, ClockFault]]) -> list[float]:
    # each fault's instant, just before and after it, and a grid
    pts = {t / 4 for t in range(0, 520)}
    for at, _ in faults:
        pts |= {at, max(0.0, at - 1e-6), at + 1e-6}
    return sorted(pts)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(times, forward), max_size=6))
def test_time_never_goes_back_without_a_step_back(faults: list[tuple[float, ClockFault]]
                                                   ) -> None:
    c = _build(faults)
    readings = [c.read(t) for t in _samples(faults)]
    assert all(b >= a - APPROX * max(1.0, abs(a)) for a, b in pairwise(readings))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(times, anything), max_size=6))
def test_time_goes_back_only_at_a_jump_back_or_a_skew(faults: list[tuple[float, ClockFault]]
                                                       ) -> None:
    c = _build(faults)
    pts = _samples(faults)
    backs = [at for at, f in faults if isinstance(f, Skew | Jump)
             and not (isinstance(f, Jump) and f.by >= 0)]
    for t1, t2 in pairwise(pts):
        if c.read(t2) < c.read(t1) - 1e-6:
            assert any(t1 < at <= t2 for at in backs), (t1, t2)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(times, anything), max_size=6), times, st.floats(0.0, 50.0))
# reached exactly as a jump back starts: the jump's own instant reads 0, not 1
@example(faults=[(1.0, Jump(-1.0))], after=0.0, ahead=1.0)
def test_when_is_the_first_instant_the_reading_is_reached(
        faults: list[tuple[float, ClockFault]], after: float, ahead: float) -> None:
    c = _build(faults)
    target = c.read(after) + ahead
    t = c.when(target, after)
    assert t >= after
    assert c.read(t) >= target
    # no earlier instant from ``after`` on reads the target (grid and just before)
    for k in range(20):
        s = after + (t - after) * k / 20
        if s < t:
            assert c.read(s) < target + 1e-6
