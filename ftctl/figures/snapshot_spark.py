"""Paper 003's snapshot-frequency study on the Spark host (``--host spark``).

Scaled to a 2-core machine: every operator runs at most ``PARALLELISM`` instances (one
Spark task each), ``events`` defaults to 150,000 (``--quick``: 20,000 events of wordcount
at one interval), and the default workloads are Nexmark Q1 (stateless: filter and map),
Q5 (two keyed sliding windows) and wordcount. Per workload:

- **unpaced, fault-free**, for ``none`` and ``checkpoint`` at each interval (10, 100,
  1000 ms): the sources emit as fast as the tasks take it. Throughput is input records
  over the time from go to the last record (``records_per_s`` of a run; wordcount's
  records are lines of 8 words); its overhead is ``1 - throughput / none's``. Snapshot
  bytes are the bytes this run persisted.
- **paced, one kill**, for ``checkpoint`` at each interval: ``PACED_SECONDS`` of input at
  ``PACE`` x none's unpaced throughput (so no interval saturates the tasks), and one task,
  the same instance for every interval, is killed halfway through. Latency p50/p99 are
  the sinks' output latencies from the first output + 1 s warm-up to the kill (``ftctl
  compare``'s steady window; a Spark run samples latency only when paced); recovery time
  is the recovery report's (kill until the output latency is back within 10% of the
  pre-fault baseline; none when the run ends first), and first output the time from the
  kill to the first output after it.

Every run is a normal run directory under ``<out>/runs`` (verified against the golden run
and the oracle). A cluster is started for the study and torn down after, unless
``--opt master=spark://...`` names a running one.
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from chaos.plan import Schedule
from chaos.schedule import PlannedFault, fault_seed
from ftctl.compare.figures import steady_window
from ftctl.config.errors import ConfigError
from ftctl.config.load import load_topology
from ftctl.config.topology import Topology
from ftctl.console import console
from ftctl.run.capture import Capture
from ftctl.run.chaos import ChaosExtension, expected_seconds
from ftctl.run.execute import SLOTS_PER_INSTANCE, RunContext, RunExtension, RunRequest, execute
from ftctl.runtime.graph import ExecutionGraph
from ftctl.spark.host import HostResult
from protocols.registry import PROTOCOLS

from . import FigureOptions, FigureResult
from .spark_points import WORKERS, run_point, warm_cluster

WORKLOADS = ("q1", "q5", "wordcount")
INTERVALS = ("0.01", "0.1", "1.0")
EVENTS = 150_000
QUICK_EVENTS = 20_000
PARALLELISM = 2  # per operator: q5 is 11 tasks, not 25, on two cores
# Paced runs emit at this share of none's unpaced throughput. A short unpaced run overstates
# what the tasks sustain (start-up and the last heartbeat dominate it): at 0.5, Q1 at
# 150,000 events (1.25 s unpaced) saturated, its latency growing 1 s per second.
PACE = 0.3
PACED_SECONDS = 12.0  # of input in a paced run: a kill at 6 s after a steady baseline
KILL_AT = 0.5  # of the paced run's expected length
RUN_TIMEOUT = 900.0

Runner = Callable[[RunRequest, RunExtension], int]


@dataclass
class SparkPoint:
    workload: str
    interval: str  # "none" (the protocol) or the checkpoint interval in seconds
    instances: int
    multi_input_channels: int
    throughput_rps: float  # unpaced, fault-free
    overhead: float | None  # 1 - throughput / none's
    snapshot_bytes: int  # persisted by the fault-free run
    rate_per_source: float | None  # of the paced run (none has none)
    latency_p50_ms: float | None  # paced run, before the kill
    latency_p99_ms: float | None
    recovery_s: float | None  # paced run, after the kill
    first_output_s: float | None  # paced run: kill to the first output after it
    exactly_once: bool  # both runs met the protocol's guarantee (none: promises nothing)
    runs: tuple[str, str]  # run ids: fault-free, kill


@dataclass
class Measured:
    """What one run showed."""

    run_id: str
    passed: bool
    records_per_s: float
    snapshot_bytes: int
    latencies: list[float]  # seconds, in the steady window
    recovery_s: float | None
    first_output_s: float | None = None


class _Measure(Capture):
    """Keeps the run's figures; with a kill schedule, runs the chaos extension too."""

    def __init__(self, chaos: ChaosExtension | None):
        super().__init__(chaos)
        self.measured: Measured | None = None

    def keep(self, ctx: RunContext, result: HostResult, summary: dict[str, Any]) -> None:
        shift = self.shift  # host clock -> the store's (fault times)
        recs = summary.get("recovery") or []
        samples = sorted((t + shift, lat) for _, t, lat in result.latency)
        first = samples[0][0] if samples else 0.0
        lo, hi = steady_window(first, [float(r["t_fault"]) for r in recs])
        recovered = [float(r["recovery_s"]) for r in recs if r.get("recovery_s") is not None]
        first_out = [float(r["first_output_s"]) for r in recs
                     if r.get("first_output_s") is not None]
        self.measured = Measured(
            run_id=ctx.store.run_id, passed=bool(summary.get("passed")),
            records_per_s=float(summary.get("records_per_s") or 0.0),
            snapshot_bytes=int(result.snapshot_bytes),
            latencies=[lat for t, lat in samples if lo <= t < hi],
            recovery_s=recovered[0] if recovered else None,
            first_output_s=first_out[0] if first_out else None)


