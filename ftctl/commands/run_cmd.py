"""``ftctl run``: one topology under one protocol on a Spark standalone cluster, verified."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ftctl.commands.cluster_options import (
    DEFAULT_BIND,
    Bind,
    Store,
    Verbose,
    check_bind,
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
from ftctl.engines import engine_of
from ftctl.results import DEFAULT_ROOT
from ftctl.run.execute import DEFAULT_SPARES, RunRequest, execute


def register(app: typer.Typer) -> None:
    app.command("run")(run)


@user_errors
def run(
    topology_file: Annotated[Path, typer.Argument(help="Topology YAML file.")],
    protocol: Annotated[str, typer.Option("--protocol", "-p",
                                          help="Fault-tolerance protocol.")] = "checkpoint",
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
    spares: Spares = DEFAULT_SPARES,
    start: StartMode = "slot",
    bind: Bind = DEFAULT_BIND,
    store: Store = None,
    as_json: Annotated[bool, typer.Option("--json",
                                          help="Print a machine-readable summary.")] = False,
    verbose: Verbose = False,
) -> None:
    """Run TOPOLOGY on a Spark cluster under a protocol and verify its output.

    With -p structured-streaming it runs on Spark Structured Streaming instead, in a
    driver process of its own, as docs/structured-streaming.md describes.

    Examples:

        ftctl run topologies/wordcount.yaml -p checkpoint

        ftctl run topologies/windowed.yaml -p structured-streaming
    """
    topology = load_topology(topology_file, records=records, rate=rate, seed=seed)
    engine = engine_of(protocol)
    if engine is not None:  # an engine with its own fault tolerance (ftctl/engines)
        from ftctl.engines.structured import cli as structured

        structured.check_master(master)
        structured.compile_plan(topology, str(topology_file))
        raise typer.Exit(structured.run(topology, engine[1], structured.engine_params(param),
                                        master=master, results=results, timeout=timeout,
                                        as_json=as_json))
    if master is not None and not master.startswith("spark://"):
        raise ConfigError("--master", None, f"expected spark://host:port, got {master!r}")
    if backend not in ("local", "docker"):
        raise ConfigError("--backend", None, f"expected local or docker, got {backend!r}")
    info, given = protocol_and_params(protocol, param)
    params = info.resolve(given)
    check_scope(params, topology, str(topology_file))
    code = execute(RunRequest(topology, info, params, master=master, workers=workers,
                              results=results, timeout=timeout, as_json=as_json,
                              backend=backend, spares=spares, start=check_start(start),
                              verbose=verbose,
                              bind=check_bind(bind), store=check_store(store)))
    raise typer.Exit(code)
