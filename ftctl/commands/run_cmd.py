"""``ftctl run``: one topology under one protocol on a Spark standalone cluster, verified."""

from __future__ import annotations

import contextlib
import json
import math
import shutil
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.live import Live
from rich.table import Table

from ftctl.cluster import ClusterError, LocalCluster, make_cluster
from ftctl.cluster.backends import check_backend
from ftctl.commands.common import protocol_and_params, user_errors
from ftctl.config.errors import ConfigError
from ftctl.config.load import load_topology
from ftctl.config.topology import Topology
from ftctl.console import EXIT_FAILED, EXIT_INFRA, EXIT_OK, console, err_console
from ftctl.results import DEFAULT_ROOT, RunStore
from ftctl.runtime.graph import ExecutionGraph
from ftctl.sim.runner import sink_modes
from ftctl.spark.host import HostResult, SparkHost
from ftctl.spark.session import start_session, stop_session
from ftctl.verify.checker import Verdict, verify
from ftctl.verify.golden import golden_for
from ftctl.verify.oracle import OracleResult, oracle_check
from protocols.base import ProtocolInfo
from protocols.registry import resolve_params

EXIT_INTERRUPTED = 130
# Task slots asked of a local cluster per instance: room for a replacement to be
# scheduled while the task it replaces is still being cancelled.
SLOTS_PER_INSTANCE = 2


def register(app: typer.Typer) -> None:
    app.command("run")(run)


@user_errors
def run(
    topology_file: Annotated[Path, typer.Argument(help="Topology YAML file.")],
    protocol: Annotated[str, typer.Option("--protocol", "-p",
                                          help="Fault-tolerance protocol.")] = "none",
    param: Annotated[list[str] | None, typer.Option(
        "--param", help="Protocol parameter key=value (repeatable).")] = None,
    master: Annotated[str | None, typer.Option(
        "--master", help="spark://host:port of a running cluster (default: start one).")] = None,
    workers: Annotated[int, typer.Option("--workers", min=1,
                                         help="Workers of the local cluster.")] = 2,
    backend: Annotated[str, typer.Option(
        "--backend", help="Cluster to start when no --master: local (processes) or docker "
        "(containers).")] = "local",
    records: Annotated[int | None, typer.Option("--records", min=1,
                                                help="Override input.records.")] = None,
    rate: Annotated[float | None, typer.Option(
        "--rate", min=0.001, help="Records/s per source (default: as fast as possible).")] = None,
    seed: Annotated[int | None, typer.Option("--seed", help="Override input.seed.")] = None,
    results: Annotated[Path, typer.Option("--results", help="Where runs are written.")]
    = DEFAULT_ROOT,
    timeout: Annotated[float, typer.Option("--timeout", min=1,
                                           help="Give up after this many seconds.")] = 3600.0,
    as_json: Annotated[bool, typer.Option("--json",
                                          help="Print a machine-readable summary.")] = False,
) -> None:
    """Run TOPOLOGY on a Spark cluster under a protocol and verify its output."""
    topology = load_topology(topology_file)
    if records is not None:
        topology.input.records = records
    if rate is not None:
        topology.input.rate = rate
    if seed is not None:
        topology.input.seed = seed
    if master is not None and not master.startswith("spark://"):
        raise ConfigError("--master", None, f"expected spark://host:port, got {master!r}")
    if backend not in ("local", "docker"):
        raise ConfigError("--backend", None, f"expected local or docker, got {backend!r}")
    info, given = protocol_and_params(protocol, param)
    params = resolve_params(info, given)
    code = execute(topology, info, params, master=master, workers=workers, results=results,
                   timeout=timeout, as_json=as_json, backend=backend)
    raise typer.Exit(code)


def execute(topology: Topology, info: ProtocolInfo, params: dict[str, Any], *,
            master: str | None, workers: int, results: Path, timeout: float,
            as_json: bool, backend: str = "local") -> int:
    graph = ExecutionGraph(topology)
    n = len(graph.order)
    run_store = RunStore.create(results, topology=topology.name, protocol=info.name)
    run_store.write_config({
        "topology": topology.model_dump(by_alias=True), "protocol": info.name,
        "params": params, "master": master, "workers": None if master else workers,
        "host": "spark", "backend": None if master else backend,
    })
    say = _sayer(as_json)
    say(f"run {run_store.run_id} -> {run_store.path}")
    golden = golden_for(topology)
    timings: dict[str, float] = {}
    cluster: LocalCluster | None = None
    spark: Any = None
    state_dir = (Path(".ftctl") / "runs" / run_store.run_id).resolve()
    keep_state = False
    t_start = time.monotonic()
    try:
        if master is None:
            cores = math.ceil(SLOTS_PER_INSTANCE * n / workers)
            # Docker: the results dir is bind-mounted so tasks in containers write snapshots
            # where the driver reads them; the cluster is owned by this process, so
            # `cluster prune` can clean up after a crash.
            cluster = make_cluster(check_backend(backend), workers=workers, cores=cores,
                                   state_dir=state_dir, mounts=[results],
                                   run_id=run_store.run_id, owned=True)
            run_store.event("cluster-starting", workers=workers, cores=cores, backend=backend)
            cluster.up(progress=say)
            master = cluster.master_url
            timings["cluster_s"] = round(time.monotonic() - t_start, 2)
        say(f"starting Spark session on {master}")
        t = time.monotonic()
        spark = start_session(master, f"ftctl-{run_store.run_id}", slots=n)
        timings["session_s"] = round(time.monotonic() - t, 2)
        run_store.event("session-started", master=master, seconds=timings["session_s"])

        def on_event(ev: dict[str, Any]) -> None:
            data = {k: v for k, v in ev.items() if k not in ("t", "event", "kind", "wall")}
            run_store.event(ev["event"], **data)

        host = SparkHost(spark.sparkContext, graph, info, params, run_store.run_id,
                         run_store.path / "snapshots", rate=topology.input.rate,
                         on_event=on_event, timeout=timeout)
        with _progress(host, info.name, quiet=as_json):
            result = host.run()
        timings["run_s"] = round(result.seconds, 2)
        verdict = verify(sink_modes(topology), golden, result.outputs, info.guarantee,
                         complete=result.complete)
        oracle = oracle_check(spark, topology, result.outputs) if result.complete else None
        run_store.write_outputs(result.outputs)
        run_store.write_metrics(result.metrics)
        passed = verdict.passed and (oracle is None or oracle.passed)
        doc = verdict.to_json()
        doc["oracle"] = oracle.to_json() if oracle is not None else None
        doc["passed"] = passed
        run_store.write_verdict(doc)
        run_store.mark("complete" if result.complete else "incomplete",
                       None if result.complete else "the run did not finish")
        timings["total_s"] = round(time.monotonic() - t_start, 2)
        code = EXIT_OK if passed else EXIT_FAILED
        summary = _summary(run_store, topology, info, result, verdict, oracle, timings, code)
        if as_json:
            console.print_json(json.dumps(summary, default=repr))
        else:
            _print_summary(summary, verdict, oracle)
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
            if spark is not None:
                stop_session(spark)
            if cluster is not None:
                cluster.down()
                if not keep_state:
                    shutil.rmtree(state_dir, ignore_errors=True)


