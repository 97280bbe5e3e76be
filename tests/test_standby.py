"""The default standby pool covers the largest failure domain on its surviving side."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from ftctl.cluster.labels import expand_labels
from ftctl.spark.standby import domains, standby_pool


def test_domains_are_each_worker_and_each_label_group() -> None:
    got = domains(expand_labels(["rack=a", "rack=a", "rack=b", "rack=b"], 4))
    assert got[:2] == [frozenset({0, 1}), frozenset({2, 3})]
    assert set(got[2:]) == {frozenset({w}) for w in range(4)}


def test_a_rack_of_four_workers_needs_more_than_a_single_worker() -> None:
    racks = expand_labels(["rack=a", "rack=a", "rack=b", "rack=b"], 4)
    # wordcount's 6 instances: a rack takes 3; 3 + 1 must survive on the other half.
    assert standby_pool(6, racks) == 8
    assert standby_pool(6, expand_labels(None, 4)) == 4  # one worker: 2 lost, 3 of 4 survive
    assert standby_pool(6, expand_labels(None, 1)) == 1


@given(st.integers(1, 40), st.integers(1, 8), st.integers(1, 4))
def test_spread_evenly_the_pool_leaves_lost_plus_one_on_every_surviving_side(
        n: int, w: int, racks: int) -> None:
    labels = expand_labels([f"rack={r}" for r in range(racks)], w)
    s = standby_pool(n, labels)
    for dom in domains(labels):
        d = len(dom)
        if d < w:
            # Spread over the workers, the pool's share outside the domain.
            assert s * (w - d) / w >= math.ceil(n * d / w) + 1
