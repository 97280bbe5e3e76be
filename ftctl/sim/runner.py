"""Runs many seeded failure schedules and judges each against the golden run."""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ftctl.config.topology import Topology
from ftctl.kernel.piggyback import FIELDS as PIGGYBACK_FIELDS
from ftctl.kernel.piggyback import merge as merge_piggyback
from ftctl.runtime.graph import ExecutionGraph
from ftctl.runtime.memo import BatchMemo
from ftctl.sim.cluster import SimCluster
from ftctl.sim.faults import CRASH_ONLY, HANG_TIMEOUT, FailureSchedule, FaultKind, SimFault
from ftctl.sim.gcpolicy import PausedCollection
from ftctl.sim.golden import golden_output
from ftctl.sim.host import MAX_EVENTS, MAX_STEP, SimHost, SimResult, source_step
from ftctl.sim.nemesis import SimNemesis, drawn_faults, on_progress, phase_strike
from ftctl.sim.phase_faults import phase_problems
from ftctl.sim.recovery import FaultTimes, fault_times, summarize
from ftctl.sim.restores import Stage, restore_stages
from ftctl.sim.suspicions import CLOCK_PREFIX, false_suspicions
from ftctl.verify.checker import Verdict, index_by_key, record_counts, record_positions, verify
from protocols.contract.params import ProtocolParams, RunShape
from protocols.contract.spec import Guarantee, ProtocolSpec
from protocols.contract.view import GraphView

if TYPE_CHECKING:
    from ftctl.sim.scenario import SimScenario

SNAPSHOTS_PER_RUN = 8
# With node faults (``--faults ...,node``) a run has this many nodes, each with room for
# every instance twice over (as ``ftctl chaos`` sizes its workers), so a lost node's
# units restart on the others.
SIM_NODES = 3
# With staged capacity (``--faults staged``) a run has this many nodes with no spare slot
# between them (the instances, rounded up to a multiple of the nodes): what waits for a
# slot starts only as lost nodes return, one at a time.
STAGED_NODES = 4
STALL_FACTOR, STALL_FLOOR = 20, 100_000


def nominal_duration(graph: ExecutionGraph, max_step: float | None = None) -> float:
    """Simulated seconds the sources take to emit everything, without failures (on a
    host that shortens gaps to ``max_step``)."""
    batches = max(
        math.ceil((hi - lo) / graph.topology.input.batch)
        for lo, hi in (graph.source_range(s) for s in graph.sources)
    )
    return batches * source_step(graph.topology, max_step)


def sim_params(graph: ExecutionGraph, protocol: ProtocolSpec[Any],
               given: Mapping[str, Any] | ProtocolParams,
               max_step: float | None = None) -> ProtocolParams:
    """Protocol parameters for simulation (raises ``ParamError`` naming a bad one).

    ``"auto"`` values resolve against the simulated run's nominal length, so a periodic
    protocol acts several times per run whatever its length.
    """
    return protocol.resolve(given, RunShape(nominal_duration(graph, max_step),
                                            SNAPSHOTS_PER_RUN))


def refusals(params: ProtocolParams, topology: Topology) -> list[str]:
    """Why ``params``' protocol cannot run ``topology`` (one line each; none: it can)."""
    return params.check(GraphView(ExecutionGraph(topology)))


@dataclass
class ScheduleOutcome:
    seed: int
    result: SimResult
    verdict: Verdict


