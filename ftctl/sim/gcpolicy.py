"""Garbage collection during a simulated run: paused, with a valve, one collection after.

A simulated run allocates tens of millions of small containers (records, batches, events,
actions, snapshot blobs), nearly all freed by reference counting as soon as they are
used; few form cycles (about 14,000 objects a Nexmark q5 schedule under causal). With
automatic collection on, every 700 net allocations start a young collection, and the
survivors (the run's windows, payload logs, queued batches) are traversed again by every
older one: a third of the CPU of a q5 schedule under causal went there
(``benchmarks/sim_at_size.py``).

So ``SimHost.run`` turns automatic collection off for the run (``PausedCollection``) and
collects once when it ends; ``Simulator.run_one`` does the same around a whole schedule,
its verdict included. The cycles a run makes wait until then, unless the valve opens
first: ``check``, called every few thousand events, collects the young generation once
more than ``VALVE`` tracked objects were allocated, net, since the last collection, so a
run that makes cycles without end cannot take the machine's memory. Runs are the same
either way: collection frees memory, it never changes what a run does.

Where the collection at the end comes matters. A host's state is full of cycles (its
units, ports, nemesis): collected while the host still lives, all of it moves to an
older generation and waits there for a collection that comes far less often, while the
next schedule, paused, builds its own beside it (a q1 schedule's state is some 300 MB).
So a schedule is collected once its host is gone, and the end's collection takes the
second generation too, where a valve's collection put what it kept.

What that collection walks is every tracked object still in the young generations,
garbage or not, so what a schedule made is best freed before it by reference counting:
the host drops its units, its copy of the output and its store once the result is
taken (``SimHost.release``), protocol instances are no cycles of their own (their handler
tables hold functions, not bound methods; a core holds its logic's method weakly), and
a worker keeps a schedule's record, not its outcome (``Simulator.run_record``). A
Nexmark q0 schedule under lineage left 1-2 million objects to that collection (0.2-0.5
s); now a few hundred.

A caller that had collection off already (a process managing it itself, as Spark tasks
do with ``ftctl.spark.gcpolicy``) keeps it off, and no collection is made for it at the
end; the valve still opens.
"""

from __future__ import annotations

import gc
from types import TracebackType

# Net allocations of tracked objects between two collections of a run: about 200 MB of
# small containers, many runs' worth of cycles.
VALVE = 2_000_000
CHECK_EVERY = 4096  # events between two looks at the allocation count (a power of two)


class PausedCollection:
    """Automatic collection off inside ``with``; ``check`` is the valve."""

    def __init__(self) -> None:
        self.valve = VALVE  # read here, so that tests can lower it
        self._was_enabled = False

    def __enter__(self) -> PausedCollection:
        self._was_enabled = gc.isenabled()
        gc.disable()
        return self

    def check(self) -> None:
        """Collect the young generation if the run allocated more than the valve since the
        last collection."""
        if gc.get_count()[0] > self.valve:
            gc.collect(0)

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._was_enabled:
            gc.enable()
            # What a valve (this one's or a nested one's) kept alive went to the next
            # generation: a cycle partly there is only found by collecting that one too.
            gc.collect(1)
