"""Every planted bug of ``progressive`` (protocols/progressive/mutants.py, spec §7) turns
the check named for it red, and the same check passes on the protocol itself."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from protocols.progressive import mutants as m
from protocols.progressive.instance import ProgressiveInstance
from tests.test_progressive_coordinator import check_ready, check_u3
from tests.test_progressive_instance import (
    check_dedup,
    check_e6,
    check_sink,
    check_sink_restart,
    check_u6,
)
from tests.test_progressive_run import check_runs
from tests.test_progressive_schedule import WHOLE, check_examples


def planner_check(name: str) -> Callable[[], None]:
    cls = m.PLANNER_BUGS[name]
    return lambda: check_examples(lambda: cls(sizes=WHOLE))


def run_check(instance: type[ProgressiveInstance]) -> Callable[[], None]:
    # a few seeds of the end-to-end burst with a further failure during recovery
    return lambda: check_runs(True, range(3), {"instance": instance})


def phase_contract_check(coordinator: type[Any]) -> Callable[[], None]:
    """The kit's phase-triggered runs (a crash in recovering) keep the phase contract."""
    def check() -> None:
        from dataclasses import replace

        from ftctl.sim.runner import Simulator
        from protocols.progressive.spec import SPEC
        from tests.conftest import load

        sim = Simulator(load("wordcount"), replace(SPEC, coordinator=coordinator), {},
                        during="recovering")
        for seed in range(1, 3):
            verdict = sim.run_one(seed).verdict
            assert verdict.passed, verdict.totals()
    return check


CAUGHT_BY: dict[str, Callable[[], Any]] = {
    **{name: planner_check(name) for name in m.PLANNER_BUGS},
    "no-replan": lambda: check_u3(m.NoReplan),
    "release-all-at-end": lambda: check_u3(m.ReleaseAllAtEnd),
    "buffers-off-early": lambda: check_runs(True, range(8), {"coordinator": m.BuffersOffEarly}),
    "no-resend-from-starting": lambda: check_ready(m.NoResendFromStarting),
    "arrival-order": lambda: check_e6(m.ArrivalOrder),
    "dedup-ge": lambda: check_dedup(m.DedupGe),
    "no-gen-fence": lambda: check_dedup(m.NoGenFence),
    "no-adaptive-buffering": run_check(m.NoAdaptiveBuffering),
    "trim-on-persist": lambda: check_u6(m.TrimOnPersist),
    "sink-no-counts": lambda: check_sink(m.SinkNoCounts),
    "sink-skips-deltas": lambda: check_sink_restart(m.SinkSkipsDeltas),
    "recovering-left-open": phase_contract_check(m.RecoveringLeftOpen),
}


def test_every_shipped_mutant_has_a_check() -> None:
    assert {x.name for x in m.ALL_MUTANTS} == set(CAUGHT_BY)
    assert len(m.MUTANTS) >= 9  # the ones the conformance kit runs
    assert sorted(x.name for x in (*m.MUTANTS, *m.SCHEDULING_MUTANTS)) == \
        sorted(x.name for x in m.ALL_MUTANTS)


@pytest.mark.parametrize("name", sorted(CAUGHT_BY))
def test_mutant_is_caught(name: str) -> None:
    with pytest.raises(AssertionError):
        CAUGHT_BY[name]()


def test_the_checks_pass_unmutated() -> None:
    check_examples()
    check_u3()
    check_ready()
    phase_contract_check(m.ProgressiveCoordinator)()
    check_e6()
    check_dedup()
    check_u6()
    check_sink()
    check_runs(True, range(3))


def test_spec_lists_the_mutants_and_validates_params() -> None:
    from protocols.contract import ParamError, validate
    from protocols.progressive.spec import SPEC

    assert SPEC.mutants == m.MUTANTS and SPEC.guarantee_of(SPEC.default_params()) == \
        "exactly-once"
    for v in SPEC.variants:
        validate(SPEC.params, v.params, SPEC.name)
    with pytest.raises(ParamError, match="schedule"):
        validate(SPEC.params, {"schedule": "fastest"}, SPEC.name)
    with pytest.raises(ParamError, match="unknown parameter 'burst'"):
        validate(SPEC.params, {"burst": "1"}, SPEC.name)
