"""``ftctl compare protocols``: every protocol on one recorded fault schedule."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from chaos.plan import check_cluster, check_triggers, from_kills, from_scenario
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
from ftctl.commands.common import Spares, StartMode, check_scope, check_start, user_errors
from ftctl.compare.figures import summarize
from ftctl.compare.report import COST, LEGEND, OUTCOME, row, write_report
from ftctl.compare.runner import (
    CompareRequest,
    Comparison,
    needs_own_cluster,
    run_comparison,
)
from ftctl.config.errors import ConfigError
from ftctl.config.load import load_topology
from ftctl.config.topology import Topology
from ftctl.console import EXIT_FAILED, EXIT_OK, console
from ftctl.engines import STRUCTURED, engine_of
from ftctl.progress import LiveLine
from ftctl.report.views import NO_GUARANTEE
from ftctl.results import DEFAULT_ROOT, RunStore, atomic_write_json
from ftctl.run.chaos import breakdown_table, expected_seconds, size_input
from ftctl.run.execute import DEFAULT_SPARES
from ftctl.runtime.graph import ExecutionGraph
from ftctl.tables import print_table
from protocols.contract.params import ParamError, parse_items, validate
from protocols.contract.view import GraphView
from protocols.registry import PROTOCOLS, Protocol, UnknownProtocol, registered

compare_app = typer.Typer(help="Compare protocols side by side.", no_args_is_help=True)


@compare_app.command("protocols")
@user_errors
def protocols_cmd(
    topology_file: Annotated[Path, typer.Argument(help="Topology YAML file.")],
    scenario: Annotated[Path | None, typer.Option(help="Chaos-scenario YAML.")] = None,
    kill: Annotated[int | None, typer.Option(min=1, help="Or: N random task kills.")] = None,
    protocols: Annotated[str | None, typer.Option(
        help="Comma-separated protocols (default: all).")] = None,
    repeat: Annotated[int, typer.Option(min=1, help="Runs per protocol.")] = 1,
    param: Annotated[list[str] | None, typer.Option(
        "--param", help="protocol.key=value, e.g. checkpoint.interval=0.5 (repeatable).")
    ] = None,
    seed: Annotated[int | None, typer.Option(help="Seed of the fault schedule.")] = None,
    workers: Annotated[int, typer.Option(min=1, help="Workers of the local cluster.")] = 2,
    label: Annotated[list[str] | None, typer.Option(
        help="Worker labels, one --label per worker, cycled (rack=a).")] = None,
    records: Annotated[int | None, typer.Option(min=1, help="Input records.")] = None,
    rate: Annotated[float | None, typer.Option(min=0.001, help="Records/s per source.")] = None,
    backend: Annotated[str, typer.Option(help="local or docker.")] = "local",
    master: Master = None,
    results: Annotated[Path, typer.Option(help="Where runs are written.")] = DEFAULT_ROOT,
    timeout: Annotated[float, typer.Option(min=1, help="Per-run limit, seconds.")] = 600.0,
    spares: Spares = DEFAULT_SPARES,
    start: StartMode = "slot",
    bind: Bind = DEFAULT_BIND,
    store_at: Store = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON summary.")] = False,
    verbose: Verbose = False,
) -> None:
    """Record a fault schedule once and replay it for each protocol, K times each.

    Prints the guarantee each protocol held, lost/duplicated records, detection /
    restart / recovery times (median and spread), throughput and latency overhead
    against `none` outside fault windows, records processed, and snapshot storage;
    writes comparison.json, report.html and plots into a results folder.

    Examples:

      ftctl compare protocols topologies/wordcount.yaml \\
          --scenario chaos/single-kill.yaml

      ftctl compare protocols topologies/sharder.yaml --kill 1 \\
          --protocols causal,lineage

      ftctl compare protocols topologies/wordcount.yaml \\
          --scenario chaos/rack-failure.yaml --workers 4 \\
          --label rack=a --label rack=a --label rack=b --label rack=b

      ftctl compare protocols topologies/wordcount.yaml --kill 1 \\
          --master spark://127.0.0.1:7077
    """
    if (scenario is None) == (kill is None):
        raise ConfigError("ftctl compare protocols", None, "give exactly one of --scenario, --kill")
    master = check_master(master)
    topology = load_topology(topology_file, records=records, rate=rate)
    # An engine (ftctl/engines) runs beside the protocols on the same schedule.
    engines, protocols = _engines(protocols)
    from ftctl.engines.structured import cli as structured_cli  # only now: it loads Spark's side

    engine_params = structured_cli.engine_params(
        [p.split(".", 1)[1] for p in param or () if p.startswith(f"{STRUCTURED}.")])
    param = [p for p in param or () if not p.startswith(f"{STRUCTURED}.")]
    if engines:
        structured_cli.compile_plan(topology, str(topology_file))
    infos = _protocols(protocols, topology) if protocols is not None or not engines else []
    params = _params(param, infos)
    for info in infos:
        check_scope(info.resolve(params.get(info.name, {})), topology, str(topology_file))
    try:
        worker_labels = expand_labels(label, workers)
    except LabelSyntaxError as exc:
        raise ConfigError("--label", None, str(exc)) from None
    topology = size_input(topology, records, rate)
    graph = ExecutionGraph(topology)
    duration = expected_seconds(graph)
    if kill is not None:
        schedule = from_kills(kill, "task", graph.order, duration, seed if seed is not None else 1)
    else:
        assert scenario is not None
        schedule = from_scenario(scenario, graph.order, duration, seed)
    check_cluster(schedule, master, worker_labels, backend)
    check_triggers(schedule, infos)
    if engines:
        from ftctl.engines.structured.compare import check_engine_cluster

        check_engine_cluster(schedule, master, backend)

    bind, store_at, start = check_bind(bind), check_store(store_at), check_start(start)
    store = RunStore.create(results, topology=topology.name, protocol="compare", kind="compare")
    store.write_config({"topology": topology.model_dump(by_alias=True),
                        "protocols": [i.name for i in infos] + engines, "params": params,
                        "repeat": repeat, "schedule": schedule.source,
                        "shared_cluster": master is None and not needs_own_cluster(schedule),
                        "master": master})
    req = CompareRequest(topology, schedule, infos, params, repeat, workers, label, results,
                         timeout, state_dir=(Path(".ftctl") / "runs" / store.run_id).resolve(),
                         backend=backend, spares=spares, start=start, verbose=verbose,
                         bind=bind, store=store_at, master=master)
    try:
        with LiveLine(quiet=as_json) as live:
            comp = (run_comparison(req, live.note, live.update) if infos
                    else Comparison(topology.name, schedule.name, repeat))
            if engines:
                from ftctl.engines.structured.compare import cluster_shape, engine_runs

                shape = cluster_shape(req, needs_own_cluster(schedule))  # the protocols'
                runs, failed = engine_runs(topology, schedule.faults, schedule.source, repeat,
                                           results, timeout, duration, engine_params,
                                           live.note, shape)
                comp.runs += runs
                comp.failed_runs += failed
                comp.protocols.append(summarize(STRUCTURED, "exactly-once", runs))
    except KeyboardInterrupt:
        store.mark("incomplete", "interrupted")
        raise
    doc = {"comparison_id": store.run_id, "path": str(store.path), **comp.to_json()}
    atomic_write_json(store.path / "comparison.json", doc)
    write_report(store.path, comp)
    passed = not comp.failed_runs and all(
        p.guarantee_held for p in comp.protocols if p.protocol != "none")
    store.write_verdict({"passed": passed, "protocols": {p.protocol: p.guarantee_held
                                                         for p in comp.protocols}})
    store.mark("complete" if not comp.failed_runs else "incomplete")
    if as_json:
        print(json.dumps(doc, default=repr))
    else:
        _show(comp, store)
    raise typer.Exit(EXIT_OK if passed else EXIT_FAILED)


def _engines(names: str | None) -> tuple[list[str], str | None]:
    """The engines named in ``--protocols`` and the rest (None: none named)."""
    if names is None:
        return [], None
    given = [n.strip() for n in names.split(",") if n.strip()]
    engines = [n for n in given if engine_of(n) is not None]
    if any(engine_of(n) != (n, None) for n in engines):
        raise ConfigError("--protocols", None, "engines are compared without mutants")
    rest = [n for n in given if n not in engines]
    return engines, ",".join(rest) if rest else None


def _protocols(names: str | None, topology: Topology) -> list[Protocol]:
    """The named protocols, or every registered one that accepts ``topology`` with its
    default params."""
    if names is None:
        view = GraphView(ExecutionGraph(topology))
        return [p for p in PROTOCOLS.values() if not p.resolve({}).check(view)]
    out = []
    for name in (n.strip() for n in names.split(",") if n.strip()):
        try:
            out.append(registered(name))  # params are given per protocol: no mutants
        except UnknownProtocol as exc:
            raise ConfigError("--protocols", None, str(exc)) from None
    if not out:
        raise ConfigError("--protocols", None, "no protocol named")
    return out


def _params(items: list[str] | None, infos: list[Protocol]) -> dict[str, dict[str, Any]]:
    """``checkpoint.interval=0.5`` -> {"checkpoint": {"interval": "0.5"}}, checked."""
    names = [i.name for i in infos]
    try:
        by_protocol: dict[str, list[str]] = {}
        for item in items or ():
            item = item.strip()
            key = item.partition("=")[0].strip()
            # Longest match: an import path (``pkg.mod:SPEC``) has dots of its own.
            proto = max((n for n in names if key.startswith(n + ".")), key=len, default=None)
            if proto is None:
                raise ParamError(f"expected protocol.key=value for a compared protocol, "
                                 f"got {key.split('.')[0]!r}")
            by_protocol.setdefault(proto, []).append(item[len(proto) + 1:])
        per = {proto: parse_items(given) for proto, given in by_protocol.items()}
        for info in infos:
            validate(info.params, per.get(info.name, {}), info.name)
    except ParamError as exc:
        raise ConfigError("--param", None, str(exc)) from None
    return per


def _show(comp: Any, store: RunStore) -> None:
    title = f"{comp.topology} under {comp.schedule} ({comp.repeat} run(s) each)"
    for columns, what in ((OUTCOME, "outcome"), (COST, "cost, before the first fault")):
        if comp.repeat == 1:  # one run: a spread of 0 says nothing
            columns = [c for c in columns if c[1] != "recovery_spread_s"]
        table = Table(title=f"{title}: {what}")
        for name, _ in columns:
            table.add_column(name, justify="left" if name in ("protocol", "guarantee")
                             else "right")
        for p in comp.protocols:
            table.add_row(*("-" if attr == "guarantee_held" and p.guarantee == NO_GUARANTEE
                            else _cell(v, attr)  # nothing promised: nothing held
                            for v, (_, attr) in zip(row(p, columns), columns, strict=True)))
        print_table(table, LEGEND)
    breakdown_table(f"{title}: where the first fault's recovery went (seconds, median)",
                    "protocol", [(p.protocol, p.breakdown) for p in comp.protocols
                                 if p.breakdown])
    if comp.failed_runs:
        console.print(f"[red]runs that did not finish:[/red] {', '.join(comp.failed_runs)}")
    console.print(f"report: {store.path / 'report.html'}", highlight=False, soft_wrap=True)


def _cell(v: object, attr: str = "") -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "[red]no[/red]"
    if attr.endswith("_overhead") and isinstance(v, float):
        return f"{v:+.0%}"  # -31%: faster than none, +5%: slower
    if isinstance(v, float):
        return f"{v:,.3g}" if abs(v) < 1000 else f"{v:,.0f}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def register(app: typer.Typer) -> None:
    app.add_typer(compare_app, name="compare")
