"""Tree clocks: the paper's Figure 1 step, apply/merge, truncation, T*, and properties."""

from __future__ import annotations

import marshal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from protocols.causal.recovery import plan_recovery
from protocols.shared.treeclock import TreeClock, plain_child, t_min_of, truncate_plain


def _tc(id_: str, time: int, *children: TreeClock) -> TreeClock:
    return TreeClock(id_, time, {c.id: c for c in children})


def test_figure1_h_receives_from_c() -> None:
    # H sits below C and G; C below A and B. C's last diff: C processed A's 4th message.
    h_clock = _tc("H", 6, _tc("C", 2, _tc("A", 1), _tc("B", 3)), _tc("G", 4, _tc("F", 2)))
    c_diff = _tc("C", 3, _tc("A", 4))
    diff = TreeClock.receive_plain("H", h_clock.time + 1, c_diff.to_plain(), depth=3)
    assert TreeClock.from_plain(diff) == _tc("H", 7, _tc("C", 3, _tc("A", 4)))
    h_clock.apply_plain(diff)
    assert h_clock == _tc("H", 7, _tc("C", 3, _tc("A", 4), _tc("B", 3)),
                          _tc("G", 4, _tc("F", 2)))


def test_apply_takes_entrywise_max_and_adds_new_paths() -> None:
    a = _tc("N", 5, _tc("P", 3, _tc("S", 9)))
    b = _tc("N", 4, _tc("P", 7), _tc("Q", 1))
    m = a.merged(b)
    assert m == _tc("N", 5, _tc("P", 7, _tc("S", 9)), _tc("Q", 1))
    assert a.leq(m) and b.leq(m)
    assert not m.leq(a)


def test_apply_rejects_other_root() -> None:
    try:
        _tc("N", 1).apply(_tc("M", 1))
    except ValueError:
        return
    raise AssertionError("applied a diff with another root")


def test_truncation_bounds_depth() -> None:
    chain = _tc("E", 1, _tc("D", 2, _tc("C", 3, _tc("B", 4, _tc("A", 5)))))
    assert truncate_plain(chain.to_plain(), 2) == _tc("E", 1, _tc("D", 2, _tc("C", 3))).to_plain()
    assert truncate_plain(chain.to_plain(), 0) == ("E", 1, ())
    # receive keeps depth levels below the new root, however deep the sender's diff is
    diff = TreeClock.receive_plain("F", 1, chain.to_plain(), depth=2)
    assert TreeClock.from_plain(diff).depth() == 3


def test_t_star_from_child_clocks() -> None:
    # B's diffs as its children C1, C2 logged them; C2 has seen B only up to time 2.
    d = [_tc("B", 1, _tc("A1", 1)), _tc("B", 2, _tc("A2", 1)), _tc("B", 3, _tc("A1", 2))]
    c1 = _tc("C1", 9, _tc("B", 3, _tc("A1", 2)))
    c2 = _tc("C2", 4, _tc("B", 2, _tc("A2", 1)))
    tmin = t_min_of("B", [c1, c2])
    assert tmin == 2
    plan = plan_recovery("B", {"C1": c1, "C2": c2}, [x.to_plain() for x in d], ["A1", "A2"])
    assert plan.t_min == tmin
    assert plan.tstar == _tc("B", 2, _tc("A1", 1), _tc("A2", 1))
    # B' resumes to each A_i at 1 + A_i's time in T*
    assert plan.parents == {"A1": 2, "A2": 2}


def test_t_min_is_zero_when_a_child_saw_nothing() -> None:
    assert t_min_of("B", [_tc("C1", 3, _tc("B", 4)), _tc("C2", 0)]) == 0


def test_t_min_reads_the_level_one_entry_not_a_deeper_occurrence() -> None:
    # C2 received B:3 from B directly, and also learned of B:7 through X (B -> X -> C2):
    # only the direct entry says which of B's messages C2 has.
    c1 = _tc("C1", 9, _tc("B", 6))
    c2 = _tc("C2", 5, _tc("B", 3), _tc("X", 2, _tc("B", 7)))
    assert t_min_of("B", [c1, c2]) == 3
    # A child that saw B only through another path received nothing from B itself.
    assert t_min_of("B", [c1, _tc("C3", 4, _tc("X", 2, _tc("B", 7)))]) == 0


_IDS = st.sampled_from(["A", "B", "C", "D"])


def _trees(root: str, depth: int) -> st.SearchStrategy[TreeClock]:
    times = st.integers(0, 20)
    if depth == 0:
        return st.builds(TreeClock, st.just(root), times)
    kids = st.dictionaries(_IDS, st.integers(0, 20), max_size=3).flatmap(
        lambda d: st.tuples(*[_trees(k, depth - 1) for k in d]) if d else st.just(()))
    return st.builds(lambda t, cs: TreeClock(root, t, {c.id: c for c in cs}), times, kids)


@given(_trees("N", 2), _trees("N", 2))
def test_apply_is_monotone(a: TreeClock, b: TreeClock) -> None:
    before = a.copy()
    a.apply(b)
    assert before.leq(a)
    assert b.leq(a)


@given(_trees("N", 2), _trees("N", 2))
def test_apply_is_idempotent_and_commutative(a: TreeClock, b: TreeClock) -> None:
    once = a.merged(b)
    twice = once.merged(b)
    assert once == twice
    assert a.merged(b) == b.merged(a)


@given(_trees("N", 3), st.integers(0, 3))
def test_truncated_is_below_original(a: TreeClock, depth: int) -> None:
    t = TreeClock.from_plain(truncate_plain(a.to_plain(), depth))
    assert t.depth() <= depth + 1
    assert t.leq(a)


@given(_trees("N", 3))
def test_plain_form_round_trips_and_is_marshallable(a: TreeClock) -> None:
    plain = a.to_plain()
    assert TreeClock.from_plain(marshal.loads(marshal.dumps(plain))) == a


@given(_trees("S", 3), st.integers(1, 4), st.integers(0, 50))
def test_receive_roots_the_truncated_sender_diff_below_the_receiver(
        sender: TreeClock, depth: int, time: int) -> None:
    diff = TreeClock.from_plain(TreeClock.receive_plain("N", time, sender.to_plain(), depth))
    assert (diff.id, diff.time, list(diff.children)) == ("N", time, ["S"])
    assert diff.depth() <= depth + 1
    assert diff.children["S"].leq(sender)
    assert diff.children["S"].depth() == min(sender.depth(), depth)
    assert TreeClock.receive_plain("N", time, None, depth) == ("N", time, ())


@given(_trees("N", 2), _trees("N", 2))
def test_apply_plain_matches_apply(a: TreeClock, b: TreeClock) -> None:
    expected = a.merged(b)
    a.apply_plain(b.to_plain())
    assert a == expected
    with pytest.raises(ValueError):
        a.apply_plain(("M", 1, ()))


def test_plain_child_finds_a_root_child() -> None:
    diff = _tc("H", 3, _tc("C", 2, _tc("A", 1))).to_plain()
    assert plain_child(diff, "C") == ("C", 2, (("A", 1, ()),))
    assert plain_child(diff, "A") is None