@dataclass(frozen=True)
class ScheduleRecord:
    """What a summary keeps of one schedule: small and picklable, so a schedule run in
    another process (``ftctl sim -j``) or on a Spark executor folds in like a local one."""

    seed: int
    failures: int
    faults: int
    delay: float  # simulated seconds the failures added to the run
    resent: int  # records sent beyond the fault-free run
    fallbacks: int
    violations: tuple[tuple[str, int], ...]  # anomaly kind -> count; empty when passed
    passed: bool
    # What the protocol put on the wire besides records (``ftctl.kernel.piggyback``):
    # batches sent, of them clock-only, meta bytes, the largest meta.
    piggyback: tuple[int, int, int, int] = (0, 0, 0, 0)
    # Each fault's recovery times (``ftctl.sim.recovery``), in the order they struck.
    recovery: tuple[FaultTimes, ...] = ()
    # With nodes: which queries came back with which returning capacity (``restores``).
    stages: tuple[Stage, ...] = ()
    # Why the protocol stopped the run safely (a stored object it could not trust); such
    # a schedule is neither a pass nor a violation (``passed`` is True: nothing wrong).
    stopped: str | None = None


@dataclass
class SimSummary:
    schedules: int = 0
    failures: int = 0  # instances lost: crashed, nodes lost, declared hung, fenced
    faults: int = 0  # faults of any kind that struck
    violations: Counter[str] = field(default_factory=Counter)
    failing_seeds: list[int] = field(default_factory=list)
    first_failure: ScheduleOutcome | None = None
    # Per schedule, against the fault-free run: simulated seconds the failures added to the
    # run, and records sent again. Deterministic for given seeds, so fit for a regression gate.
    delays: list[float] = field(default_factory=list)
    resent: list[int] = field(default_factory=list)
    # Whole-graph fallbacks the protocol logged, over all schedules (events named
    # ``*fallback``: causal's ``causal-fallback``, beyond f or without clocks).
    fallbacks: int = 0
    # Piggyback counts (``ftctl.kernel.piggyback``) over all schedules.
    piggyback: dict[str, int] = field(default_factory=lambda: dict.fromkeys(PIGGYBACK_FIELDS, 0))
    recovery: list[FaultTimes] = field(default_factory=list)  # every schedule's faults
    stages: tuple[Stage, ...] = ()  # the first schedule's (``ftctl.sim.restores``)
    # Schedules the protocol stopped safely, and why: counted apart from violations.
    stops: list[tuple[int, str]] = field(default_factory=list)

    def add(self, record: ScheduleRecord) -> None:
        """Fold in one schedule; callers add them in seed order, so the summary (its
        failing seeds, medians) does not depend on where the schedules ran."""
        self.schedules += 1
        self.failures += record.failures
        self.faults += record.faults
        self.delays.append(record.delay)
        self.resent.append(record.resent)
        self.fallbacks += record.fallbacks
        self.recovery.extend(record.recovery)
        if self.schedules == 1:
            self.stages = record.stages
        counts = dict(zip(PIGGYBACK_FIELDS, record.piggyback, strict=True))
        merged = merge_piggyback([self.piggyback, counts])
        self.piggyback = {k: merged[k] for k in PIGGYBACK_FIELDS}
        if record.stopped is not None:
            self.stops.append((record.seed, record.stopped))
        if not record.passed:
            self.failing_seeds.append(record.seed)
            self.violations.update(dict(record.violations))

    def piggyback_totals(self) -> dict[str, Any]:
        """Piggyback counts summed over the schedules, ``max`` the largest, with ``mean``
        bytes per batch."""
        return merge_piggyback([self.piggyback])

    def recovery_times(self) -> dict[str, dict[str, Any]]:
        """Per fault kind, the spread of its recovery times (``ftctl.sim.recovery``)."""
        return summarize(self.recovery)

    def medians(self) -> dict[str, float]:
        return {"recovery_delay_ms": round(_median(self.delays) * 1000, 3),
                "resent_records": _median([float(r) for r in self.resent])}

    @property
    def passed(self) -> bool:
        return not self.failing_seeds


def _counts(pb: Mapping[str, int]) -> tuple[int, int, int, int]:
    batches, clock_only, size, largest = (int(pb[k]) for k in PIGGYBACK_FIELDS)
    return batches, clock_only, size, largest


def _median(values: list[float]) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


