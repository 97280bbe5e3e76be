"""Schedules spread over several processes (``ftctl sim -j N``) or any other executor.

A schedule is a pure function of its seed and the run's inputs, so it can run anywhere
that can rebuild the ``Simulator``: a ``SimJob`` carries those inputs in picklable form
(the protocol by name: a spec holds lambdas that do not pickle), each process rebuilds
the simulator once, and only ``ScheduleRecord``s travel back. The parent folds them in
seed order, so the summary is the same whether the schedules ran in one process, in N,
or on a Spark cluster (``ftctl.run.simspread``); the first violating schedule is re-run
in the parent for its divergences, which a record does not carry.
"""

from __future__ import annotations

import contextlib
import gc
import multiprocessing
import os
import signal
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from multiprocessing.pool import Pool
from typing import TYPE_CHECKING

from ftctl.config.topology import Topology
from ftctl.lifetime import die_with_parent
from ftctl.sim.faults import CRASH_ONLY, FaultKind
from ftctl.sim.runner import ScheduleRecord, SimSummary, Simulator
from protocols.contract.params import ProtocolParams
from protocols.contract.spec import Guarantee
from protocols.registry import get_protocol

if TYPE_CHECKING:
    from ftctl.sim.scenario import SimScenario

# Seeds per unit of work: big enough that dispatch costs little next to ~20 ms per
# schedule, small enough that two processes finish within a chunk of each other.
CHUNK = 8


@dataclass(frozen=True)
class SimJob:
    """Everything a process needs to rebuild the ``Simulator`` of a ``ftctl sim`` run."""

    topology: Topology
    protocol: str  # a registry name or a shipped mutant, ``checkpoint/commit-early``
    given: ProtocolParams
    guarantee: Guarantee | None = None
    max_failures: int = 3
    max_burst: int = 3
    kinds: tuple[FaultKind, ...] = CRASH_ONLY
    scenario: SimScenario | None = None
    during: str | None = None  # phase-triggered schedules (``--during``)

    def simulator(self) -> Simulator:
        return Simulator(self.topology, get_protocol(self.protocol), self.given,
                         self.guarantee, self.max_failures, self.max_burst, self.kinds,
                         self.scenario, self.during)


# One simulator per process and job: rebuilding it (golden and fault-free runs) per chunk
# would cost as much as a schedule or two each time.
_cached: tuple[SimJob, Simulator] | None = None


def simulator_for(job: SimJob) -> Simulator:
    global _cached
    if _cached is None or _cached[0] != job:
        _cached = (job, job.simulator())
    return _cached[1]


def run_seeds(job: SimJob, seeds: Iterable[int]) -> list[ScheduleRecord]:
    """The records of ``seeds``' schedules, in order (what a worker or executor runs)."""
    sim = simulator_for(job)
    return [sim.run_record(seed) for seed in seeds]


def spread(first: int, n: int, processes: int) -> list[range]:
    """The chunks ``processes`` processes share, shrinking toward the end (guided
    self-scheduling): each is at most ``CHUNK`` seeds and at most a share of what is
    left, so the last ones are single seeds. A process takes the next chunk when it is
    done with one, and schedules differ in length by their faults (a Nexmark q1 schedule
    under causal took 1.5 to 3 s): with chunks of equal size the processes ended up to a
    chunk apart, with these at most a schedule apart."""
    out: list[range] = []
    start, end = first, first + n
    while start < end:
        size = max(1, min(CHUNK, -(-(end - start) // (2 * processes))))
        out.append(range(start, start + size))
        start += size
    return out


def fold(sim: Simulator, batches: Iterable[Sequence[ScheduleRecord]],
         progress: Callable[[int], None] | None = None,
         fail_fast: bool = False) -> SimSummary:
    """Fold record batches (given in seed order) into a summary, as ``run_many`` would:
    with ``fail_fast`` it ends at the first violating seed, schedules after it ignored."""
    summary = SimSummary()
    for batch in batches:
        for record in batch:
            summary.add(record)
            if fail_fast and not record.passed:
                break
        if progress:
            progress(summary.schedules)
        if fail_fast and summary.failing_seeds:
            break
    if summary.failing_seeds:
        summary.first_failure = sim.run_one(summary.failing_seeds[0])
    return summary


def start_method() -> str:
    """``fork`` while this process runs no other thread, else ``spawn``.

    Forked workers start with the parent's simulator (its golden and fault-free runs and
    its memo of batches), copied on write: spawned ones build their own, which on the
    Nexmark files took a few seconds each before the first schedule. A fork copies other
    threads' locks as they are at that instant, so with a thread running (a progress
    display) the workers are spawned.
    """
    return "fork" if threading.active_count() == 1 else "spawn"


@contextlib.contextmanager
def local_pool(sim: Simulator, job: SimJob, processes: int,
               method: str | None = None) -> Iterator[Pool]:
    """``processes`` workers for ``job``'s schedules (``start_method`` unless ``method``
    says): they ignore Ctrl-C (the parent handles it and terminates the pool) and die with
    the parent even when it is SIGKILLed. Leaving terminates them."""
    global _cached
    method = method or start_method()
    ctx = multiprocessing.get_context(method)
    before = _cached
    if method == "fork":
        _cached = (job, sim)  # what the workers find: no build of their own
        gc.freeze()  # the collector never touches (so never copies) the shared pages
        init: Callable[..., None] = tied_to_parent
        args: tuple[object, ...] = (os.getpid(),)
    else:
        init, args = _worker_init, (os.getpid(), job)
    try:
        with ctx.Pool(processes, initializer=init, initargs=args) as pool:
            yield pool
    finally:
        if method == "fork":
            _cached = before
            gc.unfreeze()


def run_parallel(sim: Simulator, job: SimJob, n: int, first: int, processes: int,
                 progress: Callable[[int], None] | None = None,
                 fail_fast: bool = False, pool: Pool | None = None) -> SimSummary:
    """``sim.run_many(n, first)`` spread over ``processes`` local processes (1: in this
    one), or over ``pool``'s (``local_pool``, made before a progress display starts its
    thread, so that its workers can be forked)."""
    if processes <= 1:
        return sim.run_many(n, first, progress, fail_fast)
    work = spread(first, n, processes)
    with contextlib.ExitStack() as stack:
        if pool is None:
            pool = stack.enter_context(local_pool(sim, job, min(processes, len(work))))
        # ``imap`` yields in submission order: the fold sees seeds in order.
        batches: Iterator[list[ScheduleRecord]] = pool.imap(_run_chunk,
                                                            [(job, c) for c in work])
        return fold(sim, batches, progress, fail_fast)


def _run_chunk(args: tuple[SimJob, range]) -> list[ScheduleRecord]:
    job, seeds = args
    return run_seeds(job, seeds)


def _worker_init(parent: int, job: SimJob) -> None:
    tied_to_parent(parent)
    # Build it now, not inside the first chunk's timing. If that fails, the first chunk
    # builds it again and its error reaches the parent: a worker that died here would be
    # replaced by the pool, which would fail the same way, forever.
    with contextlib.suppress(Exception):
        simulator_for(job)


def tied_to_parent(parent: int) -> None:
    """A pool worker's start: it ignores Ctrl-C (the parent handles it and terminates
    the pool), and the kernel kills it when its parent dies, SIGKILL included. The pool
    must be created by the parent's main thread, which lives as long as the parent."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    die_with_parent(parent, signal.SIGKILL)
