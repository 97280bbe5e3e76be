"""Output latency of sink records, measured in the sink task against the source schedule.

With ``--rate`` every source instance emits the batch starting at offset ``o`` at
``anchor + due(o - lo)`` (``ftctl.runtime.pace``: ``(o - lo) / rate`` unless the input
changes pace once; ``anchor``: when the driver released the initial plan, a
``time.monotonic()`` value; CLOCK_MONOTONIC is system-wide on Linux and every task runs on
this machine). A record's ``ts`` is ``index * ms_per_record``, so the sink can work out
when the record was *due* from its ``ts`` alone, and its latency is ``now - due``. Records
replayed after a failure carry their old ``ts``, so recovery shows up as latency that
climbs and falls back as the pipeline catches up, which is what the recovery metrics read.

Measured when the sink instance produces a record; for transactional sinks (checkpoint)
the wait for the commit (at most one checkpoint interval) comes on top and is not
included. Windowed operators stamp ``window_end - 1``, so their latency is relative to the
window's end. Topologies with several source operators are judged by the first one's
schedule. One record in ``stride`` is sampled (systematically, so quantiles stay
unbiased); the stride doubles when the driver falls behind in collecting samples.
"""

from __future__ import annotations

import bisect
import threading
import time
from array import array
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ftctl.runtime.graph import ExecutionGraph
from ftctl.runtime.pace import Pace
from ftctl.spill import ChunkFile

STRIDE = 16
MAX_PENDING = 4000  # samples held between two heartbeats before the stride doubles
LATENCY_KEEP = 200_000  # samples the driver holds in memory when it has a spill file


class LatencyProbe:
    def __init__(self, graph: ExecutionGraph, rate: float | None):
        self.pace = Pace.of(graph.topology.input) if rate else None
        self.anchor: float | None = None
        self.batch = graph.topology.input.batch
        first = graph.sources[0] if graph.sources else None
        ops = [graph.instances[i].op for i in graph.sources]
        mine = sorted(i for i, op in zip(graph.sources, ops, strict=True)
                      if first is not None and op == graph.instances[first].op)
        ranges = sorted(graph.source_range(i) for i in mine)
        self.los = [lo for lo, _ in ranges]
        params: dict[str, Any] = (graph.topology.operator(graph.instances[first].op).params
                                  if first is not None else {})
        self.ms = float(params.get("ms_per_record", 1.0)) or 1.0
        self.stride = STRIDE
        self.count = 0
        self.samples: list[tuple[float, float]] = []
        self.lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        return self.anchor is not None and self.pace is not None and bool(self.los)

    def due(self, ts: float) -> float:
        assert self.anchor is not None and self.pace is not None
        i = int(ts / self.ms)
        lo = self.los[max(0, bisect.bisect_right(self.los, i) - 1)]
        first = lo + (i - lo) // self.batch * self.batch  # the batch the record left in
        return self.anchor + self.pace.due(first - lo)

    def observe(self, records: Sequence[tuple[Any, Any, Any]]) -> None:
        """Sample the latency of records a sink outputs now."""
        if not self.enabled or not records:
            return
        n = len(records)
        skip = (-self.count) % self.stride  # systematic sampling across batches
        self.count += n
        if skip >= n:
            return
        now = time.monotonic()
        got = [(now, now - self.due(r[2])) for r in records[skip::self.stride]]
        with self.lock:
            self.samples.extend(got)
            if len(self.samples) > MAX_PENDING:
                self.samples = self.samples[::2]
                self.stride *= 2

    def drain(self) -> list[tuple[float, float]]:
        with self.lock:
            out, self.samples = self.samples, []
        return [(round(t, 4), round(v, 4)) for t, v in out]


class LatencyLog:
    """The driver's latency samples of a whole run, as compact columns.

    A long run gathers hundreds of thousands of samples; as tuples of Python objects they
    took ~150 bytes each and were most of the driver's memory growth in a 20-minute soak.
    Columns take 18: an instance index and two doubles. With ``spill`` (a file), columns
    past ``keep`` samples are written out as a chunk, so memory holds a bounded tail.
    Heartbeat readers add from several threads, hence the lock (the columns must stay
    aligned).
    """

    def __init__(self, spill: Path | None = None, keep: int = LATENCY_KEEP) -> None:
        self.names: list[str] = []
        self._index: dict[str, int] = {}
        self.which = array("H")
        self.t = array("d")
        self.v = array("d")
        self.lock = threading.Lock()
        self.keep = keep
        self._file = ChunkFile(spill) if spill is not None else None

    def add(self, iid: str, samples: Sequence[tuple[float, float]]) -> None:
        with self.lock:
            i = self._index.setdefault(iid, len(self.names))
            if i == len(self.names):
                self.names.append(iid)
            self.which.extend([i] * len(samples))
            self.t.extend(t for t, _ in samples)
            self.v.extend(v for _, v in samples)
            if self._file is not None and len(self.t) > self.keep:
                self._file.append((self.which, self.t, self.v), records=len(self.t))
                self.which, self.t, self.v = array("H"), array("d"), array("d")

    def __len__(self) -> int:
        return (self._file.records if self._file is not None else 0) + len(self.t)

    def rows(self, t0: float = 0.0) -> list[tuple[str, float, float]]:
        """(sink instance, time since ``t0``, seconds), in the order they arrived."""
        with self.lock:
            chunks = [*(self._file or ()), (self.which, self.t, self.v)]
            return [(self.names[i], round(t - t0, 4), v)
                    for which, ts, vs in chunks
                    for i, t, v in zip(which, ts, vs, strict=True)]
