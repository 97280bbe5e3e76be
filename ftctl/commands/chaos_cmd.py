"""``ftctl chaos``: a run with scripted faults, verified, with recovery metrics per fault.

The faults come from ``--kill N`` (random kills in the middle 60% of the run), a scenario
file, or the schedule another run recorded (``--replay``, e.g. to put a second protocol
through the same faults). The run is rate-paced (``--rate``), so it has a known length
and a steady pre-fault baseline for the recovery metrics.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from chaos.hostctx import HostFaultContext
from chaos.nemesis import Nemesis
from ftctl.cluster.labels import LabelSyntaxError, expand_labels
from ftctl.commands.chaos_plan import (
    Schedule,
    check_cluster,
    check_triggers,
    from_kills,
    from_replay,
    from_scenario,
)
from ftctl.commands.cluster_options import DEFAULT_BIND, Bind, Store, check_bind, check_store
from ftctl.commands.common import Spares, check_scope, protocol_and_params, user_errors
from ftctl.commands.runner import (
    DEFAULT_SPARES,
    SLOTS_PER_INSTANCE,
    RunContext,
    RunExtension,
    RunRequest,
    Verbose,
    execute,
)
from ftctl.config.errors import ConfigError
from ftctl.config.load import load_topology
from ftctl.config.topology import Topology
from ftctl.console import console
from ftctl.metrics.runreport import analyze, build_series
from ftctl.results import DEFAULT_ROOT, atomic_write_json
from ftctl.runtime.graph import ExecutionGraph
from ftctl.runtime.pace import Pace
from ftctl.spark.host import HostResult
from ftctl.tables import print_table

DEFAULT_RECORDS = 50_000
TARGET_SECONDS = 25.0  # default run length: room for a baseline before and after faults
FAULTS_GRACE = 60.0  # how long a finished run waits for faults still at work (restores)


def register(app: typer.Typer) -> None:
    app.command("chaos")(chaos)


@user_errors
def chaos(
    topology_file: Annotated[Path, typer.Argument(help="Topology YAML file.")],
    kill: Annotated[int | None, typer.Option("--kill", min=1, help="Kill N random operator "
                                             "tasks at random times mid-run.")] = None,
    target: Annotated[str, typer.Option("--target", help="What --kill kills: task, executor, "
                                        "worker or container (docker).")] = "task",
    scenario: Annotated[Path | None, typer.Option("--scenario", help="Chaos-scenario YAML.")]
    = None,
    replay: Annotated[str | None, typer.Option("--replay", help="Apply the fault schedule "
                                               "of this stored run.")] = None,
    protocol: Annotated[str, typer.Option("--protocol", "-p",
                                          help="Fault-tolerance protocol.")] = "checkpoint",
    param: Annotated[list[str] | None, typer.Option(
        "--param", help="Protocol parameter key=value (repeatable).")] = None,
    seed: Annotated[int | None, typer.Option("--seed", help="Seed of the fault schedule.")]
    = None,
    workers: Annotated[int, typer.Option("--workers", min=1,
                                         help="Workers of the local cluster.")] = 2,
    label: Annotated[list[str] | None, typer.Option(
        "--label", help="Worker labels, one --label per worker, cycled (rack=a).")] = None,
    records: Annotated[int | None, typer.Option("--records", min=1, help="Input records "
                                                f"(default {DEFAULT_RECORDS:,}).")] = None,
    rate: Annotated[float | None, typer.Option(
        "--rate", min=0.001, help="Records/s per source (default: a ~25 s run).")] = None,
    master: Annotated[str | None, typer.Option(
        "--master", help="spark://host:port of a running cluster (task faults only).")] = None,
    backend: Annotated[str, typer.Option("--backend", help="local or docker.")] = "local",
    results: Annotated[Path, typer.Option("--results", help="Where runs are written.")]
    = DEFAULT_ROOT,
    timeout: Annotated[float, typer.Option("--timeout", min=1,
                                           help="Give up after this many seconds.")] = 600.0,
    spares: Spares = DEFAULT_SPARES,
    bind: Bind = DEFAULT_BIND,
    store: Store = None,
    as_json: Annotated[bool, typer.Option("--json",
                                          help="Print a machine-readable summary.")] = False,
    verbose: Verbose = False,
) -> None:
    """Run TOPOLOGY under scripted faults, verify exactly-once and measure recovery."""
    if sum(x is not None for x in (kill, scenario, replay)) != 1:
        raise ConfigError("ftctl chaos", None, "give exactly one of --kill, --scenario, --replay")
    if master is not None and not master.startswith("spark://"):
        raise ConfigError("--master", None, f"expected spark://host:port, got {master!r}")
    if backend not in ("local", "docker"):
        raise ConfigError("--backend", None, f"expected local or docker, got {backend!r}")
    try:
        worker_labels = expand_labels(label, workers)
    except LabelSyntaxError as exc:
        raise ConfigError("--label", None, str(exc)) from None
    topology = load_topology(topology_file)
    info, given = protocol_and_params(protocol, param)
    params = info.resolve(given)
    check_scope(params, topology, str(topology_file))
    replayed = None
    if replay is not None:
        schedule, replayed = from_replay(replay, results, ExecutionGraph(topology).order)
        _inherit_input(topology, replayed.read_config(), records, rate)
    size_input(topology, records, rate)
    graph = ExecutionGraph(topology)
    duration = expected_seconds(graph)
    if kill is not None:
        schedule = from_kills(kill, target, graph.order, duration, seed if seed is not None else 1)
    elif scenario is not None:
        schedule = from_scenario(scenario, graph.order, duration, seed)
    check_cluster(schedule, master, worker_labels, backend)
    check_triggers(schedule, [info])
    request = RunRequest(
        topology, info, params, master=master, workers=workers, results=results,
        timeout=timeout, as_json=as_json, backend=backend, labels=label,
        # Each worker can hold every instance twice over: a rack failure leaves room.
        cores=SLOTS_PER_INSTANCE * len(graph.order), kind="chaos", spares=spares, verbose=verbose,
        bind=check_bind(bind), store=check_store(store),
        config={"chaos": {"schedule": schedule.source, "name": schedule.name,
                          "seed": schedule.seed, "expected_s": round(duration, 3),
                          "replay_of": replayed.run_id if replayed else None}})
    raise typer.Exit(execute(request, ChaosExtension(schedule, duration)))


def expected_seconds(graph: ExecutionGraph) -> float:
    pace = Pace.of(graph.topology.input) or Pace(1.0)
    spans = [hi - lo for lo, hi in (graph.source_range(s) for s in graph.sources)]
    return pace.due(max(spans, default=0))


def size_input(topology: Topology, records: int | None, rate: float | None) -> None:
    if records is not None:
        topology.input.records = records
    elif topology.input.rate is None:
        topology.input.records = max(topology.input.records, DEFAULT_RECORDS)
    if rate is not None:
        topology.input.rate = rate
    elif topology.input.rate is None:
        graph = ExecutionGraph(topology)
        per_source = max((hi - lo for lo, hi in map(graph.source_range, graph.sources)),
                         default=topology.input.records)
        topology.input.rate = round(per_source / TARGET_SECONDS, 3)


def _inherit_input(topology: Topology, config: dict[str, Any], records: int | None,
                   rate: float | None) -> None:
    """A replay runs the recorded run's input unless told otherwise."""
    recorded = (config.get("topology") or {}).get("input") or {}
    if records is None and recorded.get("records"):
        topology.input.records = int(recorded["records"])
    if rate is None and recorded.get("rate"):
        topology.input.rate = float(recorded["rate"])