def scaled(topology: Topology, events: int, workload: str) -> Topology:
    """The workload at ``events`` events with at most PARALLELISM instances per operator."""
    from .fig_003_snapshot_frequency import with_events

    ops = [op.model_copy(update={"parallelism": min(op.parallelism, PARALLELISM)})
           for op in topology.operators]
    return with_events(topology.with_operators(ops), events, workload)


def one_kill(graph: ExecutionGraph, duration: float, workload: str) -> Schedule:
    """A kill of one seeded task (the same for every interval) halfway through."""
    rng = random.Random(f"003-spark/{workload}")
    target = rng.choice([i for i in graph.order if i not in graph.sources])
    fault = PlannedFault(index=0, occurrence=0, type="kill-task", target=target,
                         at=round(KILL_AT * duration, 3), seed=fault_seed(1, 0, 0),
                         retarget=True)
    return Schedule([fault], "one-kill", 1, f"kill {target} at {KILL_AT:.0%} of the run")


def percentile_ms(values: Sequence[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000, 2)


def measure_workload(workload: str, topology: Topology, intervals: Sequence[str],
                     master: str, out: Path, runner: Runner | None = None,
                     say: Callable[[str], None] = console.print) -> list[SparkPoint]:
    from .fig_003_snapshot_frequency import multi_input_channels

    runner = runner or execute

    graph = ExecutionGraph(topology)
    multi = multi_input_channels(graph)
    points: list[SparkPoint] = []
    base: float | None = None

    def run(topo: Topology, interval: str, ext: _Measure, what: str) -> Measured | None:
        info = PROTOCOLS["none" if interval == "none" else "checkpoint"]
        params = info.resolve({} if interval == "none" else {"interval": float(interval)})
        say(f"{workload} / {'none' if interval == 'none' else f'checkpoint {interval} s'}: "
            f"{what}")
        request = RunRequest(topo, info, params, master=master, workers=WORKERS,
                             results=out, timeout=RUN_TIMEOUT, as_json=False, kind="figure",
                             quiet=True, config={"figure": "003-snapshot-frequency",
                                                 "interval": interval})
        assert runner is not None
        run_point(runner, request, ext)
        return ext.measured

    for interval in ("none", *intervals):
        clean = run(topology, interval, _Measure(None), "unpaced, fault-free")
        if clean is None or clean.records_per_s <= 0:
            # A run that did not finish is a point missing from the table, said here and
            # marked incomplete in its run directory; without none's there is no baseline.
            say(f"{workload} / {interval}: the fault-free run did not finish; point left out")
            if base is None:
                return points
            continue
        base = base or clean.records_per_s
        killed: Measured | None = None
        rate: float | None = None
        if interval != "none":
            paced, rate = paced_input(topology, base)
            seconds = expected_seconds(ExecutionGraph(paced))
            kill = one_kill(graph, seconds, workload)
            killed = run(paced, interval, _Measure(ChaosExtension(kill, seconds)),
                         f"paced at {rate:g}/s per source, {kill.source}")
        points.append(SparkPoint(
            workload, interval, len(graph.order), multi, round(clean.records_per_s, 1),
            None if interval == "none" else round(1 - clean.records_per_s / base, 4),
            clean.snapshot_bytes, rate,
            percentile_ms(killed.latencies, 0.5) if killed else None,
            percentile_ms(killed.latencies, 0.99) if killed else None,
            killed.recovery_s if killed else None,
            killed.first_output_s if killed else None,
            clean.passed and (interval == "none" or (killed is not None and killed.passed)),
            (clean.run_id, killed.run_id if killed else "")))
    return points


def paced_input(topology: Topology, base: float) -> tuple[Topology, float]:
    """``PACED_SECONDS`` of input at ``PACE`` x ``base`` records/s, and the per-source-instance
    rate (a source operator's records are split over its instances, each paced alone)."""
    instances = len(ExecutionGraph(topology).sources)
    rate = round(PACE * base / max(1, instances), 1)
    n_sources = sum(1 for op in topology.operators if op.type.startswith("source."))
    records = max(1, round(PACE * base * PACED_SECONDS / max(1, n_sources)))
    return topology.with_input(records=records, rate=rate), rate


def run_spark(options: FigureOptions) -> FigureResult:
    from .fig_003_snapshot_frequency import WORKLOADS as KNOWN
    from .fig_003_snapshot_frequency import positive_events, spearman, workload_list

    opts: Mapping[str, str] = options.options
    events = positive_events(opts, QUICK_EVENTS if options.quick else EVENTS)
    names = workload_list(opts, ("wordcount",) if options.quick else WORKLOADS)
    intervals = _intervals(opts.get("intervals"), ("0.1",) if options.quick else INTERVALS)
    topologies = {w: scaled(load_topology(KNOWN[w]), events, w) for w in names}
    out = options.out
    # Per worker: the slots of the largest workload, split over the workers.
    most = max(len(ExecutionGraph(t).order) for t in topologies.values())
    points: list[SparkPoint] = []
    with warm_cluster(opts.get("master"), -(-SLOTS_PER_INSTANCE * most // WORKERS),
                      "ftctl-003-") as master:
        for w in names:
            points += measure_workload(w, topologies[w], intervals, master, out / "runs")
    files = write_spark(points, out, events)
    summary = spark_summary(points, intervals, spearman)
    return FigureResult(
        title="003 snapshot-frequency study (Spark host, scaled to 2 cores)",
        header=("workload", "interval (s)", "tasks", "multi-input ch", "events/s",
                "overhead", "persisted (MB)", "p50 (ms)", "p99 (ms)", "recovery (s)",
                "first output (s)", "exactly-once"),
        rows=tuple(spark_row(p) for p in points), files=files, summary=summary,
        notes=(f"{events:,} events per workload (wordcount: lines of 8 words), at most "
               f"{PARALLELISM} tasks per operator, {WORKERS} workers; events/s unpaced and "
               f"fault-free; latency and recovery from a run paced at {PACE:g} x none's "
               f"throughput with one kill at {KILL_AT:.0%}.",
               *_shape_notes(summary)))


def spark_row(p: SparkPoint) -> tuple[Any, ...]:
    def num(v: float | None, fmt: str) -> str:
        return "-" if v is None else format(v, fmt)

    return (p.workload, p.interval, p.instances, p.multi_input_channels,
            num(p.throughput_rps, ",.0f"),
            "-" if p.overhead is None else f"{p.overhead * 100:.1f}%",
            f"{p.snapshot_bytes / 1e6:.2f}", num(p.latency_p50_ms, ".1f"),
            num(p.latency_p99_ms, ".1f"), num(p.recovery_s, ".2f"),
            num(p.first_output_s, ".2f"), "yes" if p.exactly_once else "NO")


def spark_summary(points: Sequence[SparkPoint], intervals: Sequence[str],
                  spearman: Callable[[list[float], list[float]], float]) -> dict[str, Any]:
    """Points, whether every run held its guarantee, overhead per interval (median over
    workloads) and the rank correlation of overhead with multi-input channels."""
    out: dict[str, Any] = {"points": [asdict(p) for p in points],
                           "all_exactly_once": all(p.exactly_once for p in points)}
    out["median_overhead"] = {
        i: statistics.median(ov) if (ov := [p.overhead for p in points
                                            if p.interval == i and p.overhead is not None])
        else None for i in intervals}
    shortest = min(intervals, key=float, default=None)
    at = [p for p in points if p.interval == shortest and p.overhead is not None]
    if len(at) >= 3:
        out["spearman_overhead_vs_multi_input"] = spearman(
            [float(p.overhead or 0.0) for p in at], [float(p.multi_input_channels) for p in at])
    return out


def _shape_notes(summary: Mapping[str, Any]) -> tuple[str, ...]:
    notes = ["Median overhead over workloads: " + ", ".join(
        f"{i} s {'-' if v is None else f'{v * 100:.1f}%'}"
        for i, v in summary["median_overhead"].items()) + "."]
    rho = summary.get("spearman_overhead_vs_multi_input")
    if rho is not None:
        notes.append(f"Rank correlation of overhead at the shortest interval with multi-input "
                     f"channels: {rho:.2f}.")
    return tuple(notes)


def _intervals(text: str | None, default: tuple[str, ...]) -> tuple[str, ...]:
    if text is None:
        return default
    out = tuple(i.strip() for i in text.split(","))
    for i in out:
        try:
            ok = 0 < float(i) < float("inf")
        except ValueError:
            ok = False
        if not ok:  # "off" has no meaning here: a Spark run this long takes no timer snapshot
            raise ConfigError("--opt", "intervals",
                              f"{i!r} is not a positive number of seconds")
    return out


def write_spark(points: Sequence[SparkPoint], out: Path, events: int) -> tuple[Path, ...]:
    from .fig_003_snapshot_frequency import plot_by_interval, write_tables

    out.mkdir(parents=True, exist_ok=True)
    js, cv = write_tables([asdict(p) for p in points], out, "results-spark", {
        "events": events, "parallelism": PARALLELISM, "pace": PACE, "kill_at": KILL_AT})
    png = out / "snapshot-frequency-spark.png"
    panels: list[tuple[str, Callable[[SparkPoint], float | None]]] = [
        ("throughput overhead vs none (%)",
         lambda p: None if p.overhead is None else p.overhead * 100),
        ("latency p99 before the kill (ms)", lambda p: p.latency_p99_ms),
        ("persisted MB", lambda p: p.snapshot_bytes / 1e6),
        ("recovery after one kill (s)", lambda p: p.recovery_s)]
    plot_by_interval(points, panels, png, width=15, x=float, xlabel="snapshot interval (s)",
                     title=f"003 snapshot frequency on Spark ({events:,} events, <= "
                           f"{PARALLELISM} tasks per operator)")
    return js, cv, png
