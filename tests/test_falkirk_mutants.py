"""Every planted bug in falkirk's pure layer breaks some worked example (spec §7, 1-10)."""

from __future__ import annotations

import pytest

from protocols.falkirk.mutants import CORRECT, PLANTED, PlannedBug
from tests.falkirk_cases import all_problems


def test_the_correct_rules_pass_everything() -> None:
    assert all_problems(CORRECT) == []


@pytest.mark.parametrize("bug", PLANTED, ids=lambda b: b.name)
def test_planted_bug_is_caught(bug: PlannedBug) -> None:
    try:
        problems = all_problems(bug)
    except AssertionError as exc:  # the solver's own assertion tripped: caught as well
        problems = [f"assertion: {exc}"]
    assert problems, f"{bug.name} survived the worked examples"


def test_at_least_ten_planted_bugs_with_distinct_names() -> None:
    names = [b.name for b in PLANTED]
    assert len(names) >= 10 and len(set(names)) == len(names)
