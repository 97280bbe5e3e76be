"""``ftctl chaos``: a run with scripted faults, verified, with recovery metrics per fault.

The faults come from ``--kill N`` (random kills in the middle 60% of the run), a scenario
file, or the schedule another run recorded (``--replay``, e.g. to put a second protocol
through the same faults). The run is rate-paced (``--rate``), so it has a known length
and a steady pre-fault baseline for the recovery metrics.
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

from chaos.plan import (
    check_cluster,
    check_selectors,
    check_triggers,
    from_kills,
    from_scenario,
)
from ftctl.cluster.abandoned import RUNS_DIR
from ftctl.cluster.labels import LabelSyntaxError, expand_labels
from ftctl.commands.cluster_options import (
    DEFAULT_BIND,
    Bind,
    Master,
    Store,
    Verbose,
    check_bind,
    check_master,
    check_store,
)
from ftctl.commands.common import (
    Spares,
    StartMode,
    check_scope,
    check_start,
    protocol_and_params,
    user_errors,
)
from ftctl.config.errors import ConfigError
from ftctl.config.load import load_topology
from ftctl.config.topology import Topology
from ftctl.console import err_console
from ftctl.engines import STRUCTURED, engine_of
from ftctl.results import DEFAULT_ROOT
from ftctl.run.chaos import (
    DEFAULT_RECORDS,
    ChaosExtension,
    expected_seconds,
    from_replay,
    size_input,
)
from ftctl.run.execute import DEFAULT_SPARES, SLOTS_PER_INSTANCE, RunRequest, execute
from ftctl.runtime.graph import ExecutionGraph


def register(app: typer.Typer) -> None:
    app.command("chaos")(chaos)


@user_errors
def chaos(
    topology_file: Annotated[Path, typer.Argument(help="Topology YAML file.")],
    kill: Annotated[int | None, typer.Option("--kill", min=1, help="Kill N random operator "
                                             "tasks at random times mid-run.")] = None,
    target: Annotated[str, typer.Option("--target", help="What --kill kills: task, executor, "
                                        "worker or container (docker); with -p "
                                        "structured-streaming: task, driver, executor, "
                                        "worker or container (on a cluster of the run's "
                                        "own unless --master).")] = "task",
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
    cores: Annotated[int | None, typer.Option(
        "--cores", min=1, help="Cores (task slots) per worker of the local cluster (default: "
        "room for every instance twice over on each worker).")] = None,
    label: Annotated[list[str] | None, typer.Option(
        "--label", help="Worker labels, one --label per worker, cycled (rack=a).")] = None,
    records: Annotated[int | None, typer.Option("--records", min=1, help="Input records "
                                                f"(default {DEFAULT_RECORDS:,}).")] = None,
    rate: Annotated[float | None, typer.Option(
        "--rate", min=0.001, help="Records/s per source (default: a ~25 s run).")] = None,
    master: Master = None,
    backend: Annotated[str, typer.Option("--backend", help="local or docker.")] = "local",
    results: Annotated[Path, typer.Option("--results", help="Where runs are written.")]
    = DEFAULT_ROOT,
    timeout: Annotated[float, typer.Option("--timeout", min=1,
                                           help="Give up after this many seconds.")] = 600.0,
    spares: Spares = DEFAULT_SPARES,
    start: StartMode = "slot",
    bind: Bind = DEFAULT_BIND,
    store: Store = None,
    as_json: Annotated[bool, typer.Option("--json",
                                          help="Print a machine-readable summary.")] = False,
    verbose: Verbose = False,
) -> None:
    """Run TOPOLOGY under scripted faults, verify exactly-once and measure recovery.

    Give one of --kill (that many random kills of what --target names), --scenario (a
    chaos-scenario file: faults at set times, on a cluster of its shape) or --replay (the
    fault schedule of a stored run, to reproduce it). Exit 1 if verification fails (a
    record lost or duplicated, an oracle's answer wrong).

    Examples:

      ftctl chaos topologies/wordcount.yaml --kill 2

      ftctl chaos topologies/sharder.yaml -p causal \\
          --scenario chaos/rack-failure.yaml

      ftctl chaos topologies/wordcount.yaml --kill 1 --target executor --seed 7

      ftctl chaos topologies/wordcount.yaml \\
          --replay 20261121-220228-wordcount-checkpoint-6f55
    """
    if sum(x is not None for x in (kill, scenario, replay)) != 1:
        raise ConfigError("ftctl chaos", None, "give exactly one of --kill, --scenario, --replay")
    engine = engine_of(protocol)
    if engine is None:  # the engine also takes local[N] (its own check)
        master = check_master(master)
    if backend not in ("local", "docker"):
        raise ConfigError("--backend", None, f"expected local or docker, got {backend!r}")
    try:
        worker_labels = expand_labels(label, workers)
    except LabelSyntaxError as exc:
        raise ConfigError("--label", None, str(exc)) from None
    topology = load_topology(topology_file, records=records, rate=rate)
    if engine is not None:  # an engine with its own fault tolerance (ftctl/engines)
        raise typer.Exit(_engine_chaos(topology, str(topology_file), engine[1], param, kill,
                                       target, scenario, replay, seed, records, rate, master,
                                       results, timeout, as_json,
                                       _Shape(workers, cores, label,
                                              [dict(w) for w in worker_labels], backend)))
    info, given = protocol_and_params(protocol, param)
    params = info.resolve(given)
    check_scope(params, topology, str(topology_file))
    replayed = None
    if replay is not None:
        schedule, replayed = from_replay(replay, results, ExecutionGraph(topology).order)
        topology = _inherit_input(topology, replayed.read_config(), records, rate)
    topology = size_input(topology, records, rate)
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
        cores=cores or SLOTS_PER_INSTANCE * len(graph.order), kind="chaos", spares=spares,
        start=check_start(start), verbose=verbose,
        bind=check_bind(bind), store=check_store(store),
        config={"chaos": {"schedule": schedule.source, "name": schedule.name,
                          "seed": schedule.seed, "expected_s": round(duration, 3),
                          "replay_of": replayed.run_id if replayed else None}})
    raise typer.Exit(execute(request, ChaosExtension(schedule, duration)))


@dataclass
class _Shape:
    """The cluster a chaos run would start: ``--workers``, ``--cores``, ``--label`` (as
    given, and as each worker's labels), ``--backend``."""

    workers: int
    cores: int | None
    label: list[str] | None
    labels: list[dict[str, str]]
    backend: str


def _engine_chaos(topology: Topology, file: str, mutant: str | None, param: list[str] | None,
                  kill: int | None, target: str, scenario: Path | None, replay: str | None,
                  seed: int | None, records: int | None, rate: float | None,
                  master: str | None, results: Path, timeout: float, as_json: bool,
                  shape: _Shape) -> int:
    """``ftctl chaos -p structured-streaming``: the schedule as the engine carries it out
    (``ftctl.engines.structured.cli``), on a cluster of its own when it strikes what only
    a cluster has (``ftctl.engines.structured.cluster``)."""
    from ftctl.engines.structured import cli as structured
    from ftctl.engines.structured import cluster as engine_cluster

    if replay is not None:
        raise ConfigError("--replay", None, "not for structured-streaming yet: give --kill or "
                          "--scenario")
    params = structured.engine_params(param)
    structured.check_mutant(mutant)
    structured.check_master(master)
    structured.compile_plan(topology, file)
    topology = structured.paced(topology, records, rate)
    duration = expected_seconds(ExecutionGraph(topology))
    order = ExecutionGraph(topology).order
    schedule = None
    if scenario is not None:
        schedule = from_scenario(scenario, order, duration, seed)
    # Without --master: a cluster of the run's own when the faults need one (or docker
    # is asked for); else local mode, every executor inside the driver.
    own = master is None and (shape.backend == "docker" or (
        target in engine_cluster.CLUSTER_TARGETS if schedule is None
        else engine_cluster.needs_cluster(schedule.faults)))
    attached = None if own else structured.workers_at(master)  # faults strike its workers
    workers = own or attached is not None
    # ``--master local[N]`` is local mode: its executors are the driver
    on_cluster = own or (master is not None and master.startswith("spark://"))
    containers = shape.backend == "docker" if own else engine_cluster.has_containers(attached)
    if kill is not None:
        faults = structured.kills(kill, target, duration, seed if seed is not None else 1,
                                  cluster=on_cluster, instances=order,
                                  workers=workers, containers=containers)
        name, source = f"kill-{kill}-{target}", f"--kill {kill} --target {target}"
    else:
        assert schedule is not None
        if own:
            check_selectors(schedule, shape.labels)
        faults = structured.from_planned(schedule.faults, str(scenario),
                                         cluster=on_cluster, workers=workers,
                                         containers=containers)
        name, source = schedule.name, str(scenario)
    config = {"chaos": {"schedule": source, "name": name, "seed": seed or 1,
                        "expected_s": round(duration, 3), "replay_of": None}}

    def go(at: str | None, cluster: Any) -> int:
        return structured.run(topology, mutant, params, master=at, results=results,
                              timeout=timeout, as_json=as_json, kind="chaos", faults=faults,
                              config=config, cluster=cluster)

    if not own:
        return go(master, attached)
    # beside the protocols' per-run state dirs, where ``cluster prune`` looks
    state_dir = RUNS_DIR / f"{STRUCTURED}-{os.getpid()}-{time.time_ns()}"
    start = engine_cluster.starter(shape.backend, shape.workers, shape.cores, shape.label,
                                   results, state_dir.resolve())
    say = (lambda _m: None) if as_json else (
        lambda m: err_console.print(f"[dim]{m}[/dim]", highlight=False))
    try:
        with engine_cluster.started(start, say) as (url, cluster):
            return go(url, cluster)
    finally:
        shutil.rmtree(state_dir, ignore_errors=True)


def _inherit_input(topology: Topology, config: dict[str, Any], records: int | None,
                   rate: float | None) -> Topology:
    """A replay runs the recorded run's input unless told otherwise."""
    recorded = (config.get("topology") or {}).get("input") or {}
    return topology.with_input(
        records=int(recorded["records"]) if records is None and recorded.get("records") else None,
        rate=float(recorded["rate"]) if rate is None and recorded.get("rate") else None)
