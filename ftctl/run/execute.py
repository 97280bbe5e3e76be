"""The run machinery ``ftctl run`` and ``ftctl chaos`` share: cluster, session, host, verdict.

``execute`` starts (or uses) a cluster, runs the topology on the Spark host, verifies the
output and writes the run directory. A ``RunExtension`` hooks into it: ``ftctl chaos``
attaches its nemesis once the host exists, stops it when the host is done, and adds the
recovery report to the summary. Teardown is always this module's: no process outlives it.
"""

from __future__ import annotations

import contextlib
import json
import math
import shutil
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.table import Table

from ftctl.backends import check_backend, make_cluster
from ftctl.cluster import ClusterError, LocalCluster
from ftctl.cluster.labels import expand_labels
from ftctl.config.topology import Topology
from ftctl.console import EXIT_FAILED, EXIT_INFRA, EXIT_OK, console, err_console
from ftctl.progress import LiveLine
from ftctl.results import RunStore
from ftctl.runtime.graph import ExecutionGraph
from ftctl.sim.golden import golden_output
from ftctl.spark import wire
from ftctl.spark.capacity import master_source
from ftctl.spark.host import HostResult, SparkHost
from ftctl.spark.session import (
    collect_executor_logs,
    driver_conf,
    start_session,
    stop_session,
)
from ftctl.spark.standby import standby_pool
from ftctl.store import join_location, local_dirs
from ftctl.tables import print_table
from ftctl.verify.checker import Verdict
from ftctl.verify.golden import golden_files
from ftctl.verify.oracle import OracleResult, oracle_check
from ftctl.verify.outofcore import verify_outputs
from protocols.contract.params import ProtocolParams
from protocols.contract.spec import Guarantee
from protocols.contract.view import GraphView
from protocols.registry import Protocol

EXIT_INTERRUPTED = 130
LOGS = "logs"  # in the run folder: the driver's and executors' JVM output
SPILL = "spill"  # in the run folder while it streams: output, latency and metrics past a tail
# Task slots asked of a local cluster per instance: room for a replacement to be
# scheduled while the task it replaces is still being cancelled.
SLOTS_PER_INSTANCE = 2
# Empty slots kept waiting (``JobRunner``) when the user does not say: on a cluster ftctl
# starts, enough to cover its largest failure domain (``ftctl.spark.standby``); on one it
# did not start, whose workers it does not know, one (a single kill's replacement).
DEFAULT_SPARES: int | None = None
SPARES_ON_A_GIVEN_MASTER = 1

Say = Callable[[str], None]

@dataclass
class RunRequest:
    topology: Topology
    info: Protocol
    params: ProtocolParams  # resolved for the run (ProtocolSpec.resolve)
    master: str | None
    workers: int
    results: Path
    timeout: float
    as_json: bool
    backend: str = "local"
    labels: list[str] | None = None  # per worker, cycled (``--label``)
    cores: int | None = None  # per worker; None: SLOTS_PER_INSTANCE * instances / workers
    kind: str = "run"
    config: dict[str, Any] = field(default_factory=dict)  # extra keys for config.json
    quiet: bool = False  # print nothing (a caller such as compare reports for itself)
    # Empty slots kept waiting for a restart; None: the failure-domain default.
    spares: int | None = DEFAULT_SPARES
    start: str = "slot"  # "job": a Spark job per instance and incarnation (``--start``)
    verbose: bool = False  # stream Spark's JVM logs to stderr too (always in logs/)
    # A caller that is quiet but shows its own progress line (compare) gets the steps here.
    live: Callable[[str], None] | None = None
    # Work dir of a cluster the caller started (compare's shared one): executor logs.
    work_dir: Path | None = None
    bind: str = wire.HOST  # where the control channel listens (``--bind``)
    store: str | None = None  # snapshot store path or URI (``--store``); None: in the run dir


@dataclass
class RunContext:
    """What an extension gets to work with once the host exists."""

    request: RunRequest
    store: RunStore
    graph: ExecutionGraph
    host: SparkHost
    cluster: LocalCluster | None
    say: Say
    # Shown on the run's progress line; an extension counts into it (faults injected).
    counters: dict[str, int] = field(default_factory=dict)


