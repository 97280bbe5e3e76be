"""A diff log as local snapshots store it: the entries appended since the last snapshot
are encoded, the rest are the parts made before (``protocols/causal/dlog_parts.py``)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ftctl.codec import decode
from protocols.causal.dlog_parts import DiffLogParts, unpack


def _entry(i: int) -> tuple[int, tuple[str, int, tuple[()]]]:
    return (i, ("a[0]", i, ()))


def test_a_growing_log_adds_one_part_of_its_new_entries_per_snapshot() -> None:
    log = [_entry(1), _entry(2)]
    packer = DiffLogParts()
    first = packer.pack(log)
    log += [_entry(3)]
    second = packer.pack(log)
    assert second[0] is first[0] and len(second) == 2
    assert decode(second[1]) == [_entry(3)]  # the bytes, not only the kept value
    assert unpack(second) == log
    assert packer.pack(log) == second  # nothing new: the same parts


def test_a_trimmed_or_folded_log_is_a_new_list_and_encoded_whole_again() -> None:
    packer = DiffLogParts()
    log = [_entry(i) for i in range(1, 6)]
    packer.pack(log)
    trimmed = log[2:]
    parts = packer.pack(trimmed)
    assert len(parts) == 1 and unpack(parts) == trimmed
    trimmed[-1] = _entry(99)  # its last covered entry replaced: the parts do not hold
    assert unpack(packer.pack(trimmed)) == trimmed


def test_a_restored_log_keeps_the_parts_it_was_read_from() -> None:
    packer = DiffLogParts()
    parts = packer.pack([_entry(1), _entry(2)])
    again = DiffLogParts()
    log = unpack(parts)
    again.adopt(log, parts)
    log.append(_entry(3))
    after = again.pack(log)
    assert after[0] is parts[0] and unpack(after) == log


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.tuples(st.just("add"), st.integers(0, 5)),
                          st.tuples(st.just("trim"), st.integers(0, 5)),
                          st.tuples(st.just("pack"), st.just(0))), max_size=60))
def test_the_parts_always_read_back_as_the_log(steps: list[tuple[str, int]]) -> None:
    packer, log, n = DiffLogParts(), [], 0
    for op, k in steps:
        if op == "add":
            for _ in range(k):
                n += 1
                log.append(_entry(n))
        elif op == "trim":
            log = log[k:]
        else:
            assert unpack(packer.pack(log)) == log
    assert unpack(packer.pack(log)) == log
