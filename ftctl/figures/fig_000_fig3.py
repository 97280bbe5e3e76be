"""Paper 000, Figure 3: propagation latency against offered load, with and without clocks.

``topologies/sharder.yaml`` fault-free on one warm local Spark cluster at each offered
load (votes/s, paced by the sources' schedule), under ``causal`` (tree clocks on every
batch, diff logs, payload logs, local snapshots), ``causal:clocks=off`` (the same without
clocks or diff logs) and ``none`` (no clocks and no logging at all).

Latency is the host's sink output latency: from when a record's batch was due on the
rate schedule to when the sink outputs it; a run's p50/p90 are over its samples after
the first second. A run whose worst sample is more than ``BEHIND_S`` late fell behind
its schedule: that load is over the host's maximum. ``repeat`` sweeps run interleaved
(a drift in the machine's load hits every protocol alike); a point's p50 is the median
of its runs and an overhead the median of the paired ratios, run by run: clocks' =
causal / causal:clocks=off - 1, causal vs none = causal / none - 1.

What the clocks add on the wire, from the hosts' counts (``ftctl.kernel.piggyback``):
piggyback bytes per batch (each batch's ``meta`` as encoded, mean and largest) and the
clock-only batches, empty batches sent only to carry a clock (causal's rule N5, which
the paper's design does not have): at each load, the median of the runs' figures.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from matplotlib.axes import Axes

from ftctl.config.load import load_topology
from ftctl.run.capture import Capture
from ftctl.run.execute import RunContext, execute
from ftctl.spark.host import HostResult

from . import Figure, FigureOptions, FigureResult, FigureRunFailed
from . import spark_points as sp
from .spark_points import Runner

ROOT = Path(__file__).resolve().parents[2]
SHARDER = ROOT / "topologies" / "sharder.yaml"
WARMUP_S = 1.0  # output of the first second is start-up
BEHIND_S = 2.0
CORES = 24  # per worker, as for 000-fig2
CLOCKS, NO_CLOCKS, NONE = "causal", "causal:clocks=off", "none"
# (name, base): an overhead of causal over base, paired run by run
OVERHEADS = (("clocks'", NO_CLOCKS), ("causal vs none", NONE))
PAPER = "the paper: tree clocks cost 28% (1.5 ms) near its maximum load of 3.0M ops/s"


@dataclass(frozen=True)
class Setup:
    rates: tuple[float, ...]
    protocols: tuple[str, ...]
    seconds: float  # input per point, at its rate
    repeat: int
    batch: int | None = None  # votes per source batch; None: the topology's (100)


# The docs' measured table.
FULL = Setup((12_000.0, 16_000.0, 19_200.0, 24_000.0), (NONE, NO_CLOCKS, CLOCKS), 8.0, 3)
QUICK = Setup((4_000.0, 12_000.0), (NONE, NO_CLOCKS, CLOCKS), 6.0, 1)


@dataclass(frozen=True)
class Sample:
    """One fault-free run."""

    protocol: str
    rate: float
    rep: int
    passed: bool
    p50_ms: float
    p90_ms: float
    behind: bool
    samples: int
    run_id: str = ""
    load: float = 0.0
    # the run's batches, of them clock-only, and piggyback bytes per batch: mean, largest
    batches: int = 0
    clock_only: int = 0
    piggyback_mean: float = 0.0
    piggyback_max: int = 0


def latency_sample(protocol: str, rate: float, rep: int, passed: bool,
                   latency: Sequence[tuple[Any, float, float]], run_id: str,
                   piggyback: Mapping[str, Any] | None = None) -> Sample:
    """p50/p90 (ms) of the samples ``(instance, t, seconds)`` after the first second;
    ``piggyback``: the run's counts (``HostResult.stats["piggyback"]``)."""
    t0 = min((t for _, t, _ in latency), default=0.0)
    vals = sorted(v for _, t, v in latency if t >= t0 + WARMUP_S)
    if not vals:
        raise FigureRunFailed(f"{protocol} at {rate:g}/s: no latency samples")
    pb = piggyback or {}
    return Sample(protocol, rate, rep, passed, round(1000 * statistics.median(vals), 3),
                  round(1000 * vals[int(0.9 * (len(vals) - 1))], 3),
                  max(v for _, _, v in latency) > BEHIND_S, len(vals), run_id,
                  batches=int(pb.get("batches", 0)), clock_only=int(pb.get("clock_only", 0)),
                  piggyback_mean=float(pb.get("mean", 0.0)),
                  piggyback_max=int(pb.get("max", 0)))


class _Keep(Capture):
    def __init__(self, protocol: str, rate: float, rep: int):
        super().__init__()
        self.key = (protocol, rate, rep)
        self.sample: Sample | None = None

    def keep(self, ctx: RunContext, result: HostResult, summary: dict[str, Any]) -> None:
        self.sample = latency_sample(*self.key, bool(summary.get("passed")), result.latency,
                                     ctx.store.run_id, result.stats.get("piggyback"))


