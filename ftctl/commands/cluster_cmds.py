"""``ftctl cluster up/down/status/prune``: keep a Spark standalone cluster warm between runs,
as local processes or as Docker containers (``--backend``)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.markup import escape
from rich.table import Table

from ftctl.backends import attach_cluster, check_backend, detect_backend, make_cluster
from ftctl.cluster.abandoned import find_abandoned, prune_abandoned
from ftctl.cluster.errors import ClusterError, ClusterUsageError, NoClusterError
from ftctl.cluster.labels import expand_labels, format_labels
from ftctl.cluster.local import (
    DEFAULT_CORES,
    DEFAULT_GRACE,
    DEFAULT_MEMORY,
    DEFAULT_START_TIMEOUT,
    DEFAULT_WORKERS,
    ClusterStatus,
    LocalCluster,
)
from ftctl.cluster.state import STATE_DIR_ENV
from ftctl.console import EXIT_INFRA, console, err_console
from ftctl.docker.engine import engine_reachable, no_engine_message
from ftctl.docker.prune import find_abandoned_containers, prune_containers
from ftctl.tables import print_table

EXIT_INTERRUPTED = 130  # the shell convention for "ended by SIGINT"

cluster_app = typer.Typer(
    name="cluster",
    help=(
        "Start, inspect and stop a Spark standalone cluster (master + workers on 127.0.0.1, "
        "as local processes or, with --backend docker, as containers). A cluster started "
        "with `up` keeps running after the command so repeated runs skip the start-up cost; "
        "stop it with `down`.\n\n"
        f"State (pids, ports, labels, logs) lives in .ftctl/cluster/ under the current "
        f"directory, or in ${STATE_DIR_ENV} if set.\n\n"
        "Exit codes: 0 ok, 2 usage or environment error (no Java 17+, no Docker engine, port "
        "in use, bad label), 3 the cluster would not start or is broken."
    ),
    no_args_is_help=True,
)


def register(app: typer.Typer) -> None:
    app.add_typer(cluster_app, name="cluster")


# --------------------------------------------------------------------------- error handling


def _fail(message: str, code: int) -> NoReturn:
    err_console.print(f"[red]error:[/red] {escape(message)}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


@contextmanager
def cli_errors() -> Iterator[None]:
    """One line and the contract's exit code for every cluster error; never a traceback."""
    try:
        yield
    except ClusterError as exc:
        _fail(str(exc), exc.exit_code)
    except KeyboardInterrupt:
        err_console.print("interrupted: stopped every process this command had started")
        raise typer.Exit(EXIT_INTERRUPTED) from None


# --------------------------------------------------------------------------- options

BackendOption = Annotated[
    str | None,
    typer.Option(
        "--backend",
        "-b",
        help="local (processes) or docker (containers). up: default local; down/status: "
        "whichever backend the state dir records.",
    ),
]


def _backend_for(backend: str | None) -> str:
    return check_backend(backend) if backend else detect_backend()


# --------------------------------------------------------------------------- up


