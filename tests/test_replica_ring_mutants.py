"""Every planted replica-ring bug fails one of the exact checks."""

from __future__ import annotations

import pytest

from protocols.replica_ring.mutants import MUTANTS, names
from tests.test_replica_ring_model import check_all


def test_at_least_ten_mutants_with_distinct_names():
    assert len(MUTANTS) >= 10 and len(set(names())) == len(MUTANTS)


def test_the_unmutated_protocol_passes():
    check_all()


@pytest.mark.parametrize("mutant", names())
def test_mutant_is_caught(mutant):
    with pytest.raises(AssertionError):
        check_all({mutant})
