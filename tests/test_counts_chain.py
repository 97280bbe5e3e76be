"""CountsChain: which counts a sink's next delta holds, and when a base is due."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from protocols.shared.packed_counts import (
    CountsChain,
    PackedCounts,
    delta_dict,
    fold_deltas,
    unpack,
    with_deltas,
)


def _next(chain: CountsChain, counts: dict[str, int]) -> tuple[int, dict[Any, int]] | None:
    step = chain.next(counts)
    return None if step is None else (step[0], delta_dict(step[1]))


def test_a_delta_holds_the_counts_touched_since_the_last_one() -> None:
    chain = CountsChain(3)
    counts = {"a": 1, "b": 1}
    chain.touch(["a", "b"], first=True)
    assert _next(chain, counts) == (0, {"a": 1, "b": 1})
    counts["a"] = 2
    chain.touch(["a"], first=False)
    assert _next(chain, counts) == (1, {"a": 2})
    assert _next(chain, counts) == (2, {})  # an output that changed nothing


def test_one_count_that_rose_makes_the_whole_delta_looked_up() -> None:
    # First counts are written as 1 without a lookup; a delta mixing them with a count
    # that rose must look every one up, or it would store "a" at 1 where it is 3.
    chain = CountsChain(4)
    counts = {"a": 3, "c": 1}
    chain.touch(["c"], first=True)
    chain.touch(["a"], first=False)
    chain.touch(["d"], first=True)
    counts["d"] = 1
    assert _next(chain, counts) == (0, {"a": 3, "c": 1, "d": 1})
    chain.touch(["e"], first=True)
    counts["e"] = 1
    assert _next(chain, counts) == (1, {"e": 1})  # first counts again after the delta


def test_at_its_longest_the_chain_asks_for_a_base() -> None:
    chain = CountsChain(2)
    counts = {"a": 1}
    deltas = []
    for i in range(2):
        chain.touch([f"k{i}"], first=True)
        counts[f"k{i}"] = 1
        step = _next(chain, counts)
        assert step is not None
        deltas.append(step[1])
    chain.touch(["z"], first=True)
    assert chain.next(counts) is None  # the caller writes a base of every count
    chain.restart()
    assert chain.touched == [] and _next(chain, counts) == (0, {})
    assert with_deltas(None, deltas) == fold_deltas(*deltas) == {"k0": 1, "k1": 1}


def test_a_base_after_deltas_of_first_counts_stores_their_parts_not_a_new_encoding() -> None:
    # Each identity is encoded once, for its delta; the base that follows holds those
    # very parts (and the last output's, not yet in a delta) as one part of parts.
    from ftctl.codec import decode, decode_part

    chain, packed = CountsChain(2), PackedCounts()
    counts: dict[Any, int] = {}
    assert unpack(packed.pack(counts)) == {}  # the base before any output
    deltas = []
    for i in range(3):
        counts[f"k{i}"] = 1
        chain.touch([f"k{i}"], first=True)
        step = chain.next(counts, packed)
        if step is None:
            chain.take(counts, packed)
            parts = packed.pack(counts)
            chain.restart()
        else:
            deltas.append(step[1])
    assert unpack(parts) == counts
    held = decode_part(parts[-1])
    assert held[:2] == deltas and decode_part(held[2]) == (["k2"], None)
    assert unpack([bytes(p) for p in parts]) == counts  # read back from plain bytes too
    assert decode(parts[-1])[0] == deltas[0]


@settings(max_examples=300, deadline=None)
@given(steps=st.lists(st.tuples(st.lists(st.sampled_from("abcdefgh"), max_size=4),
                                st.booleans(), st.sampled_from(["delta", "pack", "none"])),
                      max_size=30),
       length=st.integers(1, 4))
def test_parts_reused_from_deltas_always_read_back_as_the_counts(
        steps: list[tuple[list[str], bool, str]], length: int) -> None:
    # A sink's counts through outputs (a delta each, a base when the chain is full) and
    # snapshots (a pack between bases), some batches all first counts and some not, some
    # told as not first though they are (lineage after a purge): every pack reads back
    # as the counts, and the last base with the deltas after it restores them.
    chain, packed = CountsChain(length), PackedCounts()
    counts: dict[Any, int] = {}
    base = packed.pack(counts)
    deltas: list[Any] = []
    durable: dict[Any, int] = {}  # the counts as of the last delta or base
    for idents, say_first, then in steps:
        made = len(counts)
        for i in idents:
            counts[i] = counts.get(i, 0) + 1
        first = len(counts) - made == len(idents)
        if not first:  # a count rose: its part may hold the old one
            packed.stale()
        chain.touch(idents, first and say_first)
        if then == "delta":
            step = chain.next(counts, packed)
            if step is None:
                chain.take(counts, packed)
                base, deltas = packed.pack(counts), []
                chain.restart()
            else:
                deltas.append(step[1])
            durable = dict(counts)
        elif then == "pack":
            assert unpack(packed.pack(counts)) == counts
    chain.take(counts, packed)
    assert unpack(packed.pack(counts)) == counts
    assert with_deltas(base, deltas) == durable
    if deltas:  # as a Spark task folds a run of them into one write, parts or dicts
        folded = deltas[0]
        for d in deltas[1:]:
            folded = fold_deltas(folded, d)
        assert with_deltas(base, [folded]) == durable
    assert with_deltas([bytes(p) for p in base], [bytes(d) if isinstance(d, bytes) else d
                                                  for d in deltas]) == durable