class ChaosExtension(RunExtension):
    def __init__(self, schedule: Schedule, duration: float):
        self.schedule = schedule
        self.duration = duration
        self.nemesis: Nemesis | None = None
        self.shift = 0.0

    def attach(self, ctx: RunContext) -> None:
        host, store = ctx.host, ctx.store
        fault_ctx = HostFaultContext(
            clock=host.now, instance_ids=ctx.graph.order, task_pids=host.task_pid,
            cluster=ctx.cluster, snapshot=host.snapshot_in_progress,
            recovery=host.recovery_in_progress, apply_channel=host.apply_channel,
            clear_channel=host.clear_channel)
        counters = ctx.counters

        def log(kind: str, **data: Any) -> None:
            store.event(kind, **data)
            if kind == "fault-inject":  # shown on the run's progress line
                counters["faults injected"] = counters.get("faults injected", 0) + 1

        self.nemesis = self.schedule.nemesis(fault_ctx, log)
        store.event("chaos-schedule", name=self.schedule.name, seed=self.schedule.seed,
                    faults=[p.to_json() for p in self.schedule.faults],
                    expected_s=round(self.duration, 3))
        # Offsets count from when the topology is running, not from cluster start.
        host.on_start = self.nemesis.start

    def host_done(self, ctx: RunContext, result: HostResult) -> None:
        assert self.nemesis is not None
        self.shift = ctx.store.clock() - ctx.host.now()
        deadline = time.monotonic() + FAULTS_GRACE
        if self.nemesis.busy():
            ctx.say("waiting for faults still at work (restores, pauses) to finish")
        while self.nemesis.busy() and time.monotonic() < deadline:
            time.sleep(0.2)
        self.nemesis.stop()
        atomic_write_json(ctx.store.path / "schedule.json", self.nemesis.recorded())

    def summarize(self, ctx: RunContext, result: HostResult, summary: dict[str, Any]) -> None:
        series = build_series(result.latency, result.metrics, ctx.graph.sinks, self.shift)
        events = ctx.store.read_events()
        report, _ = analyze(ctx.store.path, events, series, self.shift,
                            title=f"{ctx.request.topology.name} / {ctx.request.info.name}")
        doc = report.to_json()
        summary["schedule"] = {"name": self.schedule.name, "seed": self.schedule.seed,
                               "source": self.schedule.source}
        summary["faults"] = _injected(events)
        summary["recovery"] = doc["faults"]
        summary["availability"] = doc["availability"]
        summary["events"] = {k: sum(1 for e in events if e.get("kind") == k)
                             for k in ("fault-inject", "fault-error", "detected", "restart",
                                       "replay", "recovered")}

    def print(self, summary: dict[str, Any]) -> None:
        print_recovery(summary)

    def close(self) -> None:
        if self.nemesis is not None:
            self.nemesis.stop()  # continue paused processes, lift channel faults


