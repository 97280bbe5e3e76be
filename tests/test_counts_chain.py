"""CountsChain: which counts a sink's next delta holds, and when a base is due."""

from __future__ import annotations

from protocols.shared.packed_counts import CountsChain, fold_deltas, with_deltas


def test_a_delta_holds_the_counts_touched_since_the_last_one() -> None:
    chain = CountsChain(3)
    counts = {"a": 1, "b": 1}
    chain.touch(["a", "b"], first=True)
    assert chain.next(counts) == (0, {"a": 1, "b": 1})
    counts["a"] = 2
    chain.touch(["a"], first=False)
    assert chain.next(counts) == (1, {"a": 2})
    assert chain.next(counts) == (2, {})  # an output that changed nothing


def test_one_count_that_rose_makes_the_whole_delta_looked_up() -> None:
    # First counts are written as 1 without a lookup; a delta mixing them with a count
    # that rose must look every one up, or it would store "a" at 1 where it is 3.
    chain = CountsChain(4)
    counts = {"a": 3, "c": 1}
    chain.touch(["c"], first=True)
    chain.touch(["a"], first=False)
    chain.touch(["d"], first=True)
    counts["d"] = 1
    assert chain.next(counts) == (0, {"a": 3, "c": 1, "d": 1})
    chain.touch(["e"], first=True)
    counts["e"] = 1
    assert chain.next(counts) == (1, {"e": 1})  # first counts again after the delta


def test_at_its_longest_the_chain_asks_for_a_base() -> None:
    chain = CountsChain(2)
    counts = {"a": 1}
    deltas = []
    for i in range(2):
        chain.touch([f"k{i}"], first=True)
        counts[f"k{i}"] = 1
        step = chain.next(counts)
        assert step is not None
        deltas.append(step[1])
    chain.touch(["z"], first=True)
    assert chain.next(counts) is None  # the caller writes a base of every count
    chain.restart()
    assert chain.touched == set() and chain.next(counts) == (0, {})
    assert with_deltas(None, deltas) == fold_deltas(*deltas) == {"k0": 1, "k1": 1}