class RunExtension:
    """Hooks into ``execute``; every method is optional."""

    def attach(self, ctx: RunContext) -> None:
        """The host is built (not running yet)."""

    def host_done(self, ctx: RunContext, result: HostResult) -> None:
        """The host has finished; verification comes next."""

    def summarize(self, ctx: RunContext, result: HostResult, summary: dict[str, Any]) -> None:
        """Add to the summary (and write files into the run directory)."""

    def print(self, summary: dict[str, Any]) -> None:
        """Print after the verdict table."""

    def close(self) -> None:
        """Always called, before the cluster goes down (heal what is still injected)."""


def standby_for(req: RunRequest, instances: int) -> int:
    """The empty slots this run keeps waiting: ``--spares`` if given, else enough for the
    largest failure domain of the cluster ftctl starts (one on a given ``--master``)."""
    if req.spares is not None:
        return req.spares
    if req.master is not None:
        return SPARES_ON_A_GIVEN_MASTER
    return standby_pool(instances, expand_labels(req.labels, req.workers))


def execute(req: RunRequest, ext: RunExtension | None = None) -> int:
    ext = ext or RunExtension()
    topology, info = req.topology, req.info
    graph = ExecutionGraph(topology)
    n = len(graph.order)
    master = req.master
    spares = standby_for(req, n)
    run_store = RunStore.create(req.results, topology=topology.name, protocol=info.name,
                                kind=req.kind)
    run_store.write_config({
        "topology": topology.model_dump(by_alias=True), "protocol": info.name,
        "params": req.params.model_dump(mode="json"), "master": master,
        "workers": None if master else req.workers,
        "host": "spark", "backend": None if master else req.backend,
        "labels": req.labels, "spares": spares, "start": req.start, "bind": req.bind,
        "store": snapshot_location(req.store, run_store), **req.config,
    })
    say = _sayer(req.as_json or req.quiet)
    say(f"run {run_store.run_id} -> {run_store.path}")
    live = LiveLine(quiet=req.as_json or req.quiet)
    step: Say = req.live or live.update
    with live:
        step("the golden run: the topology without faults, on the simulation host")
        # Computed (and cached) before the cluster starts, so that a topology the
        # simulation host cannot run fails first; not held while the run goes: at 115 B a
        # record it is 5.8 GB at 50M votes, which the tasks need. The verdict reads it back.
        golden_files(topology, golden_output)
    timings: dict[str, float] = {}
    cluster: LocalCluster | None = None
    spark: Any = None
    app_id = ""
    state_dir = (Path(".ftctl") / "runs" / run_store.run_id).resolve()
    keep_state = False
    t_start = time.monotonic()
    try:
        if master is None:
            # Spark's cores are a count, not CPUs: room for every instance twice over
            # and every empty slot.
            cores = req.cores or math.ceil((SLOTS_PER_INSTANCE * n + spares) / req.workers)
            # Docker: the results dir is bind-mounted so tasks in containers write snapshots
            # where the driver reads them; the cluster is owned by this process, so
            # `cluster prune` can clean up after a crash.
            cluster = make_cluster(check_backend(req.backend), workers=req.workers,
                                   cores=cores, labels=req.labels, state_dir=state_dir,
                                   mounts=[req.results, *local_dirs(req.store)],
                                   run_id=run_store.run_id, owned=True)
            run_store.event("cluster-starting", workers=req.workers, cores=cores,
                            backend=req.backend)
            with live:
                cluster.up(progress=step)
            live.note(f"cluster up in {time.monotonic() - t_start:.1f} s")
            master = cluster.master_url
            timings["cluster_s"] = round(time.monotonic() - t_start, 2)
        t = time.monotonic()
        with live:
            step(f"starting a Spark session on {master}")
            spark = start_session(master, f"ftctl-{run_store.run_id}", slots=n + spares,
                                  log_dir=run_store.path / LOGS, verbose=req.verbose,
                                  conf=driver_conf(req.bind))
        app_id = spark.sparkContext.applicationId
        timings["session_s"] = round(time.monotonic() - t, 2)
        run_store.event("session-started", master=master, seconds=timings["session_s"])

        host = SparkHost(spark.sparkContext, graph, info, req.params, run_store.run_id,
                         snapshot_location(req.store, run_store), rate=topology.input.rate,
                         history=run_store.history, timeout=req.timeout, spares=spares,
                         start=req.start, bind=req.bind,
                         workers=master_source(cluster) if cluster is not None else None,
                         spill=run_store.path / SPILL)
        ctx = RunContext(req, run_store, graph, host, cluster, say)
        ext.attach(ctx)
        with live:
            host.progress = _run_line(step, info.name, graph, ctx.counters)
            result = host.run()
        shift = run_store.clock() - host.now()  # the host's clock onto the events'
        ext.host_done(ctx, result)
        timings["run_s"] = round(result.seconds, 2)
        with live:
            # Out of core: golden stays in its Parquet files, DuckDB spills in the run folder.
            step("comparing the output with the golden run's")
            verdict = verify_outputs(topology.sink_modes(),
                                     golden_files(topology, golden_output), result.outputs,
                                     info.guarantee_of(req.params, GraphView(graph)),
                                     run_store.path / SPILL / "verify",
                                     complete=result.complete, stopped=result.stopped)
        oracle = oracle_check(spark, topology, result.outputs) if result.complete else None
        run_store.write_outputs(result.outputs)
        run_store.write_metrics(result.metrics)
        _write_series(run_store, graph, result, shift)
        # The oracle checks final values exactly: only a run promising exactly-once fails on
        # a mismatch (one that may lose or repeat records ends with other values by design).
        exact = verdict.guarantee is Guarantee.EXACTLY_ONCE
        passed = verdict.passed and (oracle is None or oracle.passed or not exact)
        doc = verdict.to_json()
        doc["oracle"] = oracle.to_json() if oracle is not None else None
        doc["passed"] = passed
        run_store.write_verdict(doc)
        timings["total_s"] = round(time.monotonic() - t_start, 2)
        # A run the protocol stopped on an object it could not trust, with correct output
        # so far, is no failure of the protocol (as ``ftctl sim`` counts it).
        code = EXIT_OK if passed or verdict.stopped_safely else EXIT_FAILED
        summary = _summary(run_store, topology, info, result, verdict, oracle, timings, code)
        ext.summarize(ctx, result, summary)
        from ftctl.metrics.runreport import undelivered  # plotting: only when chaos ran

        missed = undelivered(summary.get("faults") or [])
        if missed and code == EXIT_OK:
            code = EXIT_FAILED
            # ``output_passed`` keeps the verdict on the output alone (compare reads it).
            summary.update(exit_code=code, passed=False, output_passed=True,
                           failed_because=f"{len(missed)} fault(s) not delivered")
        run_store.mark("complete" if result.complete else "incomplete",
                       None if result.complete else f"stopped: {result.stopped}"
                       if result.stopped else "the run did not finish")
        if not req.quiet:  # compare reports its runs together
            summary["report"] = str(_write_report(run_store))
        show_summary(summary, verdict, oracle, quiet=req.quiet, as_json=req.as_json,
                     more=ext.print)
        return code
    except KeyboardInterrupt:
        run_store.mark("incomplete", "interrupted")
        run_store.event("interrupted")
        err_console.print("[yellow]interrupted[/yellow]: tearing down; run marked incomplete")
        return EXIT_INTERRUPTED
    except ClusterError as exc:
        keep_state = True  # its logs explain the failure
        run_store.mark("failed", str(exc))
        err_console.print(f"[red]error:[/red] {exc}", highlight=False, soft_wrap=True)
        return exc.exit_code
    except Exception as exc:
        keep_state = True
        run_store.mark("failed", f"{type(exc).__name__}: {exc}")
        err_console.print(f"[red]error:[/red] {type(exc).__name__}: {exc}", highlight=False,
                          soft_wrap=True)
        return EXIT_INFRA
    finally:
        with _no_interrupts():
            live.close()
            ext.close()
            if spark is not None:
                stop_session(spark)
                work_dir = cluster.work_dir if cluster is not None else req.work_dir
                if work_dir is not None and app_id:
                    collect_executor_logs(work_dir, app_id, run_store.path / LOGS)
            # Scratch of the streaming part: read back into outputs/ and metrics.jsonl on
            # success, of no use after a failure.
            shutil.rmtree(run_store.path / SPILL, ignore_errors=True)
            if cluster is not None:
                cluster.down()
                if not keep_state:
                    shutil.rmtree(state_dir, ignore_errors=True)


