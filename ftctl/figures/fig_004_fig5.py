"""Paper 004 (progressive recovery), Figure 5(b) at the level of the recovery plan.

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

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure as MplFigure

from chaos.arrivals import arrival_offsets
from chaos.schedule import fault_seed
from ftctl.config.load import load_topology
from ftctl.config.queries import topology_queries
from ftctl.config.scenario import RestoreParams
from ftctl.runtime.graph import ExecutionGraph
from protocols.progressive.schedule import Plan, Planner, Query, Timeline, planner, replay

from . import Figure, FigureOptions, FigureResult

TOPOLOGY = Path(__file__).resolve().parents[2] / "topologies" / "progressive15.yaml"
SURVIVORS = ("tweets", "parser")  # on the two core nodes, which stay up
NODE_SLOTS, NODES, CORE_FREE = 12, 8, 6
BEST_CASE_S = 180.0


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


FIGURE = Figure(name="004-fig5", paper="004",
                title="Progressive recovery: available queries as capacity returns (plan level)",
                hosts=("sim",), run=run)