@cluster_app.command(
    "up",
    epilog=(
        "Examples:\n\n"
        "  ftctl cluster up\n\n"
        "  ftctl cluster up --workers 4 --cores 2 --memory 2g\n\n"
        "  ftctl cluster up -w 4 --label rack=a --label rack=b     (racks a, b, a, b)\n\n"
        "  ftctl cluster up -w 2 --label rack=a,zone=1 --label rack=b,zone=1\n\n"
        "  ftctl cluster up --backend docker -w 3 --label rack=a --cpus 1 --mem-limit 2g"
    ),
)
def up(
    backend: BackendOption = None,
    workers: Annotated[
        int, typer.Option("--workers", "-w", min=1, help="Number of worker processes.")
    ] = DEFAULT_WORKERS,
    cores: Annotated[
        int, typer.Option("--cores", "-c", min=1, help="Task slots (cores) per worker.")
    ] = DEFAULT_CORES,
    memory: Annotated[
        str, typer.Option("--memory", "-m", help="Memory per worker for executors, e.g. 1g.")
    ] = DEFAULT_MEMORY,
    label: Annotated[
        list[str] | None,
        typer.Option(
            "--label",
            "-l",
            help=(
                "Worker labels key=value[,key=value]; repeat once per worker. The list is "
                "cycled when there are more workers than labels."
            ),
        ),
    ] = None,
    port: Annotated[int | None, typer.Option(help="Master RPC port (default: a free one).")] = None,
    ui_port: Annotated[
        int | None, typer.Option("--ui-port", help="Master web UI port (default: a free one).")
    ] = None,
    timeout: Annotated[
        float, typer.Option(min=1.0, help="Seconds to wait for every worker to be ALIVE.")
    ] = DEFAULT_START_TIMEOUT,
    image: Annotated[
        str | None, typer.Option(help="docker: image to run (default: build/find the one "
                                 "for this code, as `ftctl image build`).")
    ] = None,
    cpus: Annotated[
        float | None, typer.Option(min=0.01, help="docker: CPU limit per worker container "
                                   "(default: min(cores, host CPUs)).")
    ] = None,
    mem_limit: Annotated[
        str | None, typer.Option("--mem-limit", help="docker: memory limit per worker "
                                 "container, e.g. 2g (default: --memory + 1536m).")
    ] = None,
    mount: Annotated[
        list[Path] | None, typer.Option(help="docker: host directory bind-mounted at the "
                                        "same path (repeatable), e.g. the results dir.")
    ] = None,
    own_pids: Annotated[
        bool, typer.Option("--own-pids", help="docker: a PID namespace per container, as on "
                           "separate hosts (for `--master` runs: faults then go through the "
                           "tasks' agent).")
    ] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the recorded cluster state as JSON.")
    ] = False,
) -> None:
    """Start a master and WORKERS workers and wait until every worker is ALIVE.

    Examples:

      ftctl cluster up --workers 3 --cores 4

      ftctl cluster up -b docker -w 4 -l rack=a -l rack=a -l rack=b -l rack=b
    """
    with cli_errors():
        chosen = check_backend(backend or "local")
        expand_labels(label, workers)  # a bad label fails before Java is even looked for
        cluster = make_cluster(
            chosen,
            workers=workers,
            cores=cores,
            memory=memory,
            labels=label,
            master_port=port,
            ui_port=ui_port,
            start_timeout=timeout,
            **_docker_options(chosen, image=image, cpus=cpus, mem_limit=mem_limit,
                              own_pids=own_pids or None, mounts=mount or [Path("results")]),
        )
        started = time.monotonic()
        with spinner(f"starting the {chosen} Spark cluster", quiet=as_json) as say:
            state = cluster.up(progress=say)
        elapsed = time.monotonic() - started
    if as_json:
        console.print_json(json.dumps(state.to_json()))
        return
    console.print(
        f"[green]cluster up[/green]: {len(state.workers)} worker(s) ALIVE in {elapsed:.1f} s"
    )
    console.print(f"Spark master: [bold]{state.master_url}[/bold]")
    console.print(f"Spark UI:     {state.ui_url}")
    console.print(f"state:        {state.state_dir}")
    console.print("stop it with: ftctl cluster down")


def _docker_options(backend: str, **opts: Any) -> dict[str, Any]:
    """Docker-only options; given to the local backend they are a usage error."""
    if backend == "docker":
        return opts
    given = [name for name in ("image", "cpus", "mem_limit", "own_pids")
             if opts[name] is not None]
    if given:
        flag = "--" + given[0].replace("_", "-")
        raise ClusterUsageError(f"{flag} applies to --backend docker only")
    return {}


@contextmanager
def spinner(title: str, quiet: bool) -> Iterator[Callable[[str], None]]:
    """A rich spinner whose text the cluster's progress messages update."""
    if quiet:
        yield lambda _msg: None
        return
    with err_console.status(title) as status:
        yield lambda msg: status.update(f"{title}: {msg}")


# --------------------------------------------------------------------------- down


@cluster_app.command("down", epilog="Example:\n\n  ftctl cluster down")
def down(
    backend: BackendOption = None,
    grace: Annotated[
        float,
        typer.Option(min=0.0, help="Seconds between SIGTERM and SIGKILL for each process."),
    ] = DEFAULT_GRACE,
) -> None:
    """Stop the cluster's master, workers and executors, and forget its state.

    Examples:

      ftctl cluster down

      ftctl cluster down -b docker --grace 2
    """
    with cli_errors():
        chosen = _backend_for(backend)
        cluster = make_cluster(chosen, workers=0)
        had_state = _has_state(cluster, chosen)
        with spinner(f"stopping the {chosen} Spark cluster", quiet=False):
            pids = cluster.down(grace=grace)
    if not had_state and not pids:
        console.print(f"no {chosen} cluster running (state dir {cluster.state_dir})")
        return
    what = "container process(es)" if chosen == "docker" else "process(es)"
    console.print(f"[green]cluster down[/green]: stopped {len(pids)} {what}")


def _has_state(cluster: LocalCluster, backend: str) -> bool:
    try:
        attach_cluster(cluster.state_dir, backend)
    except NoClusterError:
        return False
    return True


# --------------------------------------------------------------------------- status


