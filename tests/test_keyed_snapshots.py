"""Incremental snapshots of the keyed aggregates (``_KeyedAggregate`` in
``ftctl/runtime/operators.py``): parts of the keys changed since the last snapshot on
top of the last one's, restored to exactly the state a full copy gives."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ftctl.codec import Part
from ftctl.runtime.operators import AvgOp, CountOp, MaxOp, SumOp, TailAvgOp
from ftctl.store import MemoryStore

MAKERS = {"count": CountOp, "sum": SumOp, "max": MaxOp, "avg": AvgOp,
          "tail_avg": lambda: TailAvgOp(3)}

# A step: ("in", keys) | ("snap", 0) | ("restore", which snapshot) | ("stored", which)
STEPS = st.lists(st.one_of(
    st.tuples(st.just("in"), st.lists(st.integers(0, 12), max_size=8)),
    st.tuples(st.sampled_from(["snap", "restore", "stored", "fresh"]), st.integers(0, 30))),
    max_size=60)


@pytest.mark.parametrize("kind", sorted(MAKERS))
@settings(max_examples=150, deadline=None)
@given(steps=STEPS, max_parts=st.sampled_from([1, 2, 16]))
def test_incremental_snapshots_restore_what_a_full_copy_does(
        kind: str, steps: list[tuple[str, Any]], max_parts: int) -> None:
    """Against the same operator snapshotting by plain copy: every snapshot restores the
    same state, into the same operator or a new one, from parts kept in this process or
    read back as plain bytes (a store's files), and the outputs after it are the same."""
    make = MAKERS[kind]
    op, ref = make(), make()
    op.MAX_PARTS = max_parts
    snaps: list[tuple[Any, dict[Any, Any]]] = []  # (the operator's, the plain copy)
    ts = 0
    for what, arg in steps:
        if what == "in":
            ts += 1
            batch = [(k, k * 7 + ts, ts) for k in arg]
            assert op.process(batch, 0) == ref.process(batch, 0)
        elif what == "snap":
            snaps.append((op.snapshot(), dict(ref.state)))
        elif snaps:
            saved, plain = snaps[arg % len(snaps)]
            if what == "stored":  # through a store, its parts out of band and back
                store = MemoryStore()
                store.put(1, "x", {"op": saved})
                saved = store.get(1, "x")["op"]
            elif what == "fresh":  # read back as bytes, then a new operator
                saved = [bytes(p) for p in saved]
                op = make()
                op.MAX_PARTS = max_parts
            op.restore(saved)
            ref.restore(plain)
        assert op.state == ref.state


def test_a_snapshot_after_a_few_changes_encodes_only_them() -> None:
    """What makes it incremental: the parts of the last snapshot are kept as they are
    (the same objects), and the new part holds only the keys changed since."""
    op = CountOp()
    op.process([(k, 1, 0) for k in range(1000)], 0)
    first = op.snapshot()
    op.process([(5, 1, 1), (7, 1, 1), (5, 1, 2)], 0)
    second = op.snapshot()
    assert len(first) == 1 and second[0] is first[0] and type(second[1]) is Part
    assert len(second[1]) < len(first[0]) / 50
    assert op.snapshot() == second  # nothing changed: nothing new
    # Many changes: one part of everything again, not a longer chain.
    op.process([(k, 1, 3) for k in range(1000)] * 2, 0)
    assert len(op.snapshot()) == 1
