"""Paper 001 (Falkirk Wheel): what per-operator policies save against global rollback.

The paper argues (§1, §4.1, Fig. 7b) that mixing policies lets a failure roll back only
part of a dataflow, and that an operator logging its outputs is a firewall. The draft
has no measurements; this figure measures the claim on the simulation host. For each
topology and seed, one schedule: the same instance(s), struck at the same fraction of
the fault-free run, under ``checkpoint`` (Noir snapshots, global rollback) and under
``falkirk`` with several policy mixes. Per schedule it records the instances restarted
(falkirk: the failed ones and every live one whose frontier moved; checkpoint: all),
the records sent again and the simulated time the failure added, and checks the output
exactly-once against the golden run.

Options: ``topologies=wordcount,diamond,windowed,sharder`` (bundled names), ``seeds=N``
(default 40; ``--quick`` 4), ``burst=K`` (instances struck together, default 1),
``mixes=default,firewall,...`` (see ``MIXES``). ``--host spark``: one kill on a local
cluster under checkpoint and each mix (``policies_spark``).
"""

from __future__ import annotations

import csv
import json
import random
import statistics
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure as MplFigure

from ftctl.config.errors import ConfigError
from ftctl.config.load import load_topology
from ftctl.runtime.graph import ExecutionGraph
from ftctl.sim.faults import FailureSchedule, Strike
from ftctl.sim.golden import golden_output
from ftctl.sim.host import SimHost
from ftctl.sim.runner import STALL_FACTOR, STALL_FLOOR, sim_params
from ftctl.verify.checker import index_by_key, verify
from protocols.registry import PROTOCOLS

from . import Figure, FigureOptions, FigureResult

ROOT = Path(__file__).resolve().parents[2]
TOPOLOGIES = ("wordcount", "diamond", "windowed", "sharder")
BASELINE = "checkpoint"
# falkirk policy mixes (spec §8's configurations, plus eager and batch)
MIXES: dict[str, dict[str, str]] = {
    "default": {},
    "firewall": {"default_stateless": "log"},
    "eager-firewall": {"default_stateless": "log", "default_stateful": "eager+log"},
    "eager": {"default_stateful": "eager"},
    "lazy-staggered": {"default_stateful": "lazy:3", "stagger": "on"},
    "batch": {"default_stateful": "batch"},
}


@dataclass
class Run:
    """One schedule under one configuration."""

    topology: str
    config: str  # "checkpoint" or a falkirk mix
    seed: int
    victims: tuple[str, ...]
    failures: int  # strikes the coordinator detected (a run may end before detection)
    restarted: int  # instance starts after the initial ones
    resent: int  # records sent beyond the fault-free run
    delay_ms: float  # simulated time added to the fault-free run
    exactly_once: bool


@dataclass(frozen=True)
class Schedule:
    seed: int
    victims: tuple[str, ...]
    fraction: float  # of the fault-free run's events
    host_seed: int


def schedules(instances: list[str], seeds: int, burst: int) -> list[Schedule]:
    """The same failures for every configuration: victims and a point of the run."""
    out = []
    for seed in range(1, seeds + 1):
        rng = random.Random(seed)
        victims = tuple(sorted(rng.sample(instances, min(burst, len(instances)))))
        out.append(Schedule(seed, victims, rng.uniform(0.1, 0.9), rng.getrandbits(64)))
    return out