@cluster_app.command(
    "status", epilog="Examples:\n\n  ftctl cluster status\n\n  ftctl cluster status --json"
)
def status(
    backend: BackendOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")] = False,
) -> None:
    """Show the master and each worker as the master sees them now, and any cluster a
    killed run left behind (remove those with `ftctl cluster prune`).

    Examples:

      ftctl cluster status

      ftctl cluster status -b docker --json
    """
    with cli_errors():
        leftovers = _leftovers()
        # Runs whose process was killed say ``running`` until marked; the run that owned an
        # abandoned cluster is one of them.
        from ftctl.results import DEFAULT_ROOT, mark_abandoned  # pyarrow: not for --help

        runs = mark_abandoned(DEFAULT_ROOT)
        if not as_json:
            _print_leftovers(leftovers)
            for run_id in runs:
                console.print(f"[yellow]abandoned[/yellow] run {run_id}: its ftctl process "
                              "is gone; status.json marked abandoned", highlight=False,
                              soft_wrap=True)
        report = attach_cluster(None, _backend_for(backend)).status()
    if as_json:
        console.print_json(json.dumps({**report.to_json(), "abandoned": leftovers,
                                       "abandoned_runs": runs}))
    else:
        _print_status(report)
    if not report.running:
        _fail(
            f"the Spark master is {report.master_state} (pid {report.master_pid}); "
            "`ftctl cluster down` cleans up what is left",
            EXIT_INFRA,
        )


def _leftovers() -> list[dict[str, Any]]:
    """Abandoned clusters: local processes, and containers when an engine answers."""
    found = [{"backend": "local", **asdict(c)} for c in find_abandoned()]
    if engine_reachable():
        found += [{"backend": "docker", **asdict(c)} for c in find_abandoned_containers()]
    return found


def _print_leftovers(leftovers: list[dict[str, Any]]) -> None:
    for item in leftovers:
        what = (f"{len(item['pids'])} process(es)" if item["backend"] == "local"
                else f"{len(item['containers'])} container(s)")
        console.print(
            f"[yellow]abandoned[/yellow] {item['backend']} cluster in {item['state_dir']}: "
            f"{what}, {item['reason']}; remove with `ftctl cluster prune`",
            highlight=False, soft_wrap=True,
        )


def _print_status(report: ClusterStatus) -> None:
    colour = "green" if report.running else "red"
    console.print(
        f"master {report.master_url}  [{colour}]{report.master_state}[/{colour}]  "
        f"pid {report.master_pid}  UI {report.ui_url}"
    )
    table = Table(title=f"{len(report.alive_workers)}/{len(report.workers)} worker(s) ALIVE")
    table.add_column("name")
    table.add_column("worker id", overflow="fold")  # ids are long; never cut them
    for column in ("state", "cores", "memory", "labels", "pid"):
        table.add_column(column)
    for worker in report.workers:
        state_colour = "green" if worker.state == "ALIVE" else "red"
        memory = f"{worker.memory_mb} MiB" if worker.memory_mb is not None else "-"
        table.add_row(
            worker.name,
            worker.worker_id or "-",
            f"[{state_colour}]{worker.state}[/{state_colour}]",
            f"{worker.cores_used}/{worker.cores}",
            memory,
            format_labels(worker.labels) or "-",
            str(worker.pid),
        )
    print_table(table)


# --------------------------------------------------------------------------- prune


@cluster_app.command(
    "prune", epilog="Examples:\n\n  ftctl cluster prune\n\n  ftctl cluster prune --all"
)
def prune(
    include_live: Annotated[
        bool, typer.Option("--all", help="Also remove clusters someone still owns (`cluster up`).")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")] = False,
) -> None:
    """Stop the Spark processes and remove the containers that killed runs left behind.

    Local clusters are found by the state-dir marker on their JVMs' command lines and by
    the per-run state dirs under .ftctl/runs; containers by their labels. A cluster counts
    as abandoned when the ftctl process that owned it is gone, or when its state file no
    longer records it. Without a Docker engine only processes are pruned.
    """
    with cli_errors():
        local = prune_abandoned()
        docker_note = None
        if engine_reachable():
            containers = prune_containers(include_live=include_live)
        elif include_live:
            containers = prune_containers(include_live=True)  # says "no engine", exit 2
        else:
            containers = []
            docker_note = f"containers not checked: {no_engine_message()}"
    if as_json:
        console.print_json(json.dumps([{"backend": "local", **asdict(c)} for c in local]
                                      + [{"backend": "docker", **asdict(c)} for c in containers]))
        return
    for item in local:
        console.print(f"stopped {len(item.pids)} process(es) of the cluster in "
                      f"{item.state_dir}: {item.reason}", highlight=False, soft_wrap=True)
    for cluster in containers:
        console.print(
            f"removed {len(cluster.containers)} container(s) of run {cluster.run_id} "
            f"({cluster.state_dir}): {cluster.reason}",
            highlight=False,
        )
    if not local and not containers:
        console.print("nothing to prune: no abandoned ftctl cluster")
    if docker_note:
        console.print(f"[dim]{escape(docker_note)}[/dim]", highlight=False, soft_wrap=True)
