"""replica-ring, pure: ring facts, Table 1, and the paper's schedules (exact counts).

The checks are plain functions taking the planted mutants, so
tests/test_replica_ring_mutants.py can run them against each planted bug.
"""

from __future__ import annotations

from collections.abc import Iterable

import pytest

from protocols.contract.spec import Guarantee
from protocols.replica_ring.accounting import (
    PAPER_TABLE1,
    per_tuple,
    table1_messages,
    totals,
)
from protocols.replica_ring.model import SEMANTICS, ChainModel, Crash, Schedule, play
from protocols.replica_ring.params import ReplicaRingParams
from protocols.replica_ring.schedules import SCHEDULES

AMO, ALO, EO = SEMANTICS
Z = (0, 0)
# (lost, duplicated) at the sink for at-most-once / at-least-once / exactly-once (spec §6)
EXPECTED: dict[str, dict[str, tuple[tuple[int, int], ...]]] = {
    "S0": {"faithful": ((1, 0), Z, Z), "fixed": ((1, 0), Z, Z)},
    "S1": {"faithful": (Z, (0, 1), (0, 1)), "fixed": (Z, (0, 1), Z)},
    "S1a": {"faithful": (Z, (0, 1), Z), "fixed": (Z, (0, 1), Z)},
    "S2": {"faithful": ((1, 0), (1, 0), (1, 0)), "fixed": ((1, 0), Z, Z)},
    "S3": {"faithful": (Z, (1, 0), (1, 0)), "fixed": (Z, Z, Z)},
    "S4": {"faithful": ((1, 0), (1, 0), (1, 0)), "fixed": ((1, 0), (0, 1), Z)},
    "S4b": {"faithful": ((1, 0), (1, 0), (1, 0)), "fixed": ((1, 0), (0, 1), Z)},
    "S5": {"faithful": ((1, 0), (1, 0), (1, 0)), "fixed": ((1, 0), Z, Z)},
    "S6": {"faithful": ((4, 0), (4, 0), (4, 0)), "fixed": (Z, Z, Z)},
    "S8": {"faithful": ((1, 0), Z, Z), "fixed": ((1, 0), Z, Z)},
    "S9": {"faithful": (Z, (0, 1), (0, 1)), "fixed": ((1, 0), Z, Z)},
}
# each flaw's fix, left out, brings back its schedule's faithful outcome; S9's duplicate
# reaches the sink, so under exactly-once the idempotent sink (F3) hides it unless F3 is out
FLAW_SCHEDULES = {"F1": ("S2", "S3"), "F3": ("S1",), "F4": ("S5",), "F5": ("S4b",),
                  "F6": ("S6",), "F3,F8": ("S9",)}


def outcomes(sid: str, variant: str, mutants: Iterable[str] = (), **params: object):
    return tuple(play(SCHEDULES[sid], g, variant, mutants=mutants, **params).pair
                 for g in SEMANTICS)


def check_schedules(mutants: Iterable[str] = ()) -> None:
    for sid, want in EXPECTED.items():
        for variant, exp in want.items():
            got = outcomes(sid, variant, mutants)
            assert got == exp, (sid, variant, got, exp)


def check_table1(mutants: Iterable[str] = ()) -> None:
    for r, paper in PAPER_TABLE1.items():
        for g in SEMANTICS:
            out = play(Schedule(tuple(range(100 * r))), g, "fixed", size=r, mutants=mutants)
            assert out.pair == Z, (r, g, out.pair)
            counted = {k: out.messages.get(k, 0) for k in totals(r)}
            assert counted == totals(r, semantics=g), (r, g, out.messages)
        assert totals(r)["record"] == paper == table1_messages(r)
        faithful = play(Schedule(tuple(range(100 * r))), EO, "faithful", size=r,
                        mutants=mutants)
        assert faithful.pair == Z and faithful.messages["record"] == paper


