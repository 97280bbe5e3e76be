"""Paper 001 (Falkirk Wheel), Figure 7 and the spec's further cases: rollback frontiers.

Each example is a dataflow with what every instance persisted (its chain F* with the
metadata of Table 1) and a failed set; the row gives the frontier Figure 6's fixed point
picks, whether the instance keeps running or rolls back, the low-watermark GC may
collect below, and what its logged output edges replay. Pure computation, no host.
"""

from __future__ import annotations

from protocols.falkirk.examples import all_examples
from protocols.falkirk.frontier import show
from protocols.falkirk.gc import low_watermark
from protocols.falkirk.recovery import plan

from . import Figure, FigureOptions, FigureResult


def _times(times: tuple[object, ...]) -> str:
    """Sequence-number times ``(edge, n)`` as ``edge:n``, others as they print."""
    return " ".join(f"{t[0]}:{t[1]}" if isinstance(t, tuple) and isinstance(t[0], str)
                    else str(t) for t in times)


def run(options: FigureOptions) -> FigureResult:
    rows = []
    summary: dict[str, object] = {}
    for ex in all_examples():
        p = plan(ex.flow, ex.failed)
        lw = low_watermark(ex.flow)
        for inst in ex.flow.nodes:
            dom = ex.flow.domain(inst)
            replay = "; ".join(f"{e}: {_times(p.replay[e])}" for e in ex.flow.outs(inst)
                               if e in p.replay)
            action = ("failed, " if inst in ex.failed else "") + (
                "rolls back" if inst in p.rolled_back and inst not in ex.failed
                else "restarts" if inst in p.rolled_back else "keeps running")
            rows.append((ex.name, ",".join(sorted(ex.failed)), inst,
                         show(dom, p.frontiers[inst]), action, show(dom, lw[inst]),
                         replay or "-"))
        summary[ex.name] = {
            "title": ex.title, "failed": sorted(ex.failed),
            "frontiers": {i: show(ex.flow.domain(i), f) for i, f in p.frontiers.items()},
            "rolled_back": list(p.rolled_back),
            "replay": {e: [str(t) for t in ts] for e, ts in p.replay.items()}}
    return FigureResult(
        title="001 Figure 7: rollback frontiers of the Figure 6 fixed point",
        header=("example", "failed", "instance", "frontier", "action", "low-watermark",
                "replays"),
        rows=tuple(rows), summary=summary,
        notes=(*(f"{ex.name}: {ex.title}" for ex in all_examples()),
               "Frontiers: TOP keeps everything, <=k epochs 0..k, {e:s} messages 1..s per "
               "edge, <=(t, c) the lexicographic (epoch, iteration) down-set."))


FIGURE = Figure(
    name="001-fig7",
    paper="001",
    title="Falkirk Wheel Figure 7: rollback frontiers, replay and low-watermarks",
    hosts=("sim",),
    run=run,
)
