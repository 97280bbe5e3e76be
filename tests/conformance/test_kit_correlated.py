"""The conformance kit's correlated cases: replica-ring's short-timing cases with an
instance and its ring neighbour lost together or in turn, progressive's cases with capacity
returning node by node. A separate case set, so the other cases keep their seeds."""

from __future__ import annotations

import os

import pytest

from ftctl.conformance.cases import GuaranteeCase, correlated_cases
from ftctl.conformance.kit import Kit
from protocols.registry import PROTOCOLS

pytestmark = pytest.mark.sim

N = int(os.environ.get("FTCTL_KIT_N", "2"))

# progressive's other variants run the same staged schedules in `ftctl conformance`; here
# only its default one, to keep the suite's time down
CASES = [c for p in PROTOCOLS for c in correlated_cases(p)
         if c.protocol != "progressive" or c.variant.name == "default"]

KIT = Kit()


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_declared_guarantee_holds_under_correlated_failures(case: GuaranteeCase) -> None:
    result = KIT.run_case(case, N)
    assert (result.schedules, result.passed) == (N, True), (result.violations,
                                                           result.reproduce())
    assert result.failures_injected > 0
