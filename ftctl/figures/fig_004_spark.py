"""Paper 004 Fig. 5 scaled to this machine on Spark (``ftctl figure 004-fig5 --host spark``).

The paper's setup (most of the cluster lost at once, capacity back one node at a time,
queries restored by profit density) on a local standalone cluster: ``progressive-small``
(3 queries, 12 instances) on 3 workers of 5 cores (``rack=a``, ``rack=a``, ``rack=b``): the
survivor cannot take the lost instances, and one returning worker can hold one query.
``KILL_AT`` s after the topology runs, both ``rack=a`` workers die at once (the instances
on them with them); from ``RESTORE_AFTER`` s later they come back one at a time, ``GAP`` s
apart (``restore-capacity``, fixed gaps). Each protocol runs once on a cluster of its own,
with the same scenario:

- ``PRG``: progressive, profit density: every returning worker's cores go to the query
  with the most priority per core that fits (the kernel places restarts on free cores,
  ``ftctl/spark/capacity.py``);
- ``OPC (blocking)``: progressive with ``schedule=blocking``: nothing restarts until all
  failed instances fit;
- ``checkpoint``: global rollback, every instance restarted as one group.

Per run: when each query has all its instances running again (its failed instances'
start groups released: ``instance-running``), and from the sinks' output latency the
relative latency per query per ``Δ_T`` step (latency over the query's median latency in the
5 s before the loss) and the available queries (all instances running and the last RL
since then <= Θ, ``--opt threshold=``, 1.2). ``--quick``: PRG and OPC only, shorter run.
Run directories are kept under ``<out>/runs``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chaos.plan import from_scenario
from ftctl.config.load import load_topology
from ftctl.figures.fig5_plots import Curve, plot_fig5, threshold_of
from ftctl.kernel.history import HistoryEvent
from ftctl.metrics.queries import (
    QueryMetricsParams,
    available_over_time,
    before_fault,
    query_availability,
)
from ftctl.run.capture import Capture
from ftctl.run.chaos import ChaosExtension, expected_seconds, size_input
from ftctl.run.execute import RunContext, RunExtension, RunRequest, execute
from ftctl.runtime.graph import ExecutionGraph
from ftctl.runtime.queries import topology_queries
from ftctl.spark.host import HostResult
from protocols.registry import get_protocol

from . import FigureOptions, FigureResult
from .spark_points import run_point

TOPOLOGY = Path(__file__).resolve().parents[2] / "topologies" / "progressive-small.yaml"
# 5 cores: the 12 instances leave 3 free, and one returning worker can hold a query that
# lost its source and maps (5 instances); with 4 nothing fits before both are back.
WORKERS, CORES = 3, 5
LABELS = ["rack=a", "rack=a", "rack=b"]
KILLED = "rack=a"  # the group the kill takes and the restore brings back
RATE = 400.0  # records/s of the source: light enough for 2 cores with room to catch up
RUNS: tuple[tuple[str, str, dict[str, Any]], ...] = (
    ("PRG", "progressive", {}),
    ("OPC (blocking)", "progressive", {"schedule": "blocking"}),
    ("checkpoint", "checkpoint", {}),
)
RUN_TIMEOUT = 600.0


@dataclass(frozen=True)
class Setup:
    kill_at: float  # s after the topology runs
    restore_after: float  # s after the kill
    gap: float  # s between two returning workers
    tail: float  # s of input after the last worker's return

    @property
    def input_s(self) -> float:
        return self.kill_at + self.restore_after + 2 * self.gap + self.tail

    def returns(self) -> str:
        """When the workers are started again, s after the kill: ``restore-capacity``
        at ``restore_after``, its fixed gaps putting the first one ``gap`` after that."""
        killed = LABELS.count(KILLED)
        return " and ".join(f"{self.restore_after + k * self.gap:g}"
                            for k in range(1, killed + 1))

    def scenario(self) -> str:
        return (f"name: fig5-spark\ndescription: the {KILLED} workers die at {self.kill_at:g} s "
                f"and are started again one at a time, {self.returns()} s after it\n"
                "seed: 1\nfaults:\n"
                f"  - {{type: kill-group, at: {self.kill_at:g}, target: {KILLED}, window: 0.2}}\n"
                f"  - type: restore-capacity\n    at: {self.kill_at + self.restore_after:g}\n"
                f"    target: {KILLED}\n    params: {{mode: progressive, distribution: fixed, "
                f"scale: {self.gap:g}}}\n")


FULL = Setup(kill_at=6.0, restore_after=4.0, gap=8.0, tail=12.0)
QUICK = Setup(kill_at=5.0, restore_after=3.0, gap=6.0, tail=6.0)


@dataclass
class SparkRun:
    name: str
    passed: bool
    events: list[HistoryEvent]
    latency: dict[str, list[tuple[float, float]]]  # query (sink op) -> (t, s), event clock
    t_kill: float | None = None
    run_dir: str = ""


class _Keep(Capture):
    """The chaos run, plus what the figure reads: history, sink latency, kill time."""

    def __init__(self, chaos: ChaosExtension, name: str):
        super().__init__(chaos)
        self.run = SparkRun(name, False, [], {})

    def keep(self, ctx: RunContext, result: HostResult, summary: dict[str, Any]) -> None:
        shift = self.shift
        for iid, t, v in result.latency:
            self.run.latency.setdefault(iid.split("[", 1)[0], []).append((t + shift, v))
        self.run.events = ctx.store.read_history()
        self.run.passed = bool(summary.get("passed"))
        self.run.run_dir = str(ctx.store.path)
        self.run.t_kill = kill_time(self.run.events, shift)


def kill_time(events: Iterable[HistoryEvent], shift: float) -> float | None:
    """When the group kill's first worker died, on the event clock (its record is
    written after the last kill, a second or two later)."""
    for e in events:
        if e.kind == "fault-injected" and e.data.get("type") == "kill-group":
            kills = (e.data.get("details") or {}).get("kills") or []
            return float(kills[0]["t"]) + shift if kills else e.t
    return None


# ---------------------------------------------------------------------------- reading a run


@dataclass
class Timeline:
    """Per query, when it had all its instances running again after the loss."""

    back: dict[str, float | None]  # s after the kill; None: never (or never lost)
    up: dict[str, list[tuple[float, float]]]  # event-clock spans with every instance up
    started: list[float] = field(default_factory=list)  # worker processes started again
    arrivals: list[float] = field(default_factory=list)  # workers back, s after the kill
    # Workers offered to the protocol (a slot waits on each), s after the kill: the gap from
    # an arrival is Spark starting the new worker's executor and Python workers.
    offered: list[float] = field(default_factory=list)


def timeline(events: Sequence[HistoryEvent], queries: Mapping[str, frozenset[str]],
             operator_of: Mapping[str, str], t_kill: float, end: float) -> Timeline:
    """An instance is down from the ``failure-detected`` or ``instance-stopped`` naming it
    until a released start group (``instance-running``) names it; a query is up while none
    of its operators has an instance down."""
    down: set[str] = set()
    since: dict[str, float | None] = dict.fromkeys(queries, 0.0)
    up: dict[str, list[tuple[float, float]]] = {q: [] for q in queries}
    back: dict[str, float | None] = dict.fromkeys(queries)
    arrivals: list[float] = []
    offered: list[float] = []
    started: list[float] = []
    for e in events:
        if e.kind in ("failure-detected", "instance-stopped"):  # a global rollback stops all
            down |= set(e.data["instances"])
        elif e.kind == "instance-running":
            down -= set(e.data["instances"])
        elif (e.kind == "capacity-changed" and e.data.get("joined")
              and e.t > t_kill):
            arrivals += [round(e.t - t_kill, 3)] * len(e.data["joined"])
            continue
        elif (e.kind == "fault-step" and e.data.get("step") == "worker-started"
              and e.t > t_kill):
            started.append(round(e.t - t_kill, 3))
            continue
        elif e.kind == "capacity-warm" and e.t > t_kill:
            offered += [round(e.t - t_kill, 3)] * len(e.data.get("workers") or ())
            continue
        else:
            continue
        ops = {operator_of[i] for i in down}
        for q, q_ops in queries.items():
            start = since[q]
            if not (q_ops & ops) and start is None:
                since[q] = e.t
                if e.t > t_kill:
                    back[q] = round(e.t - t_kill, 3)
            elif q_ops & ops and start is not None:
                up[q].append((start, e.t))
                since[q] = None
    for q, start in since.items():
        if start is not None:
            up[q].append((start, end))
    return Timeline(back, up, started, arrivals, offered)


@dataclass
class Measured:
    run: SparkRun
    tl: Timeline
    t: list[float]  # step starts, s after the kill
    available: list[int]
    mean_rl: list[float | None]
    rl: dict[str, list[float | None]]

    def curve(self) -> Curve:
        return Curve(self.run.name, self.t, self.mean_rl, self.available)


def measure(run: SparkRun, graph: ExecutionGraph, metrics: QueryMetricsParams) -> Measured:
    assert run.t_kill is not None
    queries = {q.name: q.operators for q in topology_queries(graph.topology)}
    ops = {i: s.op for i, s in graph.instances.items()}
    points = [t for s in run.latency.values() for t, _ in s]
    end = max([*points, *(e.t for e in run.events)], default=run.t_kill)
    tl = timeline(run.events, queries, ops, run.t_kill, end)
    base = before_fault(run.latency, run.t_kill, metrics)
    start = min(points, default=run.t_kill)
    avail = query_availability({q: run.latency.get(q, []) for q in queries}, base, start, end,
                               metrics, t_fault=run.t_kill)
    available = available_over_time(avail, tl.up)
    return Measured(run, tl, [round(t - run.t_kill, 3) for t in avail.t], available,
                    avail.mean_rl, avail.rl)


# ---------------------------------------------------------------------------- the figure


Runner = Callable[[RunRequest, RunExtension], int]


def spark_level(options: FigureOptions, runner: Runner = execute) -> FigureResult:
    setup = QUICK if options.quick else FULL
    theta = threshold_of(options.options)
    metrics = QueryMetricsParams(threshold=theta, step=1.0, baseline_window=4.0)
    topo = size_input(load_topology(TOPOLOGY), int(RATE * setup.input_s), RATE)
    graph = ExecutionGraph(topo)
    out = options.out
    out.mkdir(parents=True, exist_ok=True)
    scenario = out / "fig5-spark-scenario.yaml"
    scenario.write_text(setup.scenario())
    duration = expected_seconds(graph)
    plan = RUNS[:2] if options.quick else RUNS
    done: list[Measured] = []
    for name, protocol, given in plan:
        info = get_protocol(protocol)
        schedule = from_scenario(scenario, graph.order, duration, None)
        keep = _Keep(ChaosExtension(schedule, duration), name)
        request = RunRequest(
            topo, info, info.resolve(given), master=None, workers=WORKERS,
            results=out / "runs", timeout=RUN_TIMEOUT, as_json=False, labels=LABELS,
            cores=CORES, kind="figure", quiet=True, spares=0,
            config={"figure": "004-fig5", "run": name, "scenario": setup.scenario()})
        run_point(runner, request, keep)
        if keep.run.t_kill is not None:
            done.append(measure(keep.run, graph, metrics))
    return _result(done, setup, theta, out)


def _result(done: list[Measured], setup: Setup, theta: float, out: Path) -> FigureResult:
    rows, summary = [], {}
    for m in done:
        back = {q: t for q, t in m.tl.back.items() if t is not None}
        times = sorted(back.values())
        curve = m.curve()
        after, peak = curve.first_available(), curve.peak_mean_rl()
        # "out2=48.6": a wrapped cell never parts a query from its time.
        order = " ".join(f"{q}={t:.1f}" for q, t in sorted(back.items(), key=lambda x: x[1]))
        rows.append((m.run.name, " ".join(f"{a:.1f}" for a in m.tl.started) or "-",
                     " ".join(f"{a:.1f}" for a in m.tl.arrivals) or "-",
                     " ".join(f"{a:.1f}" for a in m.tl.offered) or "-",
                     order or "-", f"{times[0]:.1f}" if times else "-",
                     f"{times[-1]:.1f}" if times else "-",
                     f"{after:.1f}" if after is not None else "-",
                     f"{peak:.1f}" if peak is not None else "-",
                     "yes" if m.run.passed else "NO"))
        summary[m.run.name] = {"run_dir": m.run.run_dir, "started": m.tl.started,
                               "arrivals": m.tl.arrivals,
                               "offered": m.tl.offered,
                               "back": m.tl.back, "t": m.t, "available": m.available,
                               "mean_rl": m.mean_rl, "rl": m.rl, "passed": m.run.passed}
    files = _plot(done, out, theta)
    notes = [f"3 workers x {CORES} cores, progressive-small at {RATE:g} records/s; both "
             f"rack=a workers killed {setup.kill_at:g} s in and started again one at a "
             f"time, {setup.returns()} s after the kill; Δ_T = 1 s, Θ = {theta:g}. Times "
             "are seconds after the kill: 'started' when ftctl started each worker's "
             "process again, 'capacity back' when the master saw it alive, 'offered' when "
             "a slot waited on it and the protocol was told (from 'capacity back', Spark "
             "starting its executor and Python workers)."]
    return FigureResult(
        title="004 Fig. 5 on Spark: 2 of 3 workers lost at once, back one at a time",
        header=("run", "started (s)", "capacity back (s)", "offered (s)", "query back (s)",
                "first back (s)", "all back (s)", "first available (s)", "peak mean RL",
                "exactly-once"),
        rows=tuple(rows), files=files, summary=summary, notes=tuple(notes))


def _plot(done: list[Measured], out: Path, threshold: float) -> tuple[Path, ...]:
    title = "Paper 004 Fig. 5 setup on Spark, scaled to 3 local workers"
    return plot_fig5([m.curve() for m in done],
                     (out / "fig5a-spark-relative-latency.png",
                      out / "fig5b-spark-available-queries.png"),
                     threshold=threshold, host="Spark", titles=(title, title),
                     max_available=3.5)
