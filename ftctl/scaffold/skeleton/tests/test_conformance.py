"""The conformance kit on this protocol: every bundled topology over seeded schedules must
hold exactly-once, and every mutant in ``mutants.py`` must be caught.

Run after ``pip install -e .``; ``FTCTL_KIT_N`` sets the schedules per case (default 10).
"""

from __future__ import annotations

import os

from ftctl.conformance.cases import BUNDLED_TOPOLOGIES
from ftctl.conformance.kit import Kit

NAME = "protocol-skeleton"
N = int(os.environ.get("FTCTL_KIT_N", "10"))


def test_every_guarantee_holds_and_every_mutant_is_caught() -> None:
    report = Kit(BUNDLED_TOPOLOGIES, first_seed=1).run([NAME], N, True)
    broken = [c.reproduce() for c in report.cases if not c.passed]
    survived = [m.qualified for m in report.mutants if not m.caught]
    assert not broken, broken
    assert not survived, survived
    assert len(report.mutants) >= 3