def snapshot_location(store: str | None, run_store: RunStore) -> str:
    """Where this run's snapshots go: ``<store>/<run id>``, or the run directory's
    ``snapshots/`` when no store is given."""
    if store is None:
        return str((run_store.path / "snapshots").resolve())
    return join_location(store, run_store.run_id)


# ---------------------------------------------------------------------- display


def _write_series(run_store: RunStore, graph: ExecutionGraph, result: HostResult,
                  shift: float) -> None:
    """series.json: what the report plots, on the events' clock, for runs without chaos
    too (their metrics.jsonl counts from the host's start, tens of seconds off). Only the
    report reads it: like the report, it must not fail the run."""
    from ftctl.metrics.runreport import build_series, write_series

    try:
        series = build_series(result.latency, result.metrics, graph.sinks, shift)
        write_series(run_store.path, series, shift)
    except Exception as exc:
        err_console.print(f"[yellow]no series.json[/yellow]: {type(exc).__name__}: {exc}",
                          highlight=False, soft_wrap=True)


def _write_report(run_store: RunStore) -> Path | None:
    """report.html of the run; a report that fails to render must not fail the run."""
    from ftctl.report.run_report import write_run_report

    try:
        return write_run_report(run_store)
    except Exception as exc:
        err_console.print(f"[yellow]no report.html[/yellow]: {type(exc).__name__}: {exc}",
                          highlight=False, soft_wrap=True)
        return None