def _model(r: int, mutants: Iterable[str] = ()) -> ChainModel:
    return ChainModel(r, ReplicaRingParams(), mutants)


def check_ring(mutants: Iterable[str] = ()) -> None:
    m = _model(3, mutants)
    m.run(Schedule((), pre=(Crash("B", 1),)))
    b2 = m.units["B"][2]
    assert m.route["B"][1] is b2 and b2.ring.represents == [2, 1], b2.ring.represents
    assert m.pings(b2) == [0]  # B[2] pings slot 0 only
    assert m.pings(m.units["B"][0]) == [1]  # B[0] keeps pinging slot 1, now hosted by B[2]
    m.reinstate("B", 1)
    assert b2.ring.represents == [2] and m.route["B"][1] is m.units["B"][1]
    m2 = _model(2, mutants)
    m2.run(Schedule((), pre=(Crash("B", 0),)))
    survivor = m2.units["B"][1]
    assert survivor.ring.represents == [1, 0] and m2.pings(survivor) == []
    m4 = _model(4, mutants)
    assert [m4.pings(u) for u in m4.units["A"]] == [[1], [2], [3], [0]]


def check_all(mutants: Iterable[str] = ()) -> None:
    check_ring(mutants)
    check_table1(mutants)
    check_schedules(mutants)


def test_ring_facts():
    check_ring()


def test_table1_formula_two_vs_four_replicas():
    assert table1_messages(2) == 400 and table1_messages(4) == 2400
    assert table1_messages(4) / table1_messages(2) == 6
    assert table1_messages(1) == 0 and table1_messages(3) == 1200
    # record + purge with N = 50 is the same figure
    for r in (2, 4):
        t = totals(r, n=50)
        assert t["record"] + t["purge"] == PAPER_TABLE1[r]
        assert sum(totals(r).values()) == 2 * 100 * r * (2 * r + 1)
    assert per_tuple(4, semantics=Guarantee.AT_MOST_ONCE) == {
        "data": 2, "ack": 0, "delete": 0, "record": 0, "purge": 0}


def test_no_fixed_tuple_count_gives_the_paper_ratio():
    # n(aR + b) with n independent of R: (4a+b)/(2a+b) <= 2, never the paper's 6
    for a in range(12):
        for b in range(12):
            if a or b:
                assert (4 * a + b) * PAPER_TABLE1[2] != (2 * a + b) * PAPER_TABLE1[4]


def test_table1_counted_in_the_model_equals_the_formula():
    check_table1()


@pytest.mark.parametrize("sid", sorted(EXPECTED))
def test_schedule_outcomes(sid):
    for variant, exp in EXPECTED[sid].items():
        assert outcomes(sid, variant) == exp, variant


@pytest.mark.parametrize("flaw", sorted(FLAW_SCHEDULES))
def test_each_fix_left_out_brings_back_its_flaw(flaw):
    for sid in FLAW_SCHEDULES[flaw]:
        assert outcomes(sid, "fixed", without=flaw) == EXPECTED[sid]["faithful"], sid
        assert EXPECTED[sid]["faithful"] != EXPECTED[sid]["fixed"]


def test_guarantees_hold_in_the_fixed_variant_inside_the_model():
    for sid, want in EXPECTED.items():
        if sid == "S4":  # a replica and its origin together: outside the model (§5.3)
            continue
        _, alo, eo = want["fixed"]
        assert alo[0] == 0 and eo == Z, sid


def test_faithful_violations_are_the_documented_flaws():
    broken = {sid for sid, want in EXPECTED.items()
              if want["faithful"][1][0] or want["faithful"][2] != Z}
    assert broken == {"S1", "S2", "S3", "S4", "S4b", "S5", "S6", "S9"}


def test_without_fence_alone_duplicates_only_where_duplicates_are_allowed():
    # S9 without F8: the suspect and the taker both send; the sink drops the copy by uid
    assert outcomes("S9", "fixed", without="F8") == (Z, (0, 1), Z)
