"""Operators, sources and routing of the sans-IO runtime."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ftctl.runtime.graph import ExecutionGraph
from ftctl.runtime.instance import InstanceCore
from ftctl.runtime.messages import Batch
from ftctl.runtime.operators import CountOp, JoinOp, WindowJoinOp, WindowOp, WinningBidsOp
from ftctl.runtime.sources import make_source
from tests.conftest import load


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 5000), st.integers(1, 300))
def test_source_records_are_a_pure_function_of_seed_and_index(start: int, n: int) -> None:
    gen = make_source("source.text", 7, {})
    whole = gen(0, start + n)
    assert gen(start, start + n) == whole[start:]
    assert make_source("source.text", 8, {})(start, start + n) != whole[start:]


def test_votes_are_zipf_skewed() -> None:
    recs = make_source("source.votes", 1, {"keys": 1000, "skew": 1.1})(0, 20000)
    counts: dict[int, int] = {}
    for k, _, _ in recs:
        counts[k] = counts.get(k, 0) + 1
    assert counts[0] > 10 * counts.get(500, 1)


def test_count_snapshot_restore_roundtrip() -> None:
    op = CountOp()
    op.process([("a", 1, 0), ("a", 1, 1), ("b", 1, 2)], 0)
    saved = op.snapshot()
    op.process([("a", 1, 3)], 0)
    op.restore(saved)
    assert op.process([("a", 1, 4)], 0) == [("a", 3, 4)]


def test_sliding_window_fires_on_watermark() -> None:
    win = WindowOp(size=100, slide=50, agg="count")
    win.process([("k", 1, 10), ("k", 1, 60), ("k", 1, 120)], 0)
    assert win.on_watermark(99) == [("k", (50, 1), 49)]  # window [-50, 50)
    assert win.on_watermark(100) == [("k", (100, 2), 99)]  # [0, 100)
    assert win.on_watermark(10**9) == [("k", (150, 2), 149), ("k", (200, 1), 199)]


def test_join_emits_each_pair_once() -> None:
    j = JoinOp()
    assert j.process([("k", "l1", 1)], 0) == []
    assert j.process([("k", "r1", 2)], 1) == [("k", ("l1", "r1"), 2)]
    assert j.process([("k", "l2", 3)], 0) == [("k", ("l2", "r1"), 3)]


def test_hash_partitioning_sends_a_key_to_one_channel() -> None:
    graph = ExecutionGraph(load("wordcount"))
    core = InstanceCore(graph, "split[0]")
    ch_in = core.inputs[0]
    core.deliver(ch_in, Batch([(0, "w1 w2 w1 w3", 0), (1, "w2 w2", 1)]))
    seen: dict[str, set[int]] = {}
    for act in core.take_actions():
        for k, _, _ in act.msg.records:  # type: ignore[union-attr]
            seen.setdefault(k, set()).add(act.channel)  # type: ignore[union-attr]
    assert set(seen) == {"w1", "w2", "w3"}
    assert all(len(chs) == 1 for chs in seen.values())


def test_round_robin_alternates_whole_batches() -> None:
    graph = ExecutionGraph(load("wordcount"))
    core = InstanceCore(graph, "lines[0]")
    core.source_next()
    core.source_next()
    chans = [a.channel for a in core.take_actions()]  # type: ignore[union-attr]
    assert len(chans) == 2 and chans[0] != chans[1]


def _auction(aid: int, expires: int) -> tuple[Any, ...]:
    # Nexmark auction value: ..., [5] reserve, [6] date_time, [7] expires
    return (aid, "item", 7, 3, "", 10, 0, expires)


def _bid(aid: int, price: int, at: int) -> tuple[Any, ...]:
    return (aid, 1, "", price, "", at)


@pytest.mark.parametrize(("make", "before", "after", "fire"), [
    (JoinOp, [("k", "l1", 1, 0), ("k", "r1", 2, 1)], [("k", "l2", 3, 0), ("k", "r2", 4, 1)],
     None),
    (lambda: WindowJoinOp(size=10), [("k", "l1", 1, 0), ("k", "r1", 2, 1)],
     [("k", "l2", 3, 0), ("k", "r2", 4, 1)], 100),
    (WinningBidsOp, [(1, _auction(1, 50), 0, 0), (2, _bid(2, 11, 5), 5, 1)],
     [(1, _bid(1, 20, 6), 6, 1), (2, _auction(2, 60), 1, 0)], 100),
])
def test_a_two_sided_snapshot_is_not_changed_by_later_input(
        make: Any, before: list[tuple[Any, Any, int, int]],
        after: list[tuple[Any, Any, int, int]], fire: int | None) -> None:
    """Snapshots copy what the operator changes in place (its dicts and lists), not the
    immutable values: input after the snapshot must not reach it."""
    op, fresh = make(), make()
    for k, v, ts, port in before:
        op.process([(k, v, ts)], port)
        fresh.process([(k, v, ts)], port)
    saved = op.snapshot()
    for k, v, ts, port in after:
        op.process([(k, v, ts)], port)
    restored = make()
    restored.restore(saved)
    assert restored.snapshot() == fresh.snapshot()
    if fire is not None:
        assert restored.on_watermark(fire) == fresh.on_watermark(fire)
    out = [r.process([(k, v, ts)], port) for r in (restored, fresh) for k, v, ts, port in after]
    assert out[:len(after)] == out[len(after):]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["auction", "bid", "watermark", "restore"]),
                          st.integers(0, 6), st.integers(0, 40)), max_size=80))
def test_winning_bids_holds_exactly_the_early_bids_a_watermark_leaves(
        steps: list[tuple[str, int, int]]) -> None:
    """A bid for an auction not yet seen is held until the watermark passes its time;
    the operator finds such bids by their times, and must drop exactly those."""
    op = WinningBidsOp()
    held: dict[int, list[Any]] = {}  # what holding and dropping by hand gives
    wm = 0
    for kind, aid, t in steps:
        if kind == "auction" and aid not in op.open:
            op.process([(aid, _auction(aid, wm + t + 1), wm)], 0)
            held.pop(aid, None)
        elif kind == "bid":
            bid = _bid(aid, t, wm + t - 10)
            if aid not in op.open:
                held.setdefault(aid, []).append(bid)
            op.process([(aid, bid, wm + t)], 1)
        elif kind == "watermark":
            wm += t
            op.on_watermark(wm)
            held = {k: kept for k, bids in held.items()
                    if (kept := [b for b in bids if b[5] >= wm])}
        elif kind == "restore":
            saved, op = op.snapshot(), WinningBidsOp()
            op.restore(saved)
        assert op.held_bids() == held


class _ScanningWinningBids:
    """The operator as first written: every watermark scans every open auction and every
    held bid. Slow when much waits, plainly right; the indexed operator must match it."""

    def __init__(self) -> None:
        self.open: dict[Any, list[Any]] = {}
        self.held: dict[Any, list[Any]] = {}

    def process(self, records: list[Any], port: int) -> None:
        for k, v, _ in records:
            if port == 0:
                self.open[k] = [v, None]
                for bid in self.held.pop(k, ()):
                    self._offer(k, bid)
            elif k in self.open:
                self._offer(k, v)
            else:
                self.held.setdefault(k, []).append(v)

    def _offer(self, k: Any, bid: Any) -> None:
        entry = self.open[k]
        a = entry[0]
        if a[6] <= bid[5] < a[7] and bid[3] >= a[5] and (entry[1] is None or bid[3] > entry[1]):
            entry[1] = bid[3]

    def on_watermark(self, watermark: int) -> list[Any]:
        closing = sorted((a[0][7], k) for k, a in self.open.items() if a[0][7] <= watermark)
        out = []
        for expires, k in closing:
            a, best = self.open.pop(k)
            if best is not None:
                out.append((k, (a[2], a[3], best, expires), expires - 1))
        self.held = {k: kept for k, bids in self.held.items()
                     if (kept := [b for b in bids if b[5] >= watermark])}
        return out


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["auction", "bid", "bid", "bid", "watermark",
                                           "watermark", "restore"]),
                          st.integers(0, 3), st.integers(-2, 4), st.integers(0, 6)),
                max_size=120),
       st.sampled_from([0, 1, 4096]))
# A held list whose later bid is earlier; a trim that leaves its earliest bid second; an
# auction reopened with a later expiry; a late bid that a late auction, coming before the
# next watermark, still counts.
@example([("bid", 1, 2, 5), ("bid", 1, 1, 5), ("watermark", 0, 1, 0),
          ("watermark", 0, 1, 0)], 0)
@example([("bid", 1, 0, 5), ("bid", 1, 3, 5), ("bid", 1, 2, 5), ("watermark", 0, 1, 0),
          ("watermark", 0, 1, 0), ("watermark", 0, 1, 0)], 0)
@example([("auction", 1, 0, 1), ("auction", 1, 0, 5), ("watermark", 0, 1, 0)], 0)
@example([("watermark", 0, 1, 0), ("watermark", 0, 1, 0), ("bid", 1, 3, 4),
          ("bid", 1, -1, 5), ("auction", 1, -2, 5)] + [("watermark", 0, 1, 0)] * 4, 4096)
def test_winning_bids_indexed_by_time_matches_a_full_scan(
        steps: list[tuple[str, int, int, int]], slack: int) -> None:
    """Auctions that reopen, expire before they arrive or share an expiry; bids before,
    during and after their auction, late ones among them; watermarks that stand still:
    the index must close and drop exactly what a scan of everything does, in its order,
    whether dead bids are cleared out at once (``slack`` 0) or long after."""
    op, ref = WinningBidsOp(), _ScanningWinningBids()
    op._CLEAR_SLACK = slack
    wm = 0
    for kind, aid, t, price in steps:
        if kind == "auction":
            value = (aid, "item", 7, 3, "", 2, wm + t, wm + t + price)  # reserve 2
            for o in (op, ref):
                o.process([(aid, value, wm + t)], 0)
        elif kind == "bid":
            for o in (op, ref):
                o.process([(aid, _bid(aid, price, wm + t), wm + t)], 1)
        elif kind == "watermark":
            wm += t > 0  # one step at a time, so a watermark lands on every time
            assert op.on_watermark(wm) == ref.on_watermark(wm)
        else:
            saved, op = op.snapshot(), WinningBidsOp()
            op._CLEAR_SLACK = slack
            op.restore(saved)
        # Held bids die lazily; what can still count, each list in arrival order, is
        # what the scan keeps, and is what a snapshot holds.
        assert op.open == ref.open and op.held_bids() == ref.held
        assert op.snapshot() == (ref.open, ref.held)
        assert op.state_size() == len(ref.open) + sum(len(b) for b in ref.held.values())
