"""The exactly-once checker on hand-made outputs."""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ftctl.verify import checker
from ftctl.verify.checker import compare, rearranged, record_counts, record_positions, verify
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


def _in_runs(rng: random.Random, golden: list[tuple[Any, Any]]
            ) -> tuple[list[tuple[Any, Any]], int]:
    """Golden's records cut into runs put in another order, each record a copy (a
    schedule's output holds equal records, not golden's own objects); and how many."""
    cuts = sorted(rng.sample(range(1, len(golden)), min(len(golden) - 1, rng.randint(0, 6))))
    runs = [golden[a:b] for a, b in zip([0, *cuts], [*cuts, len(golden)], strict=True)]
    rng.shuffle(runs)
    return [(k, tuple(v)) for run in runs for k, v in run], len(runs)


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 2**32), st.integers(2, 300), st.booleans())
def test_a_rearrangement_is_proved_exactly_and_plants_are_never_proved(
        seed: int, n: int, plant: bool) -> None:
    rng = random.Random(seed)
    golden = [(rng.randint(0, 9), ("r", i)) for i in range(n)]  # distinct records
    places = record_positions({"s": golden}, {"s": "multiset"})["s"]
    out, runs = _in_runs(rng, golden)
    if plant:
        out = _planted(rng, out)
    proved = rearranged(out, golden, places)
    assert proved <= (Counter(out) == Counter(golden))  # never proves what is not so
    if not plant and runs * checker.MIN_RUN <= n:  # runs long enough to be worth it
        assert proved
    fast = compare("s", "multiset", golden, out, golden_positions=places)
    assert fast == compare("s", "multiset", golden, out)


def test_a_long_rearrangement_is_proved_and_a_changed_record_is_not() -> None:
    golden = [(i % 7, ("r", i)) for i in range(4_000)]
    places = record_positions({"s": golden}, {"s": "multiset"})["s"]
    out = [(k, tuple(v)) for k, v in golden[1_000:] + golden[:1_000]]
    assert rearranged(out, golden, places)
    assert not rearranged([*out[:-1], out[0]], golden, places)  # one lost, one twice
    assert not rearranged([*out[:-1], (0, ("r", -1))], golden, places)  # one changed
    swapped = list(golden)
    for i in range(0, len(swapped) - 1, 2):  # runs of one: not worth proving
        swapped[i], swapped[i + 1] = swapped[i + 1], swapped[i]
    assert not rearranged(swapped, golden, places)
    assert compare("s", "multiset", golden, swapped, golden_positions=places).anomalies() == {}


def test_only_sinks_of_distinct_hashable_records_get_places() -> None:
    golden = {"s": [("k", 1), ("k", 1)], "t": [("k", 1), ("k", 2)], "u": [("k", [1])],
              "v": [("k", 1)]}
    modes = {"s": "multiset", "t": "multiset", "u": "multiset", "v": "ordered-per-key"}
    assert record_positions(golden, modes) == {"t": {("k", 1): 0, ("k", 2): 1}}


def test_records_that_do_not_hash_are_not_counted() -> None:
    golden = {"s": [("k", [1, 2])], "t": [("k", 1)], "u": [("k", [1])]}
    modes = {"s": "multiset", "t": "multiset", "u": "ordered-per-key"}
    assert list(record_counts(golden, modes)) == ["t"]