class Config:
    """A protocol and its parameters on one topology: fault-free baseline included."""

    def __init__(self, name: str, graph: ExecutionGraph, golden: dict[str, Any]):
        proto = PROTOCOLS[BASELINE if name == BASELINE else "falkirk"]
        self.name, self.graph, self.protocol = name, graph, proto
        self.params = sim_params(graph, proto, {} if name == BASELINE else MIXES[name])
        self.guarantee = proto.guarantee_of(self.params)
        self.golden, self.index = golden, {s: index_by_key(o) for s, o in golden.items()}
        self.modes = graph.topology.sink_modes()
        free = SimHost(graph, proto, self.params, 0).run()
        self.horizon, self.end, self.sent = free.stats.events, free.end_time, \
            free.stats.records_sent
        self.cap = max(STALL_FLOOR, STALL_FACTOR * self.horizon)

    def run(self, topology: str, s: Schedule) -> Run:
        strike = Strike(max(1, int(s.fraction * self.horizon)), len(s.victims), s.victims)
        result = SimHost(self.graph, self.protocol, self.params, seed=s.host_seed,
                         schedule=FailureSchedule([strike]), max_events=self.cap).run()
        verdict = verify(self.modes, self.golden, result.outputs, self.guarantee,
                         complete=result.complete, golden_index=self.index)
        kinds = [e.kind for e in result.events]
        return Run(topology, self.name, s.seed, s.victims, kinds.count("failure-detected"),
                   kinds.count("instance-started"),
                   max(0, result.stats.records_sent - self.sent),
                   round(max(0.0, result.end_time - self.end) * 1000, 3), verdict.passed)


def measure(topology: str, configs: list[str], seeds: int, burst: int) -> list[Run]:
    graph = ExecutionGraph(load_topology(ROOT / "topologies" / f"{topology}.yaml"))
    golden = golden_output(graph)
    plan = schedules(sorted(graph.instances), seeds, burst)
    runs = []
    for name in configs:
        cfg = Config(name, graph, golden)
        runs += [cfg.run(topology, s) for s in plan]
    return runs


def comparisons(runs: list[Run]) -> dict[str, dict[str, int]]:
    """Per falkirk mix, over schedules where it and checkpoint both detected the same
    failures and checkpoint rolled back: how often it restarted fewer, as many, or more
    instances than checkpoint. (Checkpoint restarts nobody when the struck instance had
    finished its part, e.g. a source that sent everything; falkirk restarts a failed
    source to resend what died in flight.)"""
    base = {(r.topology, r.seed): r for r in runs if r.config == BASELINE}
    out: dict[str, dict[str, int]] = {}
    for r in runs:
        b = base.get((r.topology, r.seed))
        if (r.config == BASELINE or b is None or not r.failures
                or r.failures != b.failures or not b.restarted):
            continue
        c = out.setdefault(r.config, {"fewer": 0, "same": 0, "more": 0})
        c["fewer" if r.restarted < b.restarted else "same" if r.restarted == b.restarted
          else "more"] += 1
    return out


def _median(xs: list[float]) -> float:
    return float(statistics.median(xs)) if xs else 0.0


def table(runs: list[Run], sizes: Mapping[str, int]) -> list[tuple[Any, ...]]:
    rows = []
    for topology in dict.fromkeys(r.topology for r in runs):
        for config in dict.fromkeys(r.config for r in runs if r.topology == topology):
            mine = [r for r in runs if r.topology == topology and r.config == config]
            hit = [r for r in mine if r.failures]
            per = [r.restarted / r.failures for r in hit]
            rows.append((topology, config, len(mine), sum(r.failures for r in mine),
                         f"{_median(per):.1f}", f"{max(per, default=0):.0f}",
                         f"{_median(per) / sizes[topology]:.2f}",
                         int(_median([float(r.resent) for r in hit])),
                         f"{_median([r.delay_ms for r in hit]):.2f}",
                         sum(not r.exactly_once for r in mine)))
    return rows