def kept_note(protocol: str, rate: float | None) -> str:
    """The highest load ``protocol`` kept on schedule in every run; ``None``: none."""
    if rate is None:  # not "here none": that reads as the protocol of the name
        return f"{protocol}: behind schedule in some run at every load measured"
    return f"{protocol}: highest load kept on schedule here {rate:,.0f} votes/s"


def setup_of(options: FigureOptions) -> Setup:
    base = QUICK if options.quick else FULL
    opts = options.options
    return Setup(sp.number_list(opts, "rates", base.rates), sp.protocol_list(opts, base.protocols),
                 sp.positive(opts, "seconds", base.seconds),
                 int(sp.positive(opts, "repeat", base.repeat, whole=True)), sp.batch(opts))


def run(options: FigureOptions, runner: Runner = execute) -> FigureResult:
    setup = setup_of(options)
    base = load_topology(SHARDER)
    out = options.out
    out.mkdir(parents=True, exist_ok=True)
    samples: list[Sample] = []
    with sp.warm_cluster(options.options.get("master"), CORES, "ftctl-000-fig3-") as master:
        for rep in range(setup.repeat):
            for rate in setup.rates:
                topo = base.with_input(records=int(rate * setup.seconds), rate=rate,
                                       batch=setup.batch)
                for proto in setup.protocols:
                    keep = _Keep(proto, rate, rep)
                    request = sp.point_request(topo, proto, master, out / "runs",
                                               "000-fig3", f"{proto} {rate:g}/s rep {rep}")
                    sp.run_point(runner, request, keep)
                    if keep.sample is None:
                        raise FigureRunFailed(f"{proto} at {rate:g}/s: the Spark run "
                                              "did not finish")
                    samples.append(sp.announce(keep.sample))
    return result(samples, setup, out)


@dataclass(frozen=True)
class Median:
    """One (protocol, rate) over its runs."""

    protocol: str
    rate: float
    p50_ms: float
    p90_ms: float
    passed: bool
    behind: int  # runs that fell behind
    runs: int
    batches: float = 0.0
    clock_only: float = 0.0
    piggyback_mean: float = 0.0
    piggyback_max: int = 0  # the largest of any run


def medians(samples: Sequence[Sample]) -> list[Median]:
    out = []
    for key in dict.fromkeys((s.protocol, s.rate) for s in samples):
        runs = [s for s in samples if (s.protocol, s.rate) == key]
        out.append(Median(*key, statistics.median(s.p50_ms for s in runs),
                          statistics.median(s.p90_ms for s in runs),
                          all(s.passed for s in runs), sum(s.behind for s in runs),
                          len(runs), statistics.median(s.batches for s in runs),
                          statistics.median(s.clock_only for s in runs),
                          statistics.median(s.piggyback_mean for s in runs),
                          max(s.piggyback_max for s in runs)))
    return out


def subject_of(protocols: Sequence[str]) -> str:
    """The causal run the overheads are of: ``causal`` if it ran, else the first other
    form of it (``causal:snapshot_every=100``), so that a sweep of a variant alone
    still compares it with ``none``."""
    forms = [p for p in protocols if p.split(":")[0] == CLOCKS and p != NO_CLOCKS]
    return CLOCKS if CLOCKS in forms or not forms else forms[0]


def shown_overheads(protocols: Sequence[str], subject: str) -> list[str]:
    """The overheads the table has a column for: those whose two runs were both asked
    for (a column of dashes says nothing)."""
    return [what for what, base in OVERHEADS
            if subject in protocols and base in protocols
            # clocks off is the default's counterpart, not a variant's
            and not (base == NO_CLOCKS and subject != CLOCKS)]


def overheads(samples: Sequence[Sample], subject: str = CLOCKS
              ) -> dict[float, dict[str, list[float]]]:
    """Per rate and overhead: ``subject`` / base - 1 for every repeat where both ran."""
    by = {(s.protocol, s.rate, s.rep): s.p50_ms for s in samples}
    shown = shown_overheads(list(dict.fromkeys(s.protocol for s in samples)), subject)
    out: dict[float, dict[str, list[float]]] = {}
    for rate in dict.fromkeys(s.rate for s in samples):
        for what, base in OVERHEADS:
            if what not in shown:
                continue
            paired = [by[(subject, rate, k)] / by[(base, rate, k)] - 1
                      for k in sorted({s.rep for s in samples})
                      if (subject, rate, k) in by and by.get((base, rate, k))]
            if paired:
                out.setdefault(rate, {})[what] = paired
    return out


def _pct(paired: list[float] | None) -> str:
    if not paired:
        return "-"
    text = f"{statistics.median(paired):+.0%}"
    return text + (f" ({', '.join(f'{x:+.0%}' for x in paired)})" if len(paired) > 1 else "")


