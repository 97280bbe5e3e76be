"""replica-ring keeps its guarantee over seeded fault schedules (fixed variant).

Each seed picks a replication factor, a unit, a message at which it fails (before or
after part of its handling), whether it dies or only stands still (false suspicion),
whether it is reinstated, and sometimes a second failure after the first takeover. The
units run on the deterministic network of tests/test_replica_ring_net.py.
"""

from __future__ import annotations

import random

import pytest

from protocols.contract.spec import Guarantee
from protocols.replica_ring.model import SEMANTICS
from protocols.replica_ring.params import ReplicaRingParams
from tests.test_replica_ring_net import At, Net

KINDS = ("Data", "Data", "RecordOk", "Ack", "Delete", "Purge", "RecordMsg")
SEEDS = 100


def schedule(seed: int) -> tuple[int, tuple[At, ...], tuple[tuple[float, str], ...], float | None]:
    rnd = random.Random(seed)
    r = rnd.choice((2, 3, 4))
    tuples = 8
    op = rnd.choice("AB")
    idx = rnd.randrange(r)
    unit = f"{op}[{idx}]"
    kind = rnd.choice(KINDS)
    # tuple u goes to A[u % r] and B[u % r]: pick one this unit handles, except for the
    # messages it gets about its colleagues' tuples
    uid = rnd.randrange(tuples) if kind in ("Purge", "RecordMsg") else (
        idx + r * rnd.randrange((tuples - idx + r - 1) // r))
    stand_still = rnd.random() < 0.25
    nth = rnd.choice((1, 2)) if kind == "RecordOk" else 1  # the 2nd completes a sync of 3
    hit = At(unit, kind, uid, nth=nth,
             keep=rnd.choice((None, 0, 1, 2)), freeze=rnd.choice((0.0, 0.3)) if not
             stand_still else 0.4, crash=not stand_still)
    kills: tuple[tuple[float, str], ...] = ()
    if rnd.random() < 0.5:  # a second, later failure in the other operator
        other = "B" if op == "A" else "A"
        kills = ((rnd.uniform(1.0, 3.0), f"{other}[{rnd.randrange(r)}]"),)
    reinstate = rnd.choice((None, 0.5))
    return r, (hit,), kills, reinstate


def violations(semantics: Guarantee, variant: str, seeds: range) -> list[tuple[int, int, int]]:
    out = []
    for seed in seeds:
        r, hits, kills, reinstate = schedule(seed)
        p = ReplicaRingParams(semantics=semantics, variant=variant, reinstate_after=reinstate)
        lost, dup = Net(r, p, hits).run(tuple(range(8)), gap=0.25, kills=kills)
        bad = dup > 0 if semantics is Guarantee.AT_MOST_ONCE else (
            lost > 0 or (semantics is Guarantee.EXACTLY_ONCE and dup > 0))
        if bad:
            out.append((seed, lost, dup))
    return out


@pytest.mark.parametrize("semantics", SEMANTICS)
def test_fixed_variant_keeps_its_guarantee(semantics):
    assert violations(semantics, "fixed", range(SEEDS)) == []


def test_the_same_schedules_catch_the_faithful_variant():
    # seed 0: B[0] dies after its output reached the sink, the taker replays it (F3);
    # 16, 27: a replica stands still, is suspected and sends anyway (F8); 41: B[0] dies
    # right after its ack, before any record (F1)
    assert violations(Guarantee.EXACTLY_ONCE, "faithful", range(42)) == [
        (0, 0, 1), (16, 0, 1), (27, 0, 1), (41, 1, 0)]
