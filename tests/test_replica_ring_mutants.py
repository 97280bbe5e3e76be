"""Every planted replica-ring bug fails one of the exact checks: those of the step model,
and those of the message-driven units on the small network."""

from __future__ import annotations

import inspect

import pytest

from protocols.replica_ring.mutants import (
    BUGS,
    CLOCK_MUTANTS,
    GUARANTEE_LEVEL,
    MODEL_ONLY,
    MUTANTS,
    UNITS_ONLY,
    names,
)
from tests import test_replica_ring_net as net
from tests.test_replica_ring_model import check_all


def test_at_least_ten_mutants_with_distinct_names():
    assert len(BUGS) >= 10 and len(set(names())) == len(BUGS)
    # the kit's: at least ten, each the protocol's classes with exactly that bug planted,
    # and the clock mutants (tests/test_sim_clock_faults.py)
    crash_level = [m for m in MUTANTS if m not in CLOCK_MUTANTS]
    assert len(crash_level) == len(GUARANTEE_LEVEL) >= 10
    assert len(MUTANTS) == len(crash_level) + len(CLOCK_MUTANTS)
    for m in crash_level:
        assert m.instance is not None and m.instance.mutants == {m.name}
        assert m.coordinator is not None and m.coordinator.mutants == {m.name}


def test_the_unmutated_protocol_passes():
    check_all()


@pytest.mark.parametrize("mutant", [m for m in names() if m not in UNITS_ONLY])
def test_mutant_is_caught(mutant):
    with pytest.raises(AssertionError):
        check_all({mutant})


def _net_checks() -> list:
    return [f for name, f in inspect.getmembers(net, inspect.isfunction)
            if name.startswith("test_") and not inspect.signature(f).parameters]


@pytest.mark.parametrize("mutant", [m for m in names() if m not in MODEL_ONLY])
def test_mutant_is_caught_by_the_units(mutant, monkeypatch):
    monkeypatch.setattr(net, "PLANTED", frozenset({mutant}))
    for check in _net_checks():
        try:
            check()
        except AssertionError:
            return  # caught
    pytest.fail(f"{mutant} survives every network check")


def test_unmutated_units_pass_every_network_check():
    for check in _net_checks():
        check()