def _wire(m: Median | None) -> tuple[str, str]:
    """The piggyback and clock-only cells of one (protocol, rate)."""
    if m is None:
        return "-", "-"
    share = f" ({m.clock_only / m.batches:.0%})" if m.batches else ""
    return f"{m.piggyback_mean:.1f} ({m.piggyback_max:,})", f"{m.clock_only:,.0f}{share}"


def result(samples: Sequence[Sample], setup: Setup, out: Path) -> FigureResult:
    """The table, overheads and plot over measured (or, in tests, made-up) runs."""
    meds = medians(samples)
    protos = list(dict.fromkeys(m.protocol for m in meds))
    subject = subject_of(protos)
    over = overheads(samples, subject)
    shown = shown_overheads(protos, subject)
    # the headers' names: "causal vs none" reads as the run it is of
    names = {what: what.replace(CLOCKS, subject, 1) for what in shown}
    by = {(m.protocol, m.rate): m for m in meds}
    rows = []
    for rate in dict.fromkeys(m.rate for m in meds):
        cells = [f"{by[(p, rate)].p50_ms:.1f}" + (f" ({by[(p, rate)].behind} behind)"
                                                  if by[(p, rate)].behind else "")
                 if (p, rate) in by else "-" for p in protos]
        rows.append((f"{rate:,.0f}", *cells,
                     *(_pct(over.get(rate, {}).get(what)) for what in shown),
                     *_wire(by.get((subject, rate)))))
    kept = {p: max((m.rate for m in meds if m.protocol == p and not m.behind), default=None)
            for p in protos}
    summary = {"setup": asdict(setup), "runs": [asdict(s) for s in samples],
               "medians": [asdict(m) for m in meds],
               "overheads": {f"{r:g}": {w: {"median": statistics.median(v), "runs": v}
                                        for w, v in o.items()} for r, o in over.items()},
               "highest_on_schedule": kept, "overheads_of": subject,
               "all_exactly_once": all(s.passed for s in samples)}
    js = out / "fig3.json"
    js.write_text(json.dumps(summary, indent=1))
    png = plot(meds, out / "fig3.png")
    return FigureResult(
        title=f"000 Figure 3: sink latency vs offered load, sharder fault-free (Spark; "
              f"{setup.seconds:g} s per point, {setup.repeat} interleaved sweep(s)"
              f"{sp.batch_note(setup.batch)})",
        header=("votes/s", *(f"{p} p50 ms" for p in protos),
                *(f"{names[what]} overhead" for what in shown),
                f"{subject} piggyback B/batch mean (max)", f"{subject} clock-only batches"),
        rows=tuple(rows), files=(js, png), summary=summary,
        notes=(*(kept_note(p, r) for p, r in kept.items()),
               "p50: median of a run's sink latencies after its first second, median over "
               "the runs; overheads: median of the paired per-run ratios (each run's in "
               "brackets); 'behind': runs whose worst latency passed "
               f"{BEHIND_S:g} s (over the load the host keeps up with).",
               f"{subject} on the wire, median over the runs: piggyback B/batch is the "
               "encoded size of the clock diff each batch carries (mean, and the largest "
               "of any batch); clock-only batches are empty batches sent only to carry a "
               "clock (rule N5, not in the paper's design), with their share of all batches.",
               f"All {len(samples)} runs exactly-once." if summary["all_exactly_once"]
               else "NOT all runs exactly-once: see fig3.json.", PAPER + "."))


def plot(meds: Sequence[Median], png: Path) -> Path:
    labels = {CLOCKS: "causal (tree clocks)", NO_CLOCKS: "causal, clocks off",
              NONE: "none (no logging)"}

    def draw(ax: Axes) -> None:
        for proto in dict.fromkeys(m.protocol for m in meds):
            pts = [(m.rate, m.p50_ms) for m in meds if m.protocol == proto]
            ax.plot(*zip(*pts, strict=True), marker="o", label=labels.get(proto, proto))
    return sp.line_plot(png, (5.0, 3.5), draw, ("offered load (votes/s)",
                     "propagation latency p50 (ms)", "sharder: latency vs load (Spark)"))


FIGURE = Figure(
    name="000-fig3",
    paper="000",
    title="tree clocks' latency overhead against offered load (causal, clocks off, none)",
    hosts=("spark",),
    run=run,
    options={
        "rates": "offered loads, votes/s, comma-separated (default "
                 "12000,16000,19200,24000; --quick 4000,12000)",
        "protocols": f"default {NONE},{NO_CLOCKS},{CLOCKS} (name or name:key=value+...)",
        "seconds": "input per point, at its rate (default 8; --quick 6)",
        "repeat": "interleaved sweeps; medians of runs and of paired ratios (default 3; "
                  "--quick 1)",
        "batch": sp.BATCH_HELP,
        "master": "run on this Spark master instead of a local cluster started here",
    },
)
