"""What a run with scripted faults adds to ``execute``: the nemesis attached to the host,
the input sized for a run of known length, the schedule a stored run recorded, and the
recovery report per fault. ``ftctl chaos`` and ``ftctl compare protocols`` share it."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from rich.table import Table

from chaos.hostctx import HostFaultContext
from chaos.nemesis import Nemesis
from chaos.plan import Schedule
from ftctl.config.errors import ConfigError
from ftctl.config.scenario import parse_target
from ftctl.config.topology import Topology
from ftctl.console import console
from ftctl.kernel.clocks import ClockFault
from ftctl.kernel.history import HistoryEvent
from ftctl.metrics.runreport import analyze, build_series
from ftctl.metrics.struck import last_placement, struck_nothing
from ftctl.results import RunStore, atomic_write_json
from ftctl.run.execute import RunContext, RunExtension
from ftctl.runtime.graph import ExecutionGraph
from ftctl.runtime.pace import Pace
from ftctl.spark.host import HostResult
from ftctl.tables import print_table, seconds_cell

DEFAULT_RECORDS = 50_000
TARGET_SECONDS = 25.0  # default run length: room for a baseline before and after faults
FAULTS_GRACE = 60.0  # how long a finished run waits for faults still at work (restores)


def expected_seconds(graph: ExecutionGraph) -> float:
    pace = Pace.of(graph.topology.input) or Pace(1.0)
    spans = [hi - lo for lo, hi in (graph.source_range(s) for s in graph.sources)]
    return pace.due(max(spans, default=0))


def size_input(topology: Topology, records: int | None, rate: float | None) -> Topology:
    """The topology with its input sized for a paced run: ``records`` and ``rate`` when
    given; an unpaced topology gets at least ``DEFAULT_RECORDS`` and the rate that emits
    them in ``TARGET_SECONDS``."""
    if records is None and topology.input.rate is None:
        records = max(topology.input.records, DEFAULT_RECORDS)
    sized = topology.with_input(records=records, rate=rate)
    if sized.input.rate is None:
        graph = ExecutionGraph(sized)
        per_source = max((hi - lo for lo, hi in map(graph.source_range, graph.sources)),
                         default=sized.input.records)
        sized = sized.with_input(rate=round(per_source / TARGET_SECONDS, 3))
    return sized


def from_replay(run_id: str, root: Path, instances: Sequence[str]) -> tuple[Schedule, RunStore]:
    """The schedule a stored run recorded (schedule.json, else its fault events)."""
    try:
        store = RunStore.open(run_id, root)
    except (FileNotFoundError, ValueError, LookupError) as exc:
        raise ConfigError("--replay", None, str(exc)) from None
    path = store.path / "schedule.json"
    record: Mapping[str, Any]
    if path.exists():
        record = json.loads(path.read_text())
        nemesis_faults = Nemesis.from_record(record, _NO_CONTEXT).schedule
    else:
        nemesis_faults = Nemesis.from_events(store.read_history(), _NO_CONTEXT).schedule
        record = {}
    if not nemesis_faults:
        raise ConfigError("--replay", None, f"run {store.run_id} recorded no fault to replay")
    for p in nemesis_faults:
        if parse_target(p.target).kind == "instance" and p.target not in instances:
            raise ConfigError("--replay", None,
                              f"{p.type} targets {p.target}, which this topology does not have")
    schedule = Schedule(nemesis_faults, str(record.get("name", f"replay-{store.run_id}")),
                        int(record.get("seed", 0)), f"replay of {store.run_id}")
    return schedule, store


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
            recovery=host.recovery_in_progress, phase=partial(_phase_open, host),
            holders=partial(_phase_holders, host),
            apply_channel=host.apply_channel,
            clear_channel=host.clear_channel,
            pid_mismatch=host.pid_mismatch,
            # A cluster ftctl did not start: its pids are not ours to signal.
            agent=partial(_agent_fault, host) if ctx.request.master is not None else None,
            clock_agent=partial(_clock_fault, host), store=host.store,
            lost_writes=host.expect_lost_writes)
        counters = ctx.counters

        def log(kind: str, **data: Any) -> None:
            store.event(kind, **data)
            if kind == "fault-injected":  # shown on the run's progress line
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
        events = ctx.store.read_history()
        report, _ = analyze(ctx.store.path, events, series, self.shift,
                            title=f"{ctx.request.topology.name} / {ctx.request.info.name}")
        doc = report.to_json()
        summary["schedule"] = {"name": self.schedule.name, "seed": self.schedule.seed,
                               "source": self.schedule.source}
        summary["faults"] = _injected(events)
        summary["struck_nothing"] = struck_nothing(events, self.shift)
        summary["placement"] = last_placement(events)
        summary["recovery"] = doc["faults"]
        summary["availability"] = doc["availability"]
        summary["events"] = {k: sum(1 for e in events if e.kind == k)
                             for k in ("fault-injected", "fault-error", "failure-detected",
                                       "instance-started", "source-rewound", "recovered")}

    def print(self, summary: dict[str, Any]) -> None:
        print_recovery(summary)

    def close(self) -> None:
        if self.nemesis is not None:
            self.nemesis.stop()  # continue paused processes, lift channel faults


def _injected(events: list[HistoryEvent]) -> list[dict[str, Any]]:
    from ftctl.metrics.runreport import injected

    return injected(events)


RECOVERY_LEGEND = {
    "at s": "fault time into the run", "detect s": "fault to detection",
    "restart s": "fault to restart", "first out s": "fault to first output after restart",
    "recover 10% s": "fault to latency back within 10% of before",
    "recover 1.2x s": "within 1.2x (relative-latency threshold)",
    "thr dip": "how far sink throughput fell below its median of the 5 s before, until "
               "recovered (100%: output stopped; none: it never fell below)",
}


def dip_words(dip: float | None) -> str:
    """A throughput dip as the terminal prints it: 90%, or none when throughput never fell
    below before (a catch-up burst; "-21%" read as a number gone wrong)."""
    return "-" if dip is None else "none" if dip <= 0 else f"{dip:.0%}"


def print_recovery(summary: dict[str, Any]) -> None:
    table = Table(title=f"recovery per fault ({summary['schedule']['name']})")
    cols = ("fault", "target", "at s", "detect s", "restart s", "first out s",
            "recover 10% s", "recover 1.2x s", "thr dip")
    for col in cols:
        table.add_column(col, justify="left" if col in ("fault", "target") else "right")
    for r in summary.get("recovery", []):
        dip = r.get("throughput_dip")
        times = ("detection_s", "restart_s", "first_output_s", "recovery_s", "recovery_rl_s")
        table.add_row(r["fault"], r["target"], f"{r['t_fault']:.2f}",
                      *(seconds_cell(r[k]) for k in times), dip_words(dip))
    print_table(table, RECOVERY_LEGEND)
    print_breakdown(summary.get("recovery", []))
    where = summary.get("placement") or {}
    if where:
        per: dict[str, int] = {}
        for worker in where.values():
            per[worker] = per.get(worker, 0) + 1
        console.print("instances per worker at the end: " + ", ".join(
            f"{w} {n}" for w, n in sorted(per.items())), highlight=False, soft_wrap=True)
    for line in summary.get("struck_nothing", []):
        console.print(f"[yellow]not a test[/yellow]: {line}", highlight=False, soft_wrap=True)
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


def _restore(b: dict[str, Any]) -> str:
    """The restore within ``start``: the longest a task took, and the bytes read."""
    took, size = b.get("restore_s"), b.get("restore_bytes")
    if took is None and not size:
        return "-"
    return f"{seconds_cell(took)} s\n{int(size or 0):,} B"  # a line each: they never part


BREAKDOWN_LEGEND = {
    "detect": "fault to detection", "plan": "to the protocol's first restart or rollback",
    "start": "to the restarts running (slot or Spark job, restore, registration)",
    "replay": "to the first output", "catch-up": "to latency back within 10%",
    "restarts": "slot: a waiting slot; queued: a fenced survivor's slot; job: a Spark job",
    "restore": "the slowest restore within start; snapshot bytes read",
}


def print_breakdown(rows: list[dict[str, Any]]) -> None:
    """Where each fault's recovery went: parts that add up to its recovery time, then a
    row for each later detection of the same fault (a rack's second worker, a restart
    lost with its worker), with its own plan, start and restarts."""
    table: list[tuple[str, dict[str, Any]]] = []
    for r in rows:
        b = r.get("breakdown")
        if not b:
            continue
        found = b.get("detections") or []
        if len(found) < 2:
            table.append((f"{r['fault']} at {r['t_fault']:.1f}", b))
            continue
        table.append((f"{r['fault']} at {r['t_fault']:.1f}",
                      {**b, "started_by": found[0]["started_by"]}))
        table.extend((f"  again at +{d['at']:.2f} s",
                      {"plan": d["plan"], "start": d["start"], "started_by": d["started_by"]})
                     for d in found[1:])
    breakdown_table("where the recovery went (seconds)", "fault", table)


def breakdown_table(title: str, first: str, rows: list[tuple[str, dict[str, Any]]]) -> None:
    """One row of recovery parts per (name, breakdown); nothing without rows."""
    if not rows:
        return
    table = Table(title=title)
    for col in (first, "detect", "plan", "start", "replay", "catch-up", "restarts",
                "restore"):
        table.add_column(col, justify="left" if col in (first, "restarts") else "right")
    for name, b in rows:
        # One kind a line: at 80 columns a count never parts from its kind.
        how = "\n".join(f"{n} {k}" for k, n in sorted((b.get("started_by") or {}).items()))
        table.add_row(name, *(seconds_cell(b.get(k)) for k in (
            "detect", "plan", "start", "replay", "catch_up")), how or "-", _restore(b))
    print_table(table, BREAKDOWN_LEGEND)


class _NoContext:
    """Enough of a FaultContext to build a schedule from a record; never struck."""

    def instances(self) -> list[str]:
        return []

    def now(self) -> float:
        return 0.0


_NO_CONTEXT: Any = _NoContext()


def _clock_fault(host: Any, instance: str, fault: ClockFault) -> bool:
    from ftctl.spark.clock_faults import apply_clock_fault

    return apply_clock_fault(host, instance, fault)


def _agent_fault(host: Any, instance: str, op: str, seconds: float | None,
                 factor: float) -> bool:
    from ftctl.spark import agent

    return bool(host.agent_fault(instance, agent.payload(op, seconds, factor)))


def _phase_open(host: Any, phase: str) -> bool:
    """Whether ``phase`` is open in the kernel's phase set (its DeclarePhase), for
    ``after: {phase}`` and ``during``. The set takes a lock: the host thread changes it."""
    return bool(host.phases.active(phase))


def _phase_holders(host: Any, phase: str) -> list[str]:
    """The instances holding ``phase`` now, for ``target: phase-holder``."""
    return list(host.phases.holders(phase))
