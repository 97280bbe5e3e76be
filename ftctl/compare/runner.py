"""Runs every protocol on one recorded fault schedule, K times each, on one cluster.

The first run executes the scenario (or ``--kill N``) and records its schedule; every run
after it, the first protocol's repeats included, replays that record, so all protocols
face the same faults at the same offsets into the run. Task-level faults share one
cluster for all runs; faults that kill workers get a fresh cluster per run, since a run
would leave the next one fewer workers.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chaos.plan import CLUSTER_FAULTS, Schedule
from ftctl.backends import make_cluster
from ftctl.cluster import LocalCluster
from ftctl.cluster.labels import expand_labels
from ftctl.compare.figures import (
    ProtocolFigures,
    RunFigures,
    add_overheads,
    steady_figures,
    summarize,
)
from ftctl.compare.traffic import messages_of, per_record, takeover_times
from ftctl.config.scenario import parse_target
from ftctl.config.topology import Topology
from ftctl.kernel.history import read_history
from ftctl.metrics.runreport import build_series
from ftctl.report.views import NO_GUARANTEE, no_guarantee_words
from ftctl.run.capture import Capture
from ftctl.run.chaos import ChaosExtension, expected_seconds, from_replay
from ftctl.run.execute import (
    DEFAULT_SPARES,
    SLOTS_PER_INSTANCE,
    RunContext,
    RunRequest,
    execute,
)
from ftctl.runtime.graph import ExecutionGraph
from ftctl.spark import wire
from ftctl.spark.host import HostResult
from ftctl.spark.standby import standby_pool
from protocols.contract.view import GraphView
from protocols.registry import Protocol


class CaptureExtension(Capture):
    """Runs the chaos extension and keeps what compare needs from the run."""

    def __init__(self, inner: ChaosExtension):
        super().__init__(inner)
        self.figures: RunFigures | None = None
        self.latency: list[tuple[float, float]] = []

    def keep(self, ctx: RunContext, result: HostResult, summary: dict[str, Any]) -> None:
        shift = self.shift  # host clock -> the run store's clock (events, faults)
        recs = summary.get("recovery") or []
        self.latency = [(t + shift, lat) for _, t, lat in result.latency]
        # The series the report plots (recovery.json), so its table and plots agree.
        series = build_series(result.latency, result.metrics, ctx.graph.sinks, shift)
        throughput, latency = steady_figures(series.throughput, series.latency_p50,
                                             [float(f["t_fault"]) for f in recs])
        anomalies = summary.get("anomalies") or {}
        self.figures = RunFigures(
            run_id=ctx.store.run_id, protocol=ctx.request.info.name,
            passed=bool(summary.get("output_passed", summary.get("passed"))),
            lost=int(anomalies.get("lost", 0)), duplicated=int(anomalies.get("duplicated", 0)),
            detection_s=_median_of(recs, "detection_s"), restart_s=_median_of(recs, "restart_s"),
            recovery_s=_median_of(recs, "recovery_s"),
            first_output_s=_median_of(recs, "first_output_s"),
            throughput_rps=throughput, latency_p50_s=latency,
            records_processed=_records_processed(result),
            snapshot_bytes=result.snapshot_bytes, restarts=result.restarts,
            seconds=round(result.seconds, 3),
            replayed=sum(int(e.data["records"]) for e in read_history(result.events)
                         if e.kind == "source-rewound"),
            takeover_s=_median(takeover_times(ctx.store.read_history())),
            messages=messages_of(result.stats),
            messages_per_record=per_record(messages_of(result.stats),
                                           sum(len(v) for v in result.outputs.values())),
            breakdown=dict(min(recs, key=lambda r: r["t_fault"]).get("breakdown") or {})
            if recs else {})


def _median(xs: list[float]) -> float | None:
    return round(statistics.median(xs), 3) if xs else None


def _median_of(recs: list[dict[str, Any]], key: str) -> float | None:
    xs = sorted(float(r[key]) for r in recs if r.get(key) is not None)
    if not xs:
        return None
    mid = len(xs) // 2
    return xs[mid] if len(xs) % 2 else (xs[mid - 1] + xs[mid]) / 2


def _records_processed(result: HostResult) -> int:
    """Records every instance received, over all its incarnations (replays included)."""
    last: dict[str, int] = {}
    for row in result.metrics:
        last[row["instance"]] = int(row.get("total_in", row["records_in"]))
    return sum(last.values()) if last else sum(result.records_in.values())


@dataclass
class Comparison:
    topology: str
    schedule: str
    repeat: int
    protocols: list[ProtocolFigures] = field(default_factory=list)
    runs: list[RunFigures] = field(default_factory=list)
    latency: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    recorded_from: str = ""
    failed_runs: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"topology": self.topology, "schedule": self.schedule, "repeat": self.repeat,
                "recorded_from": self.recorded_from, "failed_runs": self.failed_runs,
                "protocols": [p.to_json() for p in self.protocols],
                "runs": [r.to_json() for r in self.runs]}


@dataclass
class CompareRequest:
    topology: Topology
    schedule: Schedule
    protocols: list[Protocol]
    params: dict[str, dict[str, Any]]
    repeat: int
    workers: int
    labels: list[str] | None
    results: Path
    timeout: float
    state_dir: Path
    backend: str = "local"
    spares: int | None = DEFAULT_SPARES
    start: str = "slot"
    verbose: bool = False
    bind: str = wire.HOST  # the control channel's listen address
    store: str | None = None  # snapshot store location (default: in each run's directory)
    master: str | None = None  # a running cluster every run attaches to (none started)


def needs_own_cluster(schedule: Schedule) -> bool:
    return any(p.type in CLUSTER_FAULTS or parse_target(p.target).kind == "selector"
               for p in schedule.faults)


def run_comparison(req: CompareRequest, say: Callable[[str], None],
                   step: Callable[[str], None] | None = None) -> Comparison:
    """``say`` prints a line that stays; ``step`` updates a live progress line."""
    step = step or say
    graph = ExecutionGraph(req.topology)
    duration = expected_seconds(graph)
    cores = SLOTS_PER_INSTANCE * len(graph.order)
    comp = Comparison(req.topology.name, req.schedule.name, req.repeat)
    # Every run on the same standby pool, sized for the cluster's failure domains (a
    # shared cluster is given to the runs as a master URL, which would give them one).
    # (On --master the run sizes it as `ftctl chaos --master` does: the shape is not ours.)
    spares = (req.spares if req.spares is not None or req.master is not None
              else standby_pool(len(graph.order), expand_labels(req.labels, req.workers)))
    shared: LocalCluster | None = None
    try:
        if req.master is None and not needs_own_cluster(req.schedule):
            # Its own state dir: a cluster the user keeps warm with `cluster up` is not ours.
            shared = make_cluster(req.backend, workers=req.workers, cores=cores,
                                  labels=req.labels, state_dir=req.state_dir, owned=True)
            say("starting one cluster for every run")
            shared.up(progress=step)
        schedule = req.schedule
        total = len(req.protocols) * req.repeat
        done = 0
        for info in req.protocols:
            runs: list[RunFigures] = []
            declared = info.guarantee_of(info.resolve(req.params.get(info.name, {})),
                                         GraphView(graph))
            for k in range(req.repeat):
                done += 1
                say(f"run {done}/{total}: {info.name} (repeat {k + 1}/{req.repeat})")
                prefix = f"[{done}/{total}] "
                capture = CaptureExtension(ChaosExtension(schedule, duration))
                request = RunRequest(
                    req.topology, info, info.resolve(req.params.get(info.name, {})),
                    master=shared.master_url if shared else req.master, workers=req.workers,
                    results=req.results, timeout=req.timeout, as_json=False,
                    backend=req.backend, labels=req.labels, cores=cores, kind="compare",
                    quiet=True, spares=spares, start=req.start, verbose=req.verbose, bind=req.bind,
                    store=req.store,
                    live=_prefixed(step, prefix),
                    work_dir=shared.work_dir if shared else None,
                    config={"chaos": {"schedule": schedule.source, "name": schedule.name,
                                      "seed": schedule.seed}})
                execute(request, capture)
                if capture.figures is None:
                    comp.failed_runs.append(f"{info.name}#{k + 1}")
                    say(f"  {info.name}: the run did not finish")
                    continue
                say(f"  {info.name}: {_outcome(capture.figures, declared.value)}")
                runs.append(capture.figures)
                comp.latency.setdefault(info.name, capture.latency)
                if not comp.recorded_from:
                    # Everyone after the first run replays exactly what it recorded.
                    comp.recorded_from = capture.figures.run_id
                    schedule, _ = from_replay(comp.recorded_from, req.results, graph.order)
            comp.runs += runs
            comp.protocols.append(summarize(info.name, declared.value, runs))
        add_overheads(comp.protocols)
        return comp
    finally:
        if shared is not None:
            shared.down()


def _outcome(f: RunFigures, guarantee: str) -> str:
    """One line after each run: its verdict in words and how long it took."""
    verdict = "passed" if f.passed else f"failed ({f.lost:,} lost, {f.duplicated:,} duplicated)"
    if guarantee == NO_GUARANTEE:
        verdict = no_guarantee_words({"lost": f.lost, "duplicated": f.duplicated})
    first = "" if f.first_output_s is None else f", output again {f.first_output_s:.2f} s"
    recovery = "" if f.recovery_s is None else f", recovered in {f.recovery_s:.2f} s"
    return f"{verdict}{first}{recovery}, {f.seconds:.0f} s"


def _prefixed(step: Callable[[str], None], prefix: str) -> Callable[[str], None]:
    return lambda msg: step(prefix + msg)