def _injected(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    from ftctl.metrics.runreport import injected

    return injected(events)


def _s(v: Any) -> str:
    return "-" if v is None else f"{v:.2f}"


RECOVERY_LEGEND = {
    "at s": "fault time into the run", "detect s": "fault to detection",
    "restart s": "fault to restart", "first out s": "fault to first output after restart",
    "recover 10% s": "fault to latency back within 10% of before",
    "recover 1.2x s": "within 1.2x (relative-latency threshold)",
    "thr dip": "lowest throughput vs before",
}


def print_recovery(summary: dict[str, Any]) -> None:
    table = Table(title=f"recovery per fault ({summary['schedule']['name']})")
    cols = ("fault", "target", "at s", "detect s", "restart s", "first out s",
            "recover 10% s", "recover 1.2x s", "thr dip")
    for col in cols:
        table.add_column(col, justify="left" if col in ("fault", "target") else "right")
    for r in summary.get("recovery", []):
        dip = r.get("throughput_dip")
        table.add_row(r["fault"], r["target"], f"{r['t_fault']:.2f}", _s(r["detection_s"]),
                      _s(r["restart_s"]), _s(r["first_output_s"]), _s(r["recovery_s"]),
                      _s(r["recovery_rl_s"]), "-" if dip is None else f"{dip:.0%}")
    print_table(table, RECOVERY_LEGEND)
    for f in summary.get("faults", []):
        if f.get("error"):
            what = "optional fault not injected" if f.get("optional") else "fault not injected"
            console.print(f"[yellow]{what}[/yellow]: {f['fault']} {f['target']}: "
                          f"{f['error']}", highlight=False)
    avail = summary.get("availability")
    if avail:
        low = min(avail["available"], default=avail["total"])
        console.print(f"available queries: {low} of {avail['total']} at the lowest",
                      highlight=False)
