"""Paper 003 (Noir snapshots): the snapshot-frequency study on the simulation host
(``--host spark``: ``snapshot_spark``, real runs scaled to this machine).

For each workload (Nexmark Q0-Q8 and wordcount) and each snapshot interval, one
fault-free run and one run with a single kill halfway through, all on
``CostedSimHost`` (ftctl/sim/costs.py), so that snapshots cost simulated time:

- execution time and its overhead against ``none`` (the paper's Figures 3-7 compare
  execution time with persistence on and off);
- visible latency at the sinks (arrival at the sink to visibility: a transactional
  sink makes output visible only when a snapshot completes), p50 and p99;
- snapshots taken and encoded bytes persisted;
- after the kill: the time the failure added and the records sent again.

``off`` is an interval longer than any run: no timer snapshot, only what the protocol
does at the end of the stream. Every point is checked exactly-once against the golden run.
The paper gives the shape of these curves, not figure data: overhead falls as the interval
grows and is higher for queries whose operators receive from several upstream instances
(``multi-input channels`` here). Options: ``events=N`` (default 1,000,000; ``--quick``
20,000), ``workloads=q1,q4,wordcount``, ``intervals=0.01,0.1,1.0,off``.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure as MplFigure

from ftctl.config.errors import ConfigError
from ftctl.config.load import load_topology
from ftctl.config.topology import Topology
from ftctl.runtime.graph import ExecutionGraph
from ftctl.sim.costs import CostedSimHost, CostModel, percentile
from ftctl.sim.faults import FailureSchedule, Strike
from ftctl.sim.golden import golden_output
from ftctl.sim.runner import sim_params
from ftctl.verify.checker import verify
from protocols.contract.view import GraphView
from protocols.registry import PROTOCOLS

from . import Figure, FigureOptions, FigureResult

ROOT = Path(__file__).resolve().parents[2]
WORKLOADS = {**{f"q{i}": ROOT / "topologies" / "nexmark" / f"q{i}.yaml" for i in range(9)},
             "wordcount": ROOT / "topologies" / "wordcount.yaml"}
INTERVALS = ("0.01", "0.1", "1.0", "off")
OFF_S = 1e9  # longer than any simulated run
WORDS_PER_LINE = 8  # wordcount's lines carry 8 words: events/8 lines ~ events words


@dataclass
class Point:
    workload: str
    interval: str  # "none" (the protocol), a float in seconds, or "off"
    exec_s: float
    overhead: float | None
    snapshots: int
    snapshot_bytes: int
    latency_p50_ms: float
    latency_p99_ms: float
    recovery_s: float | None
    reprocessed: int | None
    multi_input_channels: int
    exactly_once: bool


def with_events(topo: Topology, events: int, workload: str) -> Topology:
    records = max(1, events // WORDS_PER_LINE) if workload == "wordcount" else events
    return topo.with_input(records=records)


def multi_input_channels(graph: ExecutionGraph) -> int:
    """Input channels of instances that read more than one (003's multi-input operators)."""
    return sum(len(s.inputs) for s in graph.instances.values() if len(s.inputs) > 1)


def measure(workload: str, topo: Topology, intervals: tuple[str, ...],
            costs: CostModel) -> list[Point]:
    graph = ExecutionGraph(topo)
    golden = golden_output(graph)
    modes = topo.sink_modes()
    multi = multi_input_channels(graph)
    points: list[Point] = []
    base: float | None = None
    for interval in ("none", *intervals):
        name = "none" if interval == "none" else "checkpoint"
        protocol = PROTOCOLS[name]
        given = {} if interval == "none" else {
            "interval": OFF_S if interval == "off" else float(interval)}
        params = sim_params(graph, protocol, given)
        guarantee = protocol.guarantee_of(params, GraphView(graph))
        clean = CostedSimHost(graph, protocol, params, seed=0, costs=costs)
        result = clean.run()
        ok = result.complete and verify(modes, golden, result.outputs, guarantee).passed
        exec_s = clean.exec_s
        if base is None:
            base = exec_s
        recovery: float | None = None
        resent: int | None = None
        if interval != "none":
            # One kill halfway through the fault-free run's events, at a seeded instance.
            half = FailureSchedule([Strike(at_event=max(1, result.stats.events // 2), count=1)])
            killed = CostedSimHost(graph, protocol, params, seed=1, costs=costs, schedule=half)
            kr = killed.run()
            ok = ok and kr.complete and verify(modes, golden, kr.outputs, guarantee).passed
            recovery = max(0.0, killed.exec_s - exec_s)
            resent = max(0, kr.stats.records_sent - result.stats.records_sent)
        points.append(Point(
            workload, interval, round(exec_s, 6),
            None if interval == "none" else round(exec_s / base - 1, 4),
            len(clean.refs), clean.persisted_bytes,
            round(percentile(clean.latencies, 0.5) * 1000, 3),
            round(percentile(clean.latencies, 0.99) * 1000, 3),
            None if recovery is None else round(recovery, 6), resent, multi, ok))
    return points


def spearman(xs: list[float], ys: list[float]) -> float:
    """Spearman's rank correlation (average ranks for ties); nan if either side is flat."""
    def ranks(v: list[float]) -> list[float]:
        order = sorted(range(len(v)), key=v.__getitem__)
        out = [0.0] * len(v)
        i = 0
        while i < len(order):
            j = i
            while j + 1 < len(order) and v[order[j + 1]] == v[order[i]]:
                j += 1
            for k in range(i, j + 1):
                out[order[k]] = (i + j) / 2
            i = j + 1
        return out
    rx, ry = ranks(xs), ranks(ys)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry, strict=True))
    sx = math.sqrt(sum((a - mx) ** 2 for a in rx))
    sy = math.sqrt(sum((b - my) ** 2 for b in ry))
    return cov / (sx * sy) if sx and sy else math.nan


def positive_events(opts: Mapping[str, str], default: int) -> int:
    """``events=N`` (a positive whole number) or ``default``."""
    text = opts.get("events", str(default))
    if not text.isdigit() or int(text) < 1:
        raise ConfigError("--opt", "events", f"{text!r} is not a positive whole number")
    return int(text)


def workload_list(opts: Mapping[str, str], default: tuple[str, ...]) -> list[str]:
    """``workloads=q1,q4,...`` (each one of WORKLOADS) or ``default``."""
    names = [w.strip() for w in opts.get("workloads", ",".join(default)).split(",")]
    unknown = [w for w in names if w not in WORKLOADS]
    if unknown:
        raise ConfigError("--opt", "workloads", f"unknown {', '.join(unknown)} "
                          f"(known: {', '.join(WORKLOADS)})")
    return names


def run(options: FigureOptions) -> FigureResult:
    if options.host == "spark":
        from .snapshot_spark import run_spark

        return run_spark(options)
    opts: Mapping[str, str] = options.options
    events = positive_events(opts, 20000 if options.quick else 1000000)
    names = workload_list(opts, tuple(WORKLOADS))
    intervals = tuple(i.strip() for i in opts.get("intervals", ",".join(INTERVALS)).split(","))
    for i in intervals:
        if i != "off" and not _positive(i):
            raise ConfigError("--opt", "intervals", f"{i!r} is neither a positive number "
                              "of seconds nor off")
    costs = CostModel()
    points: list[Point] = []
    for w in names:
        points += measure(w, with_events(load_topology(WORKLOADS[w]), events, w),
                          intervals, costs)
    options.out.mkdir(parents=True, exist_ok=True)
    files = _write(points, options.out, costs, events)
    rows = tuple((p.workload, p.interval, f"{p.exec_s:.3f}",
                  "-" if p.overhead is None else f"{p.overhead * 100:.1f}%",
                  p.snapshots, f"{p.snapshot_bytes / 1e6:.2f}",
                  f"{p.latency_p50_ms:.1f}", f"{p.latency_p99_ms:.1f}",
                  "-" if p.recovery_s is None else f"{p.recovery_s:.3f}",
                  "-" if p.reprocessed is None else p.reprocessed,
                  p.multi_input_channels, "yes" if p.exactly_once else "NO")
                 for p in points)
    summary = _summary(points, intervals)
    notes = [costs.describe() + ".",
             f"{events:,} events per workload (wordcount: {WORDS_PER_LINE} words per line); "
             "one kill of a seeded instance at half the fault-free run's events."]
    if summary.get("spearman_overhead_vs_multi_input") is not None:
        notes.append("Rank correlation of overhead at the shortest interval with multi-input "
                     f"channels: {summary['spearman_overhead_vs_multi_input']:.2f}.")
    return FigureResult(
        title="003 snapshot-frequency study (simulation host, costs modelled)",
        header=("workload", "interval (s)", "exec (s)", "overhead", "snapshots",
                "persisted (MB)", "visible p50 (ms)", "visible p99 (ms)",
                "kill adds (s)", "records resent", "multi-input ch", "exactly-once"),
        rows=rows, files=files, summary=summary, notes=tuple(notes))


def _positive(text: str) -> bool:
    try:
        return float(text) > 0 and math.isfinite(float(text))
    except ValueError:
        return False


def _summary(points: list[Point], intervals: tuple[str, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {"points": [asdict(p) for p in points],
                           "all_exactly_once": all(p.exactly_once for p in points)}
    shortest = min((i for i in intervals if i != "off"), key=float, default=None)
    if shortest is not None:
        at = [p for p in points if p.interval == shortest and p.overhead is not None]
        if len(at) >= 3:
            out["spearman_overhead_vs_multi_input"] = spearman(
                [float(p.overhead or 0.0) for p in at],
                [float(p.multi_input_channels) for p in at])
    return out


def _x(interval: str) -> float:
    return 10.0 if interval == "off" else float(interval)


def write_tables(rows: list[dict[str, Any]], out: Path, stem: str,
                 meta: Mapping[str, Any]) -> tuple[Path, Path]:
    """``<stem>.json`` (``meta`` and the points) and ``<stem>.csv`` (the points)."""
    js = out / f"{stem}.json"
    js.write_text(json.dumps({**meta, "points": rows}, indent=2))
    cv = out / f"{stem}.csv"
    with cv.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]) if rows else ["workload"])
        writer.writeheader()
        writer.writerows(rows)
    return js, cv


def _write(points: list[Point], out: Path, costs: CostModel, events: int) -> tuple[Path, ...]:
    js, cv = write_tables([asdict(p) for p in points], out, "results", {
        "costs": asdict(costs), "cost_model": costs.describe(), "events": events})
    png = out / "snapshot-frequency.png"
    panels: list[tuple[str, Callable[[Point], float | None]]] = [
        ("overhead vs none (%)", lambda p: (p.overhead or 0.0) * 100),
        ("persisted MB", lambda p: p.snapshot_bytes / 1e6),
        ("kill adds (s)", lambda p: p.recovery_s or 0.0)]
    plot_by_interval(points, panels, png, width=13, x=_x,
                     xlabel="snapshot interval (s); 10 = off",
                     title=f"003 snapshot frequency, simulation ({costs.describe()})")
    return js, cv, png


class ByInterval(Protocol):
    """A point of the study, on either host."""

    @property
    def workload(self) -> str: ...

    @property
    def interval(self) -> str: ...  # "none" (the protocol) or the snapshot interval


P = TypeVar("P", bound=ByInterval)


def plot_by_interval(points: Sequence[P], panels: Sequence[tuple[str, Callable[[P], float | None]]],
                     png: Path, *, width: float, x: Callable[[str], float], xlabel: str,
                     title: str) -> None:
    """One panel per (label, value), a line per workload over the intervals (``none``'s
    points left out, as are values that are None)."""
    fig = MplFigure(figsize=(width, 4.2), dpi=100)
    FigureCanvasAgg(fig)
    workloads = list(dict.fromkeys(p.workload for p in points))
    for n, (label, value) in enumerate(panels, start=1):
        ax = fig.add_subplot(1, len(panels), n)
        for w in workloads:
            mine = [(x(p.interval), value(p)) for p in points
                    if p.workload == w and p.interval != "none"]
            shown = [(a, b) for a, b in mine if b is not None]
            ax.plot([a for a, _ in shown], [b for _, b in shown], marker="o", label=w)
        ax.set_xscale("log")
        ax.set_xlabel(xlabel)
        ax.set_ylabel(label)
        ax.grid(True, alpha=0.3)
    fig.axes[0].legend(fontsize=7)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(png)


FIGURE = Figure(name="003-snapshot-frequency", paper="003",
                title="Snapshot interval vs overhead, latency, bytes and recovery (Nexmark)",
                hosts=("sim", "spark"), run=run)
