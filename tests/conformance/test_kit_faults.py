"""The conformance kit's all-faults cases: each guarantee case again, its schedules drawing
every fault kind (pause, partition, delay, slow, node loss, the store's, besides crashes).
A separate case set, so the crash cases and the mutant pins of test_kit.py keep their
seeds."""

from __future__ import annotations

import os
from dataclasses import replace

import pytest

from ftctl.conformance.cases import (
    ALL_FAULTS_SUFFIX,
    GuaranteeCase,
    all_faults_cases,
    guarantee_cases,
    phase_cases,
)
from ftctl.conformance.clocks import clock_cases
from ftctl.conformance.kit import Kit
from ftctl.sim.faults import ALL_KINDS, CRASH_ONLY
from protocols.registry import PROTOCOLS

pytestmark = pytest.mark.sim

N = int(os.environ.get("FTCTL_KIT_N", "2"))

CASES = [c for p in PROTOCOLS for c in all_faults_cases(p)]


KIT = Kit()  # shares simulators (and golden runs) across the cases of one topology


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_declared_guarantee_holds_under_every_fault_kind(case: GuaranteeCase) -> None:
    result = KIT.run_case(case, N)
    assert (result.schedules, result.passed) == (N, True), (result.violations,
                                                           result.reproduce())
    assert result.failures_injected > 0  # faults of any kind that struck


def test_the_all_faults_cases_mirror_the_crash_cases() -> None:
    for p in PROTOCOLS:
        crash, every = guarantee_cases(p), all_faults_cases(p)
        assert [c.name + ALL_FAULTS_SUFFIX for c in crash] == [c.name for c in every]
        assert all(c.kinds == CRASH_ONLY for c in crash)
        assert all(c.kinds == ALL_KINDS for c in every)
        # as many schedules as the crash cases: at a third, seeds 1-10 of -n 30 missed a
        # replica-ring origin answering "not found" while it regenerated a tuple
        assert [c.schedules_for(30) for c in every] == [30] * len(every)
        assert [c.schedules_for(2) for c in every] == [2] * len(every)


def test_a_broken_all_faults_case_replays_with_its_kinds() -> None:
    held = next(c for c in all_faults_cases("none") if c.topology.stem == "replica-chain")
    case = replace(held, protocol="none/source-from-start")  # a planted bug breaks it
    result = Kit().run_case(case, 12)
    assert not result.passed
    assert result.reproduce() == (
        f"ftctl sim topologies/replica-chain.yaml -p none/source-from-start "
        f"--faults {','.join(ALL_KINDS)} --seed {result.failing_seeds[0]}")
    assert result.to_json()["faults"] == list(ALL_KINDS)


def test_the_kit_runs_as_many_schedules_with_every_kind() -> None:
    kit = Kit()
    report = kit.run(["lineage"], 2, mutants=False)
    names = [c.case.name for c in report.cases]
    crash = [c.name for c in guarantee_cases("lineage")]
    # lineage has no timers and plans on no capacity: no correlated cases; then one case
    # per phase, and its clock case (ftctl/conformance/clocks.py)
    phases = [c.name for c in phase_cases("lineage")]
    clock = [c.name for c in clock_cases("lineage")]
    assert len(phases) == 3 and clock == ["wordcount-lineage+clock"]
    assert names == crash + [n + ALL_FAULTS_SUFFIX for n in crash] + phases + clock
    assert [c.schedules for c in report.cases] == [2] * (len(crash) * 2 + len(phases) + 1)
    assert kit.planned_runs(["lineage"], 2, mutants=False) == 4 * len(crash) + 2 * 3 + 2