class ScheduleCrashed(RuntimeError):
    """A schedule whose run raised: the protocol (or the host) broke, not only the output.

    Carries the seed so the caller can say how to replay it; picklable (``-j`` workers
    send it back).
    """

    def __init__(self, seed: int, what: str) -> None:
        super().__init__(seed, what)
        self.seed = seed
        self.what = what

    def __str__(self) -> str:
        return f"seed {self.seed}: {self.what}"


class Simulator:
    """Holds the golden output and runs schedules against it."""

    def __init__(self, topology: Topology, protocol: ProtocolSpec[Any],
                 given: Mapping[str, Any] | ProtocolParams,
                 guarantee: Guarantee | None = None, max_failures: int = 3, max_burst: int = 3,
                 kinds: tuple[FaultKind, ...] = CRASH_ONLY, scenario: SimScenario | None = None,
                 during: str | None = None, memo: bool = True):
        self.graph = ExecutionGraph(topology)
        # Every run (golden, fault-free, each schedule) makes the same source batches and
        # the same stateless work on them: made once (``ftctl.runtime.memo``). ``memo``
        # False makes them anew each run (tests and benchmarks compare the two).
        self.graph.memo = BatchMemo() if memo else None
        self.protocol = protocol
        # Idle time between paced batches is skipped (MAX_STEP): schedules cost what
        # their events cost, not their simulated seconds.
        self.params = sim_params(self.graph, protocol, given, MAX_STEP)
        self.guarantee = guarantee or protocol.guarantee_of(self.params, GraphView(self.graph))
        self.modes = topology.sink_modes()
        self.golden = golden_output(self.graph)
        self.golden_index = {s: index_by_key(out) for s, out in self.golden.items()}
        self.golden_counts = record_counts(self.golden, self.modes)
        self.golden_positions = record_positions(self.golden, self.modes)
        self.max_failures = max_failures
        self.max_burst = max_burst
        self.kinds = kinds
        self.scenario = scenario  # replayed by every run instead of a random schedule
        # A phase-triggered schedule (the kit's): a crash at an opening of this phase too,
        # and the run is judged on the phase contract as well.
        self.during = during
        self.queries = GraphView(self.graph).queries
        self.op_of = {i: spec.op for i, spec in self.graph.instances.items()}
        fault_free = SimHost(self.graph, protocol, self.params, 0, max_step=MAX_STEP).run()
        self.horizon = fault_free.stats.events
        # A run this many times longer than the fault-free one has stalled (a protocol
        # with timers, such as replica-ring's pings, never runs out of events).
        self.stall_after = min(MAX_EVENTS, max(STALL_FLOOR, STALL_FACTOR * self.horizon))
        self.fault_free_end = fault_free.end_time
        self.fault_free_records = fault_free.stats.records_sent

    def run_one(self, seed: int, trace: bool = False) -> ScheduleOutcome:
        # Paused for the whole schedule, its verdict included, and collected once its host
        # is gone: the host's state is full of cycles (units, ports, the nemesis), so a
        # collection while it lived kept every object of it for a later, older one, and
        # the next schedule, paused, ran beside all of it (ftctl/sim/gcpolicy.py).
        with PausedCollection():
            return self._run_one(seed, trace)

    def _run_one(self, seed: int, trace: bool) -> ScheduleOutcome:
        rng = random.Random(seed)
        drawn: dict[int, SimFault] = {}
        if self.scenario is None:
            drawn = drawn_faults(FailureSchedule.random(rng, self.horizon, self.max_failures,
                                                        self.max_burst, self.kinds).strikes)
        host = SimHost(self.graph, self.protocol, self.params, seed=rng.getrandbits(64),
                       trace=trace, hash_trace=trace,
                       max_events=self.stall_after, cluster=self.cluster(),
                       hang_timeout=self.scenario.hang_timeout if self.scenario else HANG_TIMEOUT,
                       max_step=MAX_STEP)
        if self.scenario is not None:
            self.scenario.install(host)
        else:  # the drawn faults and the kit's phase strike, through one engine
            faults = on_progress(drawn)
            if self.during is not None:
                faults.append(phase_strike(self.during, rng, len(drawn)))
            SimNemesis(host, faults, drawn=drawn, any_holder=True).install()
        result = host.run()
        host.release()
        verdict = verify(self.modes, self.golden, result.outputs, self.guarantee,
                         complete=result.complete, golden_index=self.golden_index,
                         stopped=result.stopped, golden_counts=self.golden_counts,
                         golden_positions=self.golden_positions)
        if self.during is not None:
            verdict.phases = phase_problems(result.events, self.protocol.phases,
                                            result.complete)
        if any(k.startswith(CLOCK_PREFIX) for k in self.kinds):  # no clock-made suspicion
            verdict.suspicions = false_suspicions(result.events)
        if self.protocol.checks is not None:  # the protocol's own promises about its history
            verdict.checks = {k: v for k, v in self.protocol.checks(result.events).items() if v}
        return ScheduleOutcome(seed, result, verdict)

    def run_record(self, seed: int) -> ScheduleRecord:
        """``run_reported``'s record alone, the outcome (its output above all) dropped
        before the collection that ends the schedule, which would otherwise walk every
        record of it (``ftctl/sim/gcpolicy.py``)."""
        with PausedCollection():
            try:
                outcome = self._run_one(seed, False)
            except Exception as exc:
                raise ScheduleCrashed(seed, f"{type(exc).__name__}: {exc}") from exc
            record = self.record(outcome)
            del outcome
        return record

    def run_reported(self, seed: int, trace: bool = False) -> ScheduleOutcome:
        """``run_one`` for a report: a run that raises (a protocol's own consistency check,
        a host error) becomes ``ScheduleCrashed``, naming the seed."""
        try:
            return self.run_one(seed, trace)
        except Exception as exc:
            raise ScheduleCrashed(seed, f"{type(exc).__name__}: {exc}") from exc

    def cluster(self) -> SimCluster | None:
        """A fresh cluster for one run when node faults are drawn or a scenario replayed;
        else none (no nodes)."""
        if self.scenario is not None:
            return self.scenario.cluster()
        if "staged" in self.kinds:
            return SimCluster.workers(STAGED_NODES, -(-len(self.graph.order) // STAGED_NODES))
        if "node" not in self.kinds:
            return None
        return SimCluster.workers(SIM_NODES, 2 * len(self.graph.order))

    def record(self, outcome: ScheduleOutcome) -> ScheduleRecord:
        result, stats = outcome.result, outcome.result.stats
        return ScheduleRecord(
            seed=outcome.seed, failures=stats.failures, faults=stats.injected,
            delay=max(0.0, result.end_time - self.fault_free_end),
            resent=max(0, stats.records_sent - self.fault_free_records),
            fallbacks=sum(1 for e in result.events if (e.note or "").endswith("fallback")),
            violations=tuple(sorted(outcome.verdict.totals().items())),
            passed=outcome.verdict.passed or outcome.verdict.stopped_safely,
            stopped=outcome.result.stopped if outcome.verdict.stopped_safely else None,
            piggyback=_counts(stats.piggyback.to_dict()),
            recovery=tuple(fault_times(result.events, result.output_times)),
            stages=tuple(restore_stages(result.events, self.queries, self.op_of,
                                        result.end_time)))

    def run_many(self, n: int, seed: int, progress: Callable[[int], None] | None = None,
                 fail_fast: bool = False) -> SimSummary:
        summary = SimSummary()
        for i in range(n):
            record = self.run_record(seed + i)
            summary.add(record)
            if not record.passed and summary.first_failure is None:
                summary.first_failure = self.run_one(seed + i)  # the same run again
            if progress:
                progress(i + 1)
            if fail_fast and summary.failing_seeds:
                break
        return summary
