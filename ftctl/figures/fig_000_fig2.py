"""Paper 000, Figure 2: recovery time after losing the sharder, against aggregated state.

``topologies/sharder.yaml`` (votes -> sharder -> 20 count shards -> sink) on one warm
local Spark cluster. Per size N and protocol, one chaos run: the first N votes come at
``build-rate`` votes/s and the rest at ``rate`` (``input.rate_change``); ``sharder[0]``'s
task is killed ``SETTLE`` s after vote N was due, and ``tail`` s of input follow.
Building state fast and measuring at a light load keeps the kill's cost apart from how
close the pipeline already ran to its limit. Every run must verify exactly-once.

Per run, from ftctl's recovery report and the run's history:
  - detect s: kill to the coordinator's verdict (not part of recovery);
  - first output s: kill to the first sink output after the replacement(s) started;
  - recovery s: detection to output latency back within 10% of the pre-fault baseline
    and staying there (``recovery_s`` minus detection);
  - snapshot bytes read: the size of every snapshot a replacement was started from;
  - re-processed: records every instance received, all incarnations, beyond the
    fault-free run's (``PER_VOTE`` per vote); source records read again by restarted
    sources are kept in the JSON (``replayed``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from matplotlib.axes import Axes

from chaos.plan import from_scenario
from ftctl.compare.runner import CaptureExtension
from ftctl.config.errors import ConfigError
from ftctl.config.load import load_topology
from ftctl.config.topology import Topology
from ftctl.console import console
from ftctl.kernel.history import HistoryEvent
from ftctl.run.chaos import ChaosExtension, expected_seconds
from ftctl.run.execute import RunContext, execute, snapshot_location
from ftctl.runtime.graph import ExecutionGraph
from ftctl.runtime.topology import MAX_RECORDS, RateChange
from ftctl.spark.host import HostResult
from ftctl.store import DirectoryStore
from ftctl.tables import seconds_cell

from . import Figure, FigureOptions, FigureResult, FigureRunFailed
from . import spark_points as sp
from .spark_points import Runner

ROOT = Path(__file__).resolve().parents[2]
SHARDER = ROOT / "topologies" / "sharder.yaml"
TARGET = "sharder[0]"
SETTLE = 6.0  # s at ``rate`` before the kill: the recovery baseline is the 5 s before it
CORES = 24  # per worker: two slots per instance of the 23, and the spare
# Fault-free, each vote is received once by the sharder, once by its shard and once (as
# that shard's new count) by the sink: what a run received beyond this was re-processed.
PER_VOTE = 3
PAPER = "the paper: 290x at 50M rows (0.15 s against 43.08 s), Rust/Noria, 50M rows per shard"


@dataclass(frozen=True)
class Setup:
    sizes: tuple[int, ...]
    protocols: tuple[str, ...]
    rate: float  # votes/s from vote N on, through the kill
    build_rate: float  # votes/s while the first N votes are aggregated
    # Lineage restarts 22 instances (10-15 s on a loaded 2-core machine): a shorter tail
    # ends the input before its output flows again, and no recovery can be measured.
    tail: float
    spares: int  # idle tasks ready to take over a restart, both protocols alike
    # Votes per source batch; None: the topology's (100). A Spark run's cost is mostly per
    # batch, so 2,000 a batch builds 200M votes at 250,000/s where 100 a batch kept up
    # with 12,000/s (docs/protocols.md).
    batch: int | None = None

    def kill_at(self, n: int) -> float:
        return round(n / self.build_rate + SETTLE, 3)

    def records(self, n: int) -> int:
        return n + int(self.rate * (SETTLE + self.tail))

    def topology(self, base: Topology, n: int) -> Topology:
        change = RateChange(at=n, rate=self.rate) if self.build_rate != self.rate else None
        return base.with_input(records=self.records(n), rate=self.build_rate,
                               batch=self.batch, rate_change=change)

    def scenario(self, n: int) -> str:
        return (f"name: kill-sharder\ndescription: kill {TARGET} {SETTLE:g} s after vote "
                f"{n} was due\nseed: 1\nfaults:\n  - type: kill-task\n"
                f"    at: {self.kill_at(n)}\n    target: '{TARGET}'\n")


# 200k to 5M votes built at 12,000/s, measured at 4,000/s. The sink keeps up with 12,000
# votes/s for minutes on the 2-core machine; 16,000 is at its edge, and with a core busy
# elsewhere it fell behind, so the kill hit a backlog (docs/protocols.md).
FULL = Setup((200_000, 1_000_000, 5_000_000), ("causal", "lineage"), 4_000.0, 12_000.0,
             70.0, 1)
QUICK = Setup((20_000, 100_000), ("causal", "lineage"), 4_000.0, 16_000.0, 25.0, 1)


@dataclass(frozen=True)
class Point:
    """One run at one size under one protocol."""

    protocol: str
    n: int
    passed: bool
    restarts: int
    detect_s: float | None
    first_out_s: float | None
    recovery_s: float | None  # detection to latency back within 10%
    snapshot_read: int | None  # bytes; None when a restored snapshot was gone at the end
    processed: int  # records received by every instance, all incarnations
    replayed: int  # source records read again by restarted sources
    records: int  # votes in the run (fault-free: PER_VOTE received per vote)
    run_id: str = ""
    load: float = 0.0

    @property
    def reprocessed(self) -> int:
        return self.processed - PER_VOTE * self.records


def snapshot_bytes_read(events: Sequence[HistoryEvent], store: Path) -> int | None:
    """Bytes of every snapshot a replacement was started from (``instance-started`` with
    a ``restore``); None when one of them is no longer in the store to be sized."""
    total = 0
    stored: DirectoryStore | None = None
    for e in events:
        restore = e.data.get("restore")
        if e.kind != "instance-started" or restore is None or e.instance is None:
            continue
        if stored is None:
            if not store.is_dir():
                return None
            stored = DirectoryStore(store)
        size = stored.size_of(int(restore), e.instance)
        if size is None:
            return None
        total += size
    return total


class _Keep(CaptureExtension):
    """compare's per-run figures, plus the first output after the kill and the snapshot
    bytes the replacements read (while the run directory still holds the snapshots)."""

    def __init__(self, inner: ChaosExtension):
        super().__init__(inner)
        self.recovery: Mapping[str, Any] = {}
        self.snapshot_read: int | None = None

    def keep(self, ctx: RunContext, result: HostResult, summary: dict[str, Any]) -> None:
        super().keep(ctx, result, summary)
        recs = summary.get("recovery") or []
        self.recovery = recs[0] if recs else {}
        store = Path(snapshot_location(ctx.request.store, ctx.store))
        self.snapshot_read = snapshot_bytes_read(ctx.store.read_history(), store)

    def point(self, protocol: str, n: int, records: int) -> Point:
        figs = self.figures
        if figs is None:
            raise FigureRunFailed(f"{protocol} at N={n:,}: the Spark run did not finish")
        rec = self.recovery
        detect, total = rec.get("detection_s"), rec.get("recovery_s")
        return Point(protocol, n, figs.passed, figs.restarts, detect,
                     rec.get("first_output_s"),
                     None if detect is None or total is None else total - detect,
                     self.snapshot_read, figs.records_processed, figs.replayed,
                     records, figs.run_id)


def setup_of(options: FigureOptions) -> Setup:
    base = QUICK if options.quick else FULL
    opts = options.options
    rate = sp.positive(opts, "rate", base.rate)
    setup = Setup(
        tuple(int(n) for n in sp.number_list(opts, "sizes", base.sizes, whole=True)),
        sp.protocol_list(opts, base.protocols), rate,
        sp.positive(opts, "build-rate", base.build_rate if "rate" not in opts else rate),
        sp.positive(opts, "tail", base.tail), int(sp.positive(opts, "spares", base.spares, True)),
        sp.batch(opts))
    if (votes := setup.records(max(setup.sizes))) > MAX_RECORDS:
        raise ConfigError("--opt", "sizes", f"{votes:,} votes with the settle and the tail, "
                          f"more than a source generates ({MAX_RECORDS:,})")
    return setup


def about(seconds: float) -> str:
    """A long wait as a person says it: "about 9 h 18 min", "about 4 min"."""
    minutes = max(1, round(seconds / 60))
    hours, minutes = divmod(minutes, 60)
    return f"about {hours} h {minutes} min" if hours else f"about {minutes} min"


HOUR = 3600.0
# Measured at 200M votes (docs/protocols.md): the same 40 batches a second at the kill.
BIG_BATCHES = "--opt batch=2000 --opt build-rate=250000 --opt rate=80000"


def plan_line(setup: Setup) -> str:
    """What the figure is about to take, printed before its first run: a large size's
    input alone lasts hours (50M votes at 12,000/s: 69 min a run)."""
    runs = len(setup.sizes) * len(setup.protocols)
    input_s = len(setup.protocols) * sum(setup.kill_at(n) + setup.tail for n in setup.sizes)
    batch = "" if setup.batch is None else f", {setup.batch:,} a batch"
    line = (f"000-fig2: {runs} run{'s' if runs != 1 else ''}, whose input alone lasts "
            f"{about(input_s)} (N votes at {setup.build_rate:,.0f}/s each{batch})")
    if setup.batch is None and input_s > HOUR:
        line += f". {BIG_BATCHES} builds votes 20 times as fast"
    return line


def run(options: FigureOptions, runner: Runner = execute) -> FigureResult:
    setup = setup_of(options)
    base = load_topology(SHARDER)
    out = options.out
    out.mkdir(parents=True, exist_ok=True)
    points: list[Point] = []
    console.print(plan_line(setup), highlight=False)
    with sp.warm_cluster(options.options.get("master"), CORES, "ftctl-000-fig2-") as master:
        for n in setup.sizes:
            topo = setup.topology(base, n)
            graph = ExecutionGraph(topo)
            scenario = out / f"kill-sharder-{n}.yaml"
            scenario.write_text(setup.scenario(n))
            for proto in setup.protocols:
                duration = expected_seconds(graph)
                keep = _Keep(ChaosExtension(from_scenario(scenario, graph.order, duration,
                                                          None), duration))
                # The input alone lasts N / build-rate s (69 min at 50M): the usual
                # budget comes on top of it.
                request = sp.point_request(topo, proto, master, out / "runs", "000-fig2",
                                           f"{proto} N={n}", spares=setup.spares,
                                           timeout=duration + sp.RUN_TIMEOUT)
                sp.run_point(runner, request, keep)
                points.append(sp.announce(keep.point(proto, n, setup.records(n))))
    return result(points, setup, out)


def ratios(points: Sequence[Point]) -> dict[int, dict[str, Any]]:
    """Per size: lineage / causal first output and recovery. When lineage's latency did
    not settle before the input ended, its recovery is at least its first output (output
    cannot be back to normal before it flows again): a lower bound, marked so."""
    by = {(p.protocol, p.n): p for p in points}
    out: dict[int, dict[str, Any]] = {}
    for n in dict.fromkeys(p.n for p in points):
        c, ln = by.get(("causal", n)), by.get(("lineage", n))
        if c is None or ln is None:
            continue
        got: dict[str, Any] = {}
        if c.first_out_s and ln.first_out_s is not None:
            got["first_output"] = round(ln.first_out_s / c.first_out_s, 1)
        if c.recovery_s:
            if ln.recovery_s is not None:
                got["recovery"] = round(ln.recovery_s / c.recovery_s, 1)
            elif ln.first_out_s is not None:
                got["recovery_at_least"] = round(
                    (ln.first_out_s - (ln.detect_s or 0.0)) / c.recovery_s, 1)
        out[n] = got
    return out


def _ratio_note(n: int, r: Mapping[str, Any]) -> str:
    parts = []
    if "first_output" in r:
        parts.append(f"first output {r['first_output']:g}x")
    if "recovery" in r:
        parts.append(f"recovery {r['recovery']:g}x")
    elif "recovery_at_least" in r:
        parts.append(f"recovery >= {r['recovery_at_least']:g}x (lineage's latency did not "
                     "settle before the input ended)")
    return f"N={n:,}: lineage / causal " + (", ".join(parts) or "n/a")


def result(points: Sequence[Point], setup: Setup, out: Path) -> FigureResult:
    """The table, ratios and plot over measured (or, in tests, made-up) points."""
    rows = tuple((f"{p.n:,}", p.protocol, "yes" if p.passed else "NO", p.restarts,
                  seconds_cell(p.detect_s), seconds_cell(p.first_out_s), seconds_cell(p.recovery_s),
                  "-" if p.snapshot_read is None else f"{p.snapshot_read:,}",
                  f"{p.reprocessed:,}", p.load) for p in points)
    per_size = ratios(points)
    summary = {"setup": asdict(setup),
               "points": [{**asdict(p), "reprocessed": p.reprocessed} for p in points],
               "ratios": {str(n): r for n, r in per_size.items()},
               "all_exactly_once": all(p.passed for p in points)}
    js = out / "fig2.json"
    js.write_text(json.dumps(summary, indent=1))
    png = plot(points, out / "fig2.png")
    return FigureResult(
        title=f"000 Figure 2: sharder[0] killed, recovery vs state (Spark; votes built at "
              f"{setup.build_rate:g}/s, measured at {setup.rate:g}/s, {setup.tail:g} s tail"
              f"{sp.batch_note(setup.batch)})",
        header=("N votes", "protocol", "exactly-once", "restarts", "detect s",
                "first output s", "recovery s", "snapshot bytes read", "re-processed",
                "load1"),
        rows=rows, files=(js, png), summary=summary,
        notes=(*(_ratio_note(n, r) for n, r in per_size.items()), PAPER + ".",
               f"sharder[0] killed {SETTLE:g} s after vote N was due; {setup.spares} spare "
               "task(s) for both protocols. recovery: detection to sink latency back within "
               "10% of the 5 s before the kill; snapshot bytes read: the snapshots the "
               "replacements were started from; re-processed: records received by every "
               f"instance, all incarnations, beyond the fault-free {PER_VOTE} per vote."))


def plot(points: Sequence[Point], png: Path) -> Path:
    def draw(ax: Axes) -> None:
        for i, proto in enumerate(dict.fromkeys(p.protocol for p in points)):
            for key, style, what in (("recovery_s", "-", "recovery"),
                                     ("first_out_s", "--", "first output")):
                pts = [(p.n, getattr(p, key)) for p in points
                       if p.protocol == proto and getattr(p, key)]
                if pts:
                    ax.plot(*zip(*pts, strict=True), style, color=f"C{i}", marker="o",
                            label=f"{proto}: {what}")
    return sp.line_plot(png, (5.5, 3.8), draw, ("votes aggregated before the kill (N)",
                     "seconds", "sharder kill: recovery vs state (Spark)"), log=True)


FIGURE = Figure(
    name="000-fig2",
    paper="000",
    title="causal vs lineage: recovery after a sharder kill against aggregated state",
    hosts=("spark",),
    run=run,
    options={
        "sizes": "votes aggregated before the kill, comma-separated (default "
                 "200000,1000000,5000000; --quick 20000,100000)",
        "protocols": "default causal,lineage (name or name:key=value+key=value)",
        "rate": "votes/s from vote N on, through the kill (default 4000)",
        "build-rate": "votes/s for the first N votes (default 12000, --quick 16000; "
                      "--rate's value when only rate is given)",
        "tail": "seconds of input after the kill (default 70; --quick 25)",
        "spares": "idle tasks ready to take over a restart, both protocols (default 1)",
        "batch": sp.BATCH_HELP,
        "master": "run on this Spark master instead of a local cluster started here",
    },
)
