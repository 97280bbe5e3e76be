"""The exactly-once checker on hand-made outputs."""

from __future__ import annotations

import random
from typing import Any

from ftctl.verify.checker import compare, record_counts, verify
from protocols.contract.spec import Guarantee

GOLDEN = [("a", 1), ("b", 1), ("a", 2), ("b", 2), ("a", 3)]


def test_identical_output_holds_exactly_once() -> None:
    for mode in ("multiset", "final-per-key", "ordered-per-key"):
        v = compare("out", mode, GOLDEN, list(GOLDEN))
        assert v.anomalies() == {}
        assert v.holds(Guarantee.EXACTLY_ONCE)


def test_multiset_counts_lost_duplicated_unexpected() -> None:
    out = [("a", 1), ("a", 1), ("b", 2), ("a", 2), ("a", 3), ("z", 9)]
    v = compare("out", "multiset", GOLDEN, out)
    assert (v.lost, v.duplicated, v.unexpected) == (1, 1, 1)
    assert not v.holds(Guarantee.AT_LEAST_ONCE)  # lost and unexpected
    assert not v.holds(Guarantee.AT_MOST_ONCE)


def test_multiset_ignores_interleaving_across_and_within_keys() -> None:
    out = [("a", 3), ("b", 2), ("a", 1), ("b", 1), ("a", 2)]
    assert compare("out", "multiset", GOLDEN, out).anomalies() == {}


def test_ordered_per_key_reports_reordering_and_first_divergence() -> None:
    out = [("a", 2), ("a", 1), ("b", 1), ("b", 2), ("a", 3)]
    v = compare("out", "ordered-per-key", GOLDEN, out)
    assert v.reordered == 1 and v.lost == v.duplicated == 0
    assert not v.holds(Guarantee.EXACTLY_ONCE)
    assert (v.divergences[0].key, v.divergences[0].index) == ("a", 0)
    assert (v.divergences[0].expected, v.divergences[0].actual) == (1, 2)


def test_guarantees_tolerate_their_anomalies() -> None:
    dup = [*GOLDEN, ("a", 3)]
    lost = GOLDEN[:-1]
    assert compare("o", "multiset", GOLDEN, dup).holds(Guarantee.AT_LEAST_ONCE)
    assert not compare("o", "multiset", GOLDEN, dup).holds(Guarantee.AT_MOST_ONCE)
    assert compare("o", "multiset", GOLDEN, lost).holds(Guarantee.AT_MOST_ONCE)
    assert not compare("o", "multiset", GOLDEN, lost).holds(Guarantee.AT_LEAST_ONCE)


def test_final_per_key_flags_wrong_and_missing_finals() -> None:
    v = compare("out", "final-per-key", GOLDEN, [("a", 2), ("c", 1)])
    assert v.lost == 1  # b never arrived
    assert v.unexpected == 2  # a ends at 2 instead of 3; c is unknown
    by_key = {d.key: d for d in v.divergences}
    assert (by_key["a"].expected, by_key["a"].actual) == (3, 2)


def test_incomplete_run_never_passes() -> None:
    verdict = verify({"out": "multiset"}, {"out": GOLDEN}, {"out": GOLDEN},
                     Guarantee.EXACTLY_ONCE, complete=False)
    assert not verdict.passed
    assert verdict.totals() == {"stalled": 1}


def test_no_delivery_promise_judges_only_that_the_run_finished() -> None:
    wrong = [*GOLDEN[1:], ("b", 2), ("z", 9)]  # lost, duplicated and unexpected at once
    verdict = verify({"out": "multiset"}, {"out": GOLDEN}, {"out": wrong}, Guarantee.NONE)
    assert verdict.passed and verdict.to_json()["guarantee"] == "none"
    assert set(verdict.totals()) == {"lost", "duplicated", "unexpected"}  # still reported
    unfinished = verify({"out": "multiset"}, {"out": GOLDEN}, {"out": GOLDEN}, Guarantee.NONE,
                        complete=False)
    assert not unfinished.passed


def _planted(rng: random.Random, golden: list[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
    """Golden's records shuffled, with a few lost, duplicated, unexpected or changed."""
    out = list(golden)
    rng.shuffle(out)
    for _ in range(rng.choice([0, 0, 1, 2])):
        what = rng.choice(["lose", "duplicate", "add", "change"])
        i = rng.randrange(len(out))
        if what == "lose":
            del out[i]
        elif what == "duplicate":
            out.insert(rng.randrange(len(out) + 1), out[i])
        elif what == "add":
            out.append((rng.randint(0, 9), ("new", rng.randint(0, 3))))
        else:
            out[i] = (out[i][0], ("changed", rng.randint(0, 3)))
    return out


def test_counted_multiset_sink_gets_the_verdict_of_the_key_by_key_one() -> None:
    # Counting a multiset sink's records whole is a shortcut: every planted loss,
    # duplicate, stray or changed record must come out as key by key.
    caught = 0
    for trial in range(500):
        rng = random.Random(trial)
        golden = [(rng.randint(0, 9), (rng.choice("ab"), rng.randint(0, 3)))
                  for _ in range(rng.randint(1, 40))]
        out = _planted(rng, golden)
        counts = record_counts({"s": golden}, {"s": "multiset"})["s"]
        fast = compare("s", "multiset", golden, out, golden_counts=counts)
        assert fast == compare("s", "multiset", golden, out), trial
        caught += bool(fast.anomalies())
    assert caught > 100  # the planted anomalies were there to be found


def test_records_that_do_not_hash_are_not_counted() -> None:
    golden = {"s": [("k", [1, 2])], "t": [("k", 1)], "u": [("k", [1])]}
    modes = {"s": "multiset", "t": "multiset", "u": "ordered-per-key"}
    assert list(record_counts(golden, modes)) == ["t"]
