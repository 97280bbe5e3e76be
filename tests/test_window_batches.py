"""The window operator folds a batch per slide bucket (and a count per key) instead of per
record and window: its state, snapshots and firings must be those of the per-record fold,
down to the order windows and keys were created in (snapshots are encoded in that order)."""

from __future__ import annotations

import random
from typing import Any

import pytest

from ftctl.runtime.operators import _INIT, WindowOp, _field_fold

pytestmark = pytest.mark.sim


class PerRecord:
    """The per-record window fold and firing, as written before batches were folded."""

    def __init__(self, size: int, slide: int, agg: str, field: int | None):
        self.size, self.slide, self.agg = size, slide, agg
        self.fold = _field_fold(agg, field)
        self.windows: dict[int, dict[Any, Any]] = {}

    def process(self, records: list[tuple[Any, Any, int]]) -> None:
        for k, v, ts in records:
            start = ts - ts % self.slide
            while start > ts - self.size:
                w = self.windows.setdefault(start, {})
                w[k] = self.fold(w.get(k, _INIT[self.agg]), v)
                start -= self.slide

    def on_watermark(self, wm: int) -> list[Any]:
        out = []
        for start in sorted(s for s in self.windows if s + self.size <= wm):
            end = start + self.size
            for k, acc in sorted(self.windows.pop(start).items(), key=lambda kv: str(kv[0])):
                out.append((k, (end, acc), end - 1))
        return out


def _layout(windows: dict[int, dict[Any, Any]]) -> list[Any]:
    return [(s, list(w.items())) for s, w in windows.items()]


@pytest.mark.parametrize("agg", ["count", "sum", "max", "avg", "argmax"])
def test_batched_fold_is_the_per_record_fold(agg: str) -> None:
    for trial in range(300):
        rng = random.Random(trial)
        slide = rng.choice([1, 2, 3, 5, 10])
        size = slide * rng.choice([1, 2, 3, 5]) + rng.choice([0, 0, 1])  # some not multiples
        field = 0 if agg == "argmax" else None
        op, ref = WindowOp(size, slide, agg, field), PerRecord(size, slide, agg, field)
        for _ in range(rng.randint(1, 6)):
            base = rng.randint(0, 50)
            # Keys 1 and "1" share a str: firing must keep their insertion order.
            batch = [(rng.choice([0, 1, "1", 2, 3, (4, 5)]),
                      (rng.randint(0, 9),) if agg == "argmax" else rng.randint(0, 9),
                      base + (rng.randint(0, 3) if rng.random() < 0.6 else rng.randint(0, 40)))
                     for _ in range(rng.randint(0, 30))]
            if rng.random() < 0.5:
                batch.sort(key=lambda r: r[2])
            op.process(batch, 0)
            ref.process(batch)
            assert _layout(op.windows) == _layout(ref.windows), (trial, size, slide)
            assert _layout(op.snapshot()) == _layout(ref.windows)
            wm = rng.randint(0, 60)
            assert op.on_watermark(wm) == ref.on_watermark(wm), (trial, wm)


def test_one_bucket_count_adds_each_keys_occurrences() -> None:
    op = WindowOp(10, 2, "count")
    op.process([("a", None, 4), ("b", None, 5), ("a", None, 5)], 0)  # one bucket: 4-5
    assert _layout(op.windows) == [(s, [("a", 2), ("b", 1)]) for s in (4, 2, 0, -2, -4)]
