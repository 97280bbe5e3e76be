"""Garbage collection in a task process: off while records flow, run on a timer instead.

Records are tuples of atoms and never form reference cycles, but every tuple a frame
decodes counts towards the collector's allocation threshold, and the frames waiting in a
task's inbox survive into the older generations to be traversed again at every
collection. With automatic collection on, wordcount on the local cluster ran at about
70% of the rate it reaches without it (``benchmarks/spark_throughput.py``).

``ManualGC`` freezes what is alive when the task starts (modules, the task's payload:
never traversed again), turns automatic collection off, and collects on ``tick`` once
``every`` seconds have passed, so that the few cycles a task does make (caught
exceptions, finished threads) cannot pile up.

Each collection freezes what survived it. A full collection traverses every tracked
container alive, and a task's state can hold tens of millions of records (``lineage``
keeps every batch it sent, to resend them all): at 25M logged votes a collection held
the heartbeat thread, and the GIL, longer than the driver's heartbeat timeout, the task
was declared failed, and lineage's replay of 25M records brought the next false
detection within two minutes. Frozen, what was alive at one collection costs the next
nothing: each collection traverses only what was allocated since the last. The price:
a cycle alive at a collection that dies later is never freed. A task's long-lived
objects (state, logs, batches) hold records, not cycles, and the process ends with the
task.
"""

from __future__ import annotations

import gc
import time
from types import TracebackType


class ManualGC:
    def __init__(self, every: float):
        self.every = every
        self.due = 0.0
        self.collections = 0
        self._was_enabled = True

    def __enter__(self) -> ManualGC:
        self._was_enabled = gc.isenabled()
        gc.freeze()
        gc.disable()
        self.due = time.monotonic() + self.every
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        gc.unfreeze()
        if self._was_enabled:
            gc.enable()

    def tick(self, now: float) -> bool:
        """Collect if ``every`` seconds have passed since the last collection, then
        freeze what survived it."""
        if now < self.due:
            return False
        gc.collect()
        gc.freeze()
        self.collections += 1
        self.due = now + self.every
        return True
