"""What a protocol piggybacks on channel batches, counted where a host sends them.

A protocol may put anything in a batch's ``meta`` (``causal``: its tree-clock diff) and
may send batches that carry nothing else (``causal``'s rule N5: an event that produced
nothing for a channel still sends an empty batch, so that its clock reaches every child).
Neither shows in record counts. Both hosts call ``Piggyback.observe`` for every batch they
send and report the counts with the run's other traffic, so a figure can put the clocks'
cost in bytes and messages next to their cost in latency.

Counted per transmission (resends included) by the unit that sends:

- ``batches``: batches sent;
- ``clock_only``: of them, those with no records and no watermark above the highest this
  counter saw on the channel: sent for their piggyback alone. The runtime itself sends an
  empty batch only to advance a watermark, so without a protocol that adds some this is 0;
- ``bytes`` / ``max``: the size of each batch's ``meta`` as ``ftctl.codec`` encodes it on
  its own (0 for no meta), summed and the largest.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ftctl.codec import encode
from ftctl.runtime.messages import Batch

FIELDS = ("batches", "clock_only", "bytes", "max")


class Piggyback:
    __slots__ = ("_last", "_size", "_wm", "batches", "bytes", "clock_only", "max")

    def __init__(self) -> None:
        self.batches = 0
        self.clock_only = 0
        self.bytes = 0
        self.max = 0
        self._wm: dict[int, int] = {}  # per channel, the highest watermark sent on it
        # An event's batches share one diff object (causal): size it once per event.
        self._last: tuple[Any, ...] | None = None
        self._size = 0

    def observe(self, ch: int, batch: Batch) -> None:
        self.batches += 1
        wm = batch.watermark
        prev = self._wm.get(ch)
        if wm is not None and (prev is None or wm > prev):
            self._wm[ch] = wm
        elif not batch.records:
            self.clock_only += 1
        meta = batch.meta
        if meta is None:
            return
        if meta is not self._last:
            size = len(encode(meta))
            # Only an immutable meta may be sized once for all the batches that share it.
            if type(meta) is tuple:
                self._last, self._size = meta, size
        else:
            size = self._size
        self.bytes += size
        if size > self.max:
            self.max = size

    def to_dict(self) -> dict[str, int]:
        return {"batches": self.batches, "clock_only": self.clock_only,
                "bytes": self.bytes, "max": self.max}


def merge(parts: Iterable[Mapping[str, int] | None]) -> dict[str, Any]:
    """Counts of several units (``Piggyback.to_dict``; None: a unit that sent none) as one,
    with ``mean``: piggyback bytes per batch."""
    total = dict.fromkeys(FIELDS, 0)
    for part in parts:
        if not part:
            continue
        for key in ("batches", "clock_only", "bytes"):
            total[key] += int(part.get(key, 0))
        total["max"] = max(total["max"], int(part.get("max", 0)))
    out: dict[str, Any] = dict(total)
    out["mean"] = round(total["bytes"] / total["batches"], 2) if total["batches"] else 0.0
    return out