def run(options: FigureOptions) -> FigureResult:
    if options.host == "spark":
        from .policies_spark import run_spark  # pyspark only when asked for

        return run_spark(options)
    opts: Mapping[str, str] = options.options
    names = [t.strip() for t in opts.get("topologies", ",".join(TOPOLOGIES)).split(",")]
    unknown = [t for t in names if not (ROOT / "topologies" / f"{t}.yaml").is_file()]
    if unknown:
        raise ConfigError("--opt", "topologies", f"no bundled topology {', '.join(unknown)}")
    mixes = [m.strip() for m in opts.get("mixes", ",".join(MIXES)).split(",")]
    bad = [m for m in mixes if m not in MIXES]
    if bad:
        raise ConfigError("--opt", "mixes", f"unknown {', '.join(bad)} "
                          f"(known: {', '.join(MIXES)})")
    seeds = _whole(opts.get("seeds", "4" if options.quick else "40"), "seeds")
    burst = _whole(opts.get("burst", "1"), "burst")
    runs: list[Run] = []
    sizes = {}
    for t in names:
        sizes[t] = len(ExecutionGraph(load_topology(ROOT / "topologies" / f"{t}.yaml"))
                       .instances)
        runs += measure(t, [BASELINE, *mixes], seeds, burst)
    rows = table(runs, sizes)
    versus = comparisons(runs)
    options.out.mkdir(parents=True, exist_ok=True)
    files = _write(runs, rows, options.out)
    summary = {"runs": [asdict(r) for r in runs], "instances": sizes,
               "versus_checkpoint": versus,
               "all_exactly_once": all(r.exactly_once for r in runs),
               "seeds": seeds, "burst": burst}
    notes = (f"{seeds} schedules per topology, each striking {burst} seeded instance(s) at "
             "a seeded fraction (0.1-0.9) of the fault-free run's events; the same "
             "schedules for every configuration.",
             "failures: strikes detected (a run can finish before a late strike is "
             "detected); restarts/failure: median instance starts per detected failure "
             "(checkpoint "
             "restarts every instance), max, and the median as a fraction of the "
             "topology's instances; resent: median records sent beyond the fault-free "
             "run; delay: median simulated ms the failure added.",
             "Against checkpoint, on schedules where it rolled back, schedules where falkirk "
             "restarted fewer/as many/more instances: "
             + "; ".join(f"{m} {c['fewer']}/{c['same']}/{c['more']}"
                         for m, c in versus.items()) + ".")
    return FigureResult(
        title="001 policies: rollback scope, records replayed and recovery delay vs "
              "checkpoint (simulation host)",
        header=("topology", "config", "runs", "failures", "restarts/failure", "max",
                "fraction", "resent", "delay ms", "violations"),
        rows=tuple(rows), files=files, summary=summary, notes=notes)


def _whole(text: str, field: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise ConfigError("--opt", field, f"{text!r} is not a positive whole number")
    return int(text)


def _write(runs: list[Run], rows: list[tuple[Any, ...]], out: Path) -> tuple[Path, ...]:
    js = out / "runs.json"
    js.write_text(json.dumps([asdict(r) for r in runs], indent=1))
    cv = out / "policies.csv"
    with cv.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(("topology", "config", "schedules", "failures", "restarted_median",
                    "restarted_max", "fraction", "resent_median", "delay_ms_median",
                    "violations"))
        w.writerows(rows)
    png = out / "policies.png"
    fig = MplFigure(figsize=(13, 4.2), dpi=100)
    FigureCanvasAgg(fig)
    topologies = list(dict.fromkeys(r[0] for r in rows))
    configs = list(dict.fromkeys(r[1] for r in rows))
    width = 0.8 / max(1, len(configs))
    for n, (col, label) in enumerate(((6, "instances restarted per failure (fraction)"),
                                      (7, "records resent (median)"),
                                      (8, "delay added, ms (median)")), start=1):
        ax = fig.add_subplot(1, 3, n)
        for k, c in enumerate(configs):
            ys = [float(next((r[col] for r in rows if r[0] == t and r[1] == c), 0))
                  for t in topologies]
            ax.bar([i + k * width for i in range(len(topologies))], ys, width, label=c)
        ax.set_xticks([i + width * (len(configs) - 1) / 2 for i in range(len(topologies))])
        ax.set_xticklabels(topologies, fontsize=8)
        ax.set_ylabel(label, fontsize=8)
        ax.grid(True, axis="y", alpha=0.3)
    fig.axes[0].legend(fontsize=7)
    fig.suptitle("001 Falkirk Wheel policies vs checkpoint's global rollback (simulation)",
                 fontsize=9)
    fig.tight_layout()
    fig.savefig(png)
    return js, cv, png


FIGURE = Figure(
    name="001-policies",
    paper="001",
    title="Falkirk Wheel policy mixes vs global rollback: scope, replay, delay",
    hosts=("sim", "spark"),
    run=run,
)