def _sayer(quiet: bool) -> Say:
    def say(msg: str) -> None:
        if not quiet:
            err_console.print(f"[dim]{msg}[/dim]", highlight=False)

    return say


@contextlib.contextmanager
def _no_interrupts() -> Iterator[None]:
    """Teardown must finish: a second Ctrl-C would leave JVMs behind."""
    try:
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _run_line(step: Say, protocol: str, graph: ExecutionGraph,
              counters: dict[str, int]) -> Callable[[dict[str, tuple[int, int]], float], None]:
    """The host's progress callback as one line: time, records read and at the sinks, faults."""
    sources, sinks = set(graph.sources), set(graph.sinks)

    def update(counts: dict[str, tuple[int, int]], elapsed: float) -> None:
        read = sum(out for iid, (_, out) in counts.items() if iid in sources)
        landed = sum(rin for iid, (rin, _) in counts.items() if iid in sinks)
        extra = "".join(f", {v} {k}" for k, v in counters.items())
        if not read and not landed:
            step(f"{protocol}: {elapsed:.0f} s, waiting for the {len(graph.order)} tasks "
                 "to start" + extra)
            return
        step(f"{protocol}: {elapsed:.0f} s, {read:,} records read, {landed:,} at the sinks"
             + extra)

    return update


def _summary(run_store: RunStore, topology: Topology, info: Protocol, result: HostResult,
             verdict: Verdict, oracle: OracleResult | None, timings: dict[str, float],
             code: int) -> dict[str, Any]:
    n_sources = sum(1 for op in topology.operators if op.type.startswith("source."))
    total = topology.input.records * n_sources
    busy = max(result.seconds - result.started_at, 1e-9)
    return {
        "run_id": run_store.run_id, "path": str(run_store.path), "topology": topology.name,
        "protocol": info.name, "guarantee": verdict.guarantee.value, "exit_code": code,
        "passed": code == EXIT_OK and verdict.stopped is None, "complete": result.complete,
        "outcome": verdict.outcome, "stopped": verdict.stopped,
        "records": total, "records_per_s": round(total / busy, 1),
        "processing_s": round(busy, 3), "timings": timings,
        "detections": result.detections, "restarts": result.restarts,
        "anomalies": verdict.totals(),
        "oracle": None if oracle is None else {"passed": oracle.passed,
                                               "mismatches": oracle.total_mismatches},
        "records_in": result.records_in, "records_out": result.records_out,
    }


