"""Paper 004 (progressive recovery), Figure 5: at run level on the simulation host, and at
the level of the recovery plan (``--opt level=plan``).

Run level (default; ``fig_004_runs.py``): progressive15 with 40,000 records at 1,000/s on
10 simulated nodes; at 10 s the 8 sink nodes die; they return one by one at the paper's
offsets times ``scale`` (0.05). Runs: BestCase (all back at 180 s x scale), PRG Sample-1
and Sample-2 (profit density), topological, OPC (blocking) and ``checkpoint`` (Sample-1).
Fig. 5(a) is the mean relative latency of the queries with output per step (Δ_T = 20 s x
scale), Fig. 5(b) the available queries per step; the table gives, per run, the queries
whose instances all run after each arrival, when the first and the last came back and
whether the run was exactly-once. ``--quick``: scale 0.01, PRG and OPC only.
``--opt mini_batch=N`` (default 1) sets progressive's mini-batch size, ``--opt
threshold=Θ`` (default 1.2, as on Spark) the relative latency a query is available under.

Plan level:

The setup of the paper's §6 (spec §8): ``topologies/progressive15.yaml``, 15 queries; the
8 nodes hosting every aggregate, subscriber and sink (90 instances) are lost at t = 0 and
8 replacement nodes of 12 slots arrive at the paper's measured 2-6 minute offsets
(``chaos/arrivals.py``, distribution ``paper``, scenario seeds 1 and 2 = Sample-1/2).
For every recovery policy the pure planner of ``protocols/progressive/schedule.py``
decides at each arrival what starts; a query counts as back once all its instances are
started. BestCase: all 8 nodes at 180 s. ``checkpoint`` restarts all 96 instances as one
group, so it needs 96 free slots (the 6 of the surviving nodes plus 90): the last arrival.

This is Fig. 5(b) without catch-up: the relative latency of Fig. 5(a) and the catch-up
after each start need runs on the simulation host with nodes, slots and capacity events.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure as MplFigure

from chaos.arrivals import arrival_offsets
from chaos.schedule import fault_seed
from ftctl.config.load import load_topology
from ftctl.config.scenario import RestoreParams
from ftctl.figures.fig5_plots import THRESHOLD_HELP, Curve, plot_fig5, threshold_of
from ftctl.figures.fig_004_runs import Fig5Run, baselines, run_fig5
from ftctl.kernel.history import notes as notes_named
from ftctl.metrics.queries import QueryMetricsParams
from ftctl.runtime.graph import ExecutionGraph
from ftctl.runtime.queries import topology_queries
from ftctl.sim.golden import golden_output
from protocols.progressive.schedule import Plan, Planner, Query, Timeline, planner, replay
from protocols.registry import get_protocol

from . import Figure, FigureOptions, FigureResult

TOPOLOGY = Path(__file__).resolve().parents[2] / "topologies" / "progressive15.yaml"
SURVIVORS = ("tweets", "parser")  # on the two core nodes, which stay up
NODE_SLOTS, NODES, CORE_FREE = 12, 8, 6
BEST_CASE_S = 180.0
FINAL_SNAPSHOT = 2**31 - 1  # the end-of-stream snapshot, not a periodic one


def problem() -> tuple[list[Query], list[str], int]:
    topo = load_topology(TOPOLOGY)
    graph = ExecutionGraph(topo)
    queries = [Query(q.name, q.operators, q.priority) for q in topology_queries(topo)]
    pending = [i for i in graph.order if i.split("[")[0] not in SURVIVORS]
    return queries, pending, len(graph.order)


def arrivals(seed: int, scale: float = 1.0) -> list[float]:
    """Offsets of the 8 nodes of restore-capacity fault 1 in a scenario with ``seed``."""
    params = RestoreParams(mode="progressive", distribution="paper", scale=scale)
    return arrival_offsets(params, NODES, random.Random(fault_seed(seed, 1, 0)))


class WholeRestart(Planner):
    """``checkpoint``: the whole topology restarts as one group once it all fits."""

    def __init__(self, everyone: int, already_free: int):
        super().__init__()
        self.everyone, self.already_free = everyone, already_free

    def plan(self, queries: Sequence[Query], pending: Sequence[str], free: int) -> Plan:
        if pending and free + self.already_free >= self.everyone:
            return Plan(tuple(pending), (), free + self.already_free - self.everyone)
        return Plan((), (), free)


def runs(scale: float = 1.0) -> dict[str, tuple[list[float], Timeline]]:
    queries, pending, everyone = problem()
    s1, s2 = arrivals(1, scale), arrivals(2, scale)

    def play(p: Planner, times: list[float]) -> tuple[list[float], Timeline]:
        return times, replay(p, queries, pending, [(t, NODE_SLOTS) for t in times])

    return {
        "BestCase": play(planner("blocking"), [BEST_CASE_S * scale] * NODES),
        "PRG Sample-1": play(planner("profit-density"), s1),
        "PRG Sample-2": play(planner("profit-density"), s2),
        "topological Sample-1": play(planner("topological"), s1),
        "OPC Sample-1": play(planner("blocking"), s1),
        "checkpoint Sample-1": play(WholeRestart(everyone, CORE_FREE), s1),
    }


def run(options: FigureOptions) -> FigureResult:
    if options.host == "spark":
        from ftctl.figures.fig_004_spark import spark_level  # Spark only when asked

        return spark_level(options)
    level = options.options.get("level", "run")
    if level == "plan":
        return plan_level(options)
    if level != "run":
        raise ValueError(f"--opt level: 'run' or 'plan', got {level!r}")
    return run_level(options)


def plan_level(options: FigureOptions) -> FigureResult:
    scale = float(options.options.get("scale", "1.0"))
    results = runs(scale)
    rows = []
    summary: dict[str, object] = {}
    for name, (times, tl) in results.items():
        back = sorted(tl.recovered.values())
        mean = sum(back) / len(back) if back else None
        rows.append((name, " ".join(f"{t:.1f}" for t in times),
                     " ".join(str(n) for n in tl.available_after(times)),
                     f"{back[0]:.1f}" if back else "-", f"{back[-1]:.1f}" if back else "-",
                     f"{mean:.1f}" if mean is not None else "-"))
        summary[name] = {"arrivals": times, "available_after": tl.available_after(times),
                         "recovered": tl.recovered, "picks": tl.picks()}
    options.out.mkdir(parents=True, exist_ok=True)
    png = options.out / "fig5-available-queries.png"
    _plot(results, png, scale)
    first_prg = min(results["PRG Sample-1"][1].recovered.values())
    first_opc = min(results["OPC Sample-1"][1].recovered.values())
    return FigureResult(
        title="004 Fig. 5(b), plan level: queries whose instances all started, 8 nodes of "
              f"12 slots returning (paper distribution, scale {scale:g})",
        header=("run", "arrivals (s after the loss)", "queries back after each arrival",
                "first back (s)", "all back (s)", "mean (s)"),
        rows=tuple(rows), files=(png,), summary=summary,
        notes=(f"First query back, PRG vs OPC (Sample-1): {first_prg:.1f} s vs "
               f"{first_opc:.1f} s ({first_opc / first_prg:.1f}x).",
               "Plan level only: catch-up after a start and the relative latency of Fig. 5(a) "
               "need the simulation host's nodes, slots and capacity events."))


def _plot(results: dict[str, tuple[list[float], Timeline]], path: Path, scale: float) -> None:
    fig = MplFigure(figsize=(8, 4.5), dpi=110)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    end = 400.0 * scale
    for name, (_times, tl) in results.items():
        steps = sorted(tl.recovered.values())
        xs = [0.0, *steps, end]
        ys = [0, *range(1, len(steps) + 1), len(steps)]
        ax.step(xs, ys, where="post", label=name)
    ax.set_xlabel("seconds after the correlated failure")
    ax.set_ylabel("available queries (all instances started)")
    ax.set_title("Paper 004 Fig. 5(b) setup: 15 queries, 8 of 10 nodes lost")
    ax.set_ylim(0, 16)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    fig.savefig(path)


def run_level(options: FigureOptions) -> FigureResult:
    scale = float(options.options.get("scale", "0.01" if options.quick else "0.05"))
    kill = 200.0 * scale
    records = int((kill + 400.0 * scale + 200.0 * scale) * 1000)
    topo = load_topology(TOPOLOGY)
    topo = topo.model_copy(update={"input": topo.input.model_copy(update={"records": records})})
    metrics = QueryMetricsParams(step=20.0 * scale, threshold=threshold_of(options.options))
    prg = get_protocol("progressive")
    # The registry's 1 s punctuations and 10 s burst window, scaled like the arrivals.
    # Mini-batches of one wire batch: the default 4 hold 0.3 s more than a 0.14 s
    # fault-free latency, so no recovered query gets under Θ until the episode ends.
    timing = {"interval": 20.0 * scale, "burst_window": 200.0 * scale,
              "mini_batch": int(options.options.get("mini_batch", "1"))}
    base = baselines(topo, prg, timing)
    golden = golden_output(ExecutionGraph(topo))
    s1, s2 = arrivals(1, scale), arrivals(2, scale)
    plan: list[tuple[str, Any, dict[str, Any], list[float]]] = [
        ("PRG Sample-1", prg, timing, s1),
        ("OPC Sample-1", prg, timing | {"schedule": "blocking"}, s1)]
    if not options.quick:
        plan = [("BestCase", prg, timing, [BEST_CASE_S * scale] * NODES), plan[0],
                ("PRG Sample-2", prg, timing, s2),
                ("topological Sample-1", prg, timing | {"schedule": "topological"}, s1),
                plan[1], ("checkpoint Sample-1", get_protocol("checkpoint"),
                          {"interval": timing["interval"]}, s1)]
    done = [run_fig5(name, topo, proto, given, kill, times, metrics, base, golden)
            for name, proto, given, times in plan]
    rows, summary = [], {}
    for r in done:
        back = sorted(r.recovered.values())
        curve = _curve(r, kill)
        steps, after, peak = list(curve.t), curve.first_available(), curve.peak_mean_rl()
        by_arrival = [sum(1 for b in back if b <= nxt) for nxt in [*r.arrivals[1:], 1e9]]
        last_up = kill + max(r.arrivals)
        cps_after = sum(1 for e in notes_named(r.result.events, "snapshot-complete")
                        if e.t > last_up + 0.5 and e.data["data"]["snapshot"] < FINAL_SNAPSHOT)
        rows.append((r.name, " ".join(str(n) for n in by_arrival),
                     f"{back[0]:.2f}" if back else "-", f"{back[-1]:.2f}" if back else "-",
                     f"{after:.2f}" if after is not None else "-",
                     f"{peak:.1f}" if peak is not None else "-", cps_after,
                     "yes" if r.exactly_once else "NO"))
        summary[r.name] = {"arrivals": r.arrivals, "recovered": r.recovered,
                           "t": steps, "available": r.available,
                           "mean_rl": r.availability.mean_rl, "exactly_once": r.exactly_once,
                           "checkpoints_after_recovery": cps_after}
    options.out.mkdir(parents=True, exist_ok=True)
    files = _plot_runs(done, kill, options.out, metrics.threshold)
    first = {r.name: min(r.recovered.values()) for r in done if r.recovered}
    notes = [f"scale {scale:g}: kill at {kill:g} s, {records:,} records at 1,000/s, "
             f"Δ_T = {metrics.step:g} s, Θ = {metrics.threshold:g}, progressive "
             f"mini_batch={timing['mini_batch']} (--opt mini_batch=N); times are seconds "
             "after the kill."]
    notes.append("Relative latency is against each query's fault-free 95th percentile; "
                 "'checkpoints after recovery' counts periodic checkpoints completed after "
                 "the last node returned (0 means the run checkpointed no more).")
    if "PRG Sample-1" in first and "OPC Sample-1" in first:
        notes.append(f"First query back, PRG vs OPC (Sample-1): "
                     f"{first['PRG Sample-1']:.2f} s vs {first['OPC Sample-1']:.2f} s "
                     f"({first['OPC Sample-1'] / first['PRG Sample-1']:.1f}x).")
    return FigureResult(
        title=f"004 Fig. 5, simulation host: 8 of 10 nodes lost, returning one by one "
              f"(paper distribution, scale {scale:g})",
        header=("run", "queries running before each next arrival", "first back (s)",
                "all back (s)", "first available (s)", "peak mean RL",
                "checkpoints after recovery", "exactly-once"),
        rows=tuple(rows), files=files, summary=summary, notes=tuple(notes))


def _curve(r: Fig5Run, kill: float) -> Curve:
    """The run's steps in seconds after the kill."""
    return Curve(r.name, [round(t - kill, 3) for t in r.availability.t],
                 r.availability.mean_rl, r.available)


def _plot_runs(done: list[Fig5Run], kill: float, out: Path,
               threshold: float) -> tuple[Path, ...]:
    return plot_fig5([_curve(r, kill) for r in done], (out / "fig5a-relative-latency.png",
                              out / "fig5b-available-queries.png"),
                     threshold=threshold, host="simulated",
                     titles=("Paper 004 Fig. 5(a) setup on the simulation host",
                             "Paper 004 Fig. 5(b) setup on the simulation host"),
                     max_available=16)


FIGURE = Figure(name="004-fig5", paper="004",
                title="Progressive recovery: available queries and relative latency as "
                      "capacity returns",
                hosts=("sim", "spark"), run=run,
                options={"threshold": f"{THRESHOLD_HELP}; both hosts",
                         "level": "run (default) or plan: the recovery planner alone; sim",
                         "scale": "the paper's times x this (default 0.05, --quick 0.01; "
                                  "plan level 1.0); sim",
                         "mini_batch": "progressive's mini-batch size (default 1); sim"})
