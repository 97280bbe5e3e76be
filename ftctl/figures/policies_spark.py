"""001-policies on Spark (``ftctl figure 001-policies --host spark``).

The simulation figure's question, on real tasks: one local cluster (started here, torn
down after), one bundled topology, one kill of one task at a fixed time, the same
schedule under ``checkpoint`` (global rollback) and under falkirk with each policy mix.
A first fault-free run gives the records every instance receives without a failure; per
run the figure reads from the host's result and history:

- instances rolled back: incarnations started after the kill (``instance-started``) plus
  live instances rolled back in place (``instance-rolled-back`` that was not skipped);
- records replayed: records received by all instances, all incarnations, beyond the
  fault-free run (what re-execution and replay cost, whoever resent it);
- recovery: the kill to the sinks' output latency back within 10% of before it (the
  chaos report's ``recovery_s``), and detection;
- the exactly-once verdict against the golden run.

Options: ``topology=wordcount`` (bundled name), ``target=count[1]`` and ``at=3`` (the
task killed and when, s after the topology runs), ``records=N``, ``rate=R`` (records/s),
``mixes=default,firewall,...`` (``fig_001_policies.MIXES``), ``rollback=restart|in-place``
(falkirk's, for every mix). ``--quick``: the default and firewall mixes and a shorter
input. Run directories are kept under ``<out>/runs``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure as MplFigure

from chaos.plan import Schedule, from_scenario
from ftctl.compare.figures import RunFigures
from ftctl.compare.runner import CaptureExtension
from ftctl.config.errors import ConfigError
from ftctl.config.load import load_topology
from ftctl.config.topology import Topology
from ftctl.kernel.history import HistoryEvent
from ftctl.run.chaos import ChaosExtension, expected_seconds
from ftctl.run.execute import SLOTS_PER_INSTANCE, RunContext, RunExtension, RunRequest, execute
from ftctl.runtime.graph import ExecutionGraph
from ftctl.spark.host import HostResult
from ftctl.tables import seconds_cell
from protocols.registry import get_protocol

from . import FigureOptions, FigureResult, FigureRunFailed
from .spark_points import WORKERS, run_point, warm_cluster

ROOT = Path(__file__).resolve().parents[2]
BASELINE = "checkpoint"
FAULT_FREE = "fault-free"
RUN_TIMEOUT = 600.0
QUICK_MIXES = ("default", "firewall")


@dataclass(frozen=True)
class Setup:
    topology: str
    target: str
    at: float  # s after the topology runs
    records: int
    rate: float

    def scenario(self) -> str:
        return (f"name: policies-spark\ndescription: kill {self.target} {self.at:g} s in\n"
                "seed: 1\nfaults:\n  - type: kill-task\n"
                f"    at: {self.at:g}\n    target: '{self.target}'\n")


FULL = Setup("wordcount", "count[1]", 4.0, 30_000, 1500.0)
QUICK = Setup("wordcount", "count[1]", 3.0, 12_000, 1500.0)


@dataclass
class SparkRun:
    """One run under one configuration, as the figure reads it."""

    config: str  # "checkpoint", a falkirk mix, or "fault-free"
    passed: bool
    failures: int  # failures the coordinator detected
    restarted: int  # incarnations started after the first ones
    in_place: int  # live instances rolled back without a restart
    processed: int  # records received by every instance, all incarnations
    recovery_s: float | None
    detection_s: float | None
    run_id: str = ""

    @property
    def rolled_back(self) -> int:
        return self.restarted + self.in_place


def read_run(config: str, figures: RunFigures, events: Sequence[HistoryEvent]) -> SparkRun:
    """What one run showed, from compare's per-run figures and the run's history."""
    kinds = [e.kind for e in events]
    in_place = sum(1 for e in events
                   if e.kind == "instance-rolled-back" and not e.data.get("skipped"))
    return SparkRun(config, figures.passed, kinds.count("failure-detected"),
                    kinds.count("instance-started"), in_place, figures.records_processed,
                    figures.recovery_s, figures.detection_s, figures.run_id)


class _Capture(CaptureExtension):
    """compare's capture, plus the run's history (rollbacks in place are only there)."""

    def __init__(self, inner: ChaosExtension):
        super().__init__(inner)
        self.events: list[HistoryEvent] = []

    def keep(self, ctx: RunContext, result: HostResult, summary: dict[str, Any]) -> None:
        super().keep(ctx, result, summary)
        self.events = ctx.store.read_history()


Runner = Callable[[RunRequest, RunExtension], int]


def configs(options: FigureOptions) -> list[tuple[str, str, dict[str, Any]]]:
    """(name, protocol, params) per run, the fault-free one first."""
    from .fig_001_policies import MIXES  # the mixes are the simulation figure's

    opts = options.options
    default = ",".join(QUICK_MIXES if options.quick else MIXES)
    mixes = [m.strip() for m in opts.get("mixes", default).split(",") if m.strip()]
    bad = [m for m in mixes if m not in MIXES]
    if bad:
        raise ConfigError("--opt", "mixes", f"unknown {', '.join(bad)} "
                          f"(known: {', '.join(MIXES)})")
    rollback = opts.get("rollback", "restart")
    if rollback not in ("restart", "in-place"):
        raise ConfigError("--opt", "rollback", f"{rollback!r} is not restart or in-place")
    extra = {"rollback": rollback} if rollback != "restart" else {}
    return [(FAULT_FREE, "falkirk", {}), (BASELINE, BASELINE, {}),
            *((m, "falkirk", {**MIXES[m], **extra}) for m in mixes)]


def setup_of(options: FigureOptions) -> Setup:
    base = QUICK if options.quick else FULL
    opts = options.options
    try:
        return Setup(opts.get("topology", base.topology), opts.get("target", base.target),
                     float(opts.get("at", base.at)), int(opts.get("records", base.records)),
                     float(opts.get("rate", base.rate)))
    except ValueError as exc:
        raise ConfigError("--opt", "at/records/rate", str(exc)) from None


def run_spark(options: FigureOptions, runner: Runner = execute,
              master: str | None = None) -> FigureResult:
    """Every configuration on one cluster: ours (started and torn down here) unless
    ``master`` names one."""
    setup = setup_of(options)
    path = ROOT / "topologies" / f"{setup.topology}.yaml"
    if not path.is_file():
        raise ConfigError("--opt", "topology", f"no bundled topology {setup.topology}")
    topo = load_topology(path).with_input(records=setup.records, rate=setup.rate)
    graph = ExecutionGraph(topo)
    if setup.target not in graph.instances:
        raise ConfigError("--opt", "target", f"{setup.topology} has no instance "
                          f"{setup.target} (it has {', '.join(graph.order)})")
    plan = configs(options)
    out = options.out
    out.mkdir(parents=True, exist_ok=True)
    scenario = out / "policies-spark-scenario.yaml"
    scenario.write_text(setup.scenario())
    cores = SLOTS_PER_INSTANCE * len(graph.order)
    with warm_cluster(master, cores, "ftctl-policies-") as url:
        runs = _measure(plan, topo, scenario, url, out, cores, runner)
    return result(runs, setup, len(graph.order), out)


def _measure(plan: Sequence[tuple[str, str, dict[str, Any]]], topo: Topology, scenario: Path,
             master: str, out: Path, cores: int, runner: Runner) -> list[SparkRun]:
    graph = ExecutionGraph(topo)
    duration = expected_seconds(graph)
    runs = []
    for name, protocol, given in plan:
        info = get_protocol(protocol)
        schedule = (Schedule([], FAULT_FREE, 1, "no faults") if name == FAULT_FREE
                    else from_scenario(scenario, graph.order, duration, None))
        capture = _Capture(ChaosExtension(schedule, duration))
        # The lines compare's runner builds a run with, for one configuration.
        request = RunRequest(
            topo, info, info.resolve(given), master=master, workers=WORKERS,
            results=out / "runs", timeout=RUN_TIMEOUT, as_json=False, cores=cores,
            kind="figure", quiet=True,
            config={"figure": "001-policies", "run": name, "params": given})
        run_point(runner, request, capture)
        if capture.figures is None:
            raise FigureRunFailed(f"the Spark run {name} did not finish")
        runs.append(read_run(name, capture.figures, capture.events))
    return runs


def result(runs: Sequence[SparkRun], setup: Setup, instances: int, out: Path) -> FigureResult:
    """The table and plot over measured (or, in tests, made-up) runs."""
    free = next((r for r in runs if r.config == FAULT_FREE), None)
    base = free.processed if free is not None else 0
    measured = [r for r in runs if r.config != FAULT_FREE]
    rows = []
    for r in measured:
        rows.append((r.config, r.failures, r.rolled_back, r.restarted, r.in_place,
                     f"{r.rolled_back / instances:.2f}", max(0, r.processed - base),
                     seconds_cell(r.detection_s), seconds_cell(r.recovery_s),
                     "yes" if r.passed else "NO"))
    ckpt = next((r for r in measured if r.config == BASELINE), None)
    summary: dict[str, Any] = {
        "host": "spark", "setup": asdict(setup), "instances": instances,
        "fault_free_processed": base,
        "runs": [{**asdict(r), "rolled_back": r.rolled_back,
                  "replayed": max(0, r.processed - base)} for r in runs],
        "all_exactly_once": all(r.passed for r in runs)}
    if ckpt is not None:
        summary["versus_checkpoint"] = {
            r.config: {"fewer_rolled_back": r.rolled_back < ckpt.rolled_back,
                       "recovery_no_slower": None if r.recovery_s is None
                       or ckpt.recovery_s is None else r.recovery_s <= ckpt.recovery_s}
            for r in measured if r is not ckpt}
    js = out / "policies-spark.json"
    js.write_text(json.dumps(summary, indent=1))
    files = (js, _plot(rows, setup, instances, out / "policies-spark.png"))
    return FigureResult(
        title=f"001 policies on Spark: {setup.topology}, {setup.target} killed "
              f"{setup.at:g} s in, {setup.records:,} records at {setup.rate:g}/s",
        header=("config", "failures", "rolled back", "restarted", "in place", "fraction",
                "records replayed", "detection s", "recovery s", "exactly-once"),
        rows=tuple(rows), files=files, summary=summary,
        notes=(f"Local cluster, {WORKERS} workers, one Spark job per instance, one run per "
               "configuration on the same scenario. rolled back: restarted + rolled back "
               f"in place, of {instances} instances; records replayed: records received "
               f"by every instance beyond the fault-free run's {base:,}; recovery: kill to "
               "sink latency back within 10% of before it.",))


def _plot(rows: Sequence[tuple[Any, ...]], setup: Setup, instances: int, png: Path) -> Path:
    fig = MplFigure(figsize=(12, 4), dpi=100)
    FigureCanvasAgg(fig)
    names = [str(r[0]) for r in rows]
    colors = ["grey" if n == BASELINE else "tab:blue" for n in names]
    panels: Mapping[int, str] = {2: f"instances rolled back (of {instances})",
                                 6: "records replayed", 8: "recovery, s (10%)"}
    for n, (col, label) in enumerate(panels.items(), start=1):
        ax = fig.add_subplot(1, 3, n)
        ys = [0.0 if r[col] == "-" else float(r[col]) for r in rows]
        ax.bar(range(len(rows)), ys, color=colors)
        for x, r in enumerate(rows):
            if r[col] == "-":  # not measured (latency never settled): no bar, say so
                ax.annotate("n/a", (x, 0), ha="center", va="bottom", fontsize=7)
        ax.set_xticks(range(len(rows)))
        ax.set_xticklabels(names, fontsize=7, rotation=30, ha="right")
        ax.set_ylabel(label, fontsize=8)
        ax.grid(True, axis="y", alpha=0.3)
    fig.suptitle(f"001 Falkirk Wheel policies vs checkpoint's global rollback on Spark: "
                 f"{setup.topology}, {setup.target} killed", fontsize=9)
    fig.tight_layout()
    fig.savefig(png)
    return png