# ---------------------------------------------------------------------- display


def _sayer(quiet: bool) -> Any:
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


@contextlib.contextmanager
def _progress(host: SparkHost, protocol: str, quiet: bool) -> Iterator[None]:
    if quiet or not err_console.is_terminal:
        yield
        return
    with Live(_table({}, 0.0, protocol), console=err_console, refresh_per_second=4,
              transient=True) as live:
        host.progress = lambda counts, t: live.update(_table(counts, t, protocol))
        yield


def _table(counts: dict[str, tuple[int, int]], elapsed: float, protocol: str) -> Table:
    per_op: dict[str, list[int]] = {}
    for iid, (rin, rout) in counts.items():
        agg = per_op.setdefault(iid.split("[", 1)[0], [0, 0, 0])
        agg[0] += 1
        agg[1] += rin
        agg[2] += rout
    table = Table(title=f"{protocol} - {elapsed:.1f} s")
    for col in ("operator", "instances", "records in", "records out"):
        table.add_column(col, justify="left" if col == "operator" else "right")
    for op, (k, rin, rout) in per_op.items():
        table.add_row(op, str(k), f"{rin:,}", f"{rout:,}")
    return table


def _summary(run_store: RunStore, topology: Topology, info: ProtocolInfo, result: HostResult,
             verdict: Verdict, oracle: OracleResult | None, timings: dict[str, float],
             code: int) -> dict[str, Any]:
    n_sources = sum(1 for op in topology.operators if op.type.startswith("source."))
    total = topology.input.records * n_sources
    busy = max(result.seconds - result.started_at, 1e-9)
    return {
        "run_id": run_store.run_id, "path": str(run_store.path), "topology": topology.name,
        "protocol": info.name, "guarantee": info.guarantee.value, "exit_code": code,
        "passed": code == EXIT_OK, "complete": result.complete,
        "records": total, "records_per_s": round(total / busy, 1),
        "processing_s": round(busy, 3), "timings": timings,
        "detections": result.detections, "restarts": result.restarts,
        "anomalies": verdict.totals(),
        "oracle": None if oracle is None else {"passed": oracle.passed,
                                               "mismatches": oracle.total_mismatches},
        "records_in": result.records_in, "records_out": result.records_out,
    }


def _print_summary(summary: dict[str, Any], verdict: Verdict, oracle: OracleResult | None) -> None:
    table = Table(title=f"{summary['topology']} under {summary['protocol']} "
                        f"({summary['guarantee']})")
    for col in ("sink", "mode", "golden", "output", "lost", "duplicated", "unexpected", "ok"):
        table.add_column(col, justify="left" if col in ("sink", "mode") else "right")
    guarantee = verdict.guarantee
    for s in verdict.sinks:
        table.add_row(s.sink, s.mode, f"{s.golden_records:,}", f"{s.output_records:,}",
                      str(s.lost), str(s.duplicated), str(s.unexpected),
                      "[green]yes[/green]" if s.holds(guarantee) else "[red]no[/red]")
    console.print(table)
    for s in verdict.sinks:
        for d in s.divergences[:3]:
            console.print(f"  {s.sink}: first divergence {d.describe()}", highlight=False)
    if oracle is not None:
        console.print(("[green]" if oracle.passed else "[red]") + oracle.describe() + "[/]",
                      highlight=False)
    t = summary["timings"]
    console.print(
        f"{summary['records']:,} records in {summary['processing_s']:.2f} s "
        f"({summary['records_per_s']:,.0f} records/s); detections {summary['detections']}, "
        f"restarts {summary['restarts']}; total {t.get('total_s', 0):.1f} s "
        f"(cluster {t.get('cluster_s', 0):.1f} s, session {t.get('session_s', 0):.1f} s)",
        highlight=False)
    verdict_text = "[green]PASSED[/green]" if summary["passed"] else "[red]FAILED[/red]"
    if not summary["complete"]:
        verdict_text = "[red]INCOMPLETE[/red]"
    console.print(f"{verdict_text}  results: {summary['path']}", highlight=False)