def show_summary(summary: dict[str, Any], verdict: Verdict, oracle: OracleResult | None, *,
                 quiet: bool, as_json: bool,
                 more: Callable[[dict[str, Any]], None] | None = None) -> None:
    """A finished run's summary as ``run`` and ``chaos`` print it: nothing when quiet, the
    JSON document with ``--json``, else the table and what ``more`` adds below it. Engines
    report their runs through it too."""
    if quiet:
        return
    if as_json:
        console.print_json(json.dumps(summary, default=repr))
        return
    _print_summary(summary, verdict, oracle)
    if more is not None:
        more(summary)


def _print_summary(summary: dict[str, Any], verdict: Verdict, oracle: OracleResult | None) -> None:
    guarantee = verdict.guarantee
    # No delivery promise: the counts are facts, not a pass; an "ok yes" and PASSED beside
    # thousands of lost records read as if something had been checked (exit code still 0).
    from ftctl.report.views import no_guarantee_words

    judged = guarantee is not Guarantee.NONE
    table = Table(title=f"{summary['topology']} under {summary['protocol']} "
                        f"({summary['guarantee'] if judged else 'no guarantee to check'})")
    cols = ("sink", "mode", "golden", "output", "lost", "duplicated", "unexpected")
    for col in (*cols, "ok") if judged else cols:
        table.add_column(col, justify="left" if col in ("sink", "mode") else "right")
    for s in verdict.sinks:
        ok = ["[green]yes[/green]" if s.holds(guarantee) else "[red]no[/red]"] if judged else []
        table.add_row(s.sink, s.mode, f"{s.golden_records:,}", f"{s.output_records:,}",
                      f"{s.lost:,}", f"{s.duplicated:,}", f"{s.unexpected:,}", *ok)
    print_table(table)
    for s in verdict.sinks:
        for d in s.divergences[:3]:
            console.print(f"  {s.sink}: first divergence {d.describe()}", highlight=False)
    if oracle is not None:
        console.print(("[green]" if oracle.passed else "[red]") + oracle.describe() + "[/]",
                      highlight=False)
    t = summary["timings"]
    # Only the parts the run had: none started on --master, an engine run has neither.
    parts = ", ".join(f"{name} {t[key]:.1f} s" for key, name in
                      (("cluster_s", "cluster"), ("session_s", "session")) if key in t)
    console.print(
        f"{summary['records']:,} records in {summary['processing_s']:.2f} s "
        f"({summary['records_per_s']:,.0f} records/s); detections {summary['detections']}, "
        f"restarts {summary['restarts']}; total {t.get('total_s', 0):.1f} s"
        + (f" ({parts})" if parts else ""), highlight=False)
    verdict_text = "[green]PASSED[/green]" if summary["passed"] else "[red]FAILED[/red]"
    if not judged and summary["passed"]:
        verdict_text = f"{summary['protocol']}: {no_guarantee_words(verdict.totals())}"
    if verdict.stopped_safely:
        verdict_text = f"[yellow]STOPPED SAFELY: {verdict.stopped}[/yellow]"
    elif not summary["complete"]:
        verdict_text = "[red]INCOMPLETE[/red]"
    if summary.get("failed_because"):
        verdict_text += f" ({summary['failed_because']})"
    console.print(f"{verdict_text}  results: {summary['path']}", highlight=False,
                  soft_wrap=True)
    if summary.get("report"):
        console.print(f"report: {summary['report']}", highlight=False, soft_wrap=True)
