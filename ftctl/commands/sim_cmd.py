"""``ftctl sim``: many seeded failure schedules on the simulation host."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ftctl.cluster.errors import ClusterError
from ftctl.commands.cluster_options import DEFAULT_BIND, Bind, check_bind
from ftctl.commands.common import function_errors, protocol_and_params, user_errors
from ftctl.config.errors import ConfigError
from ftctl.config.load import load_topology
from ftctl.config.topology import Topology
from ftctl.console import EXIT_FAILED, EXIT_OK, console, err_console
from ftctl.progress import LiveLine
from ftctl.run.simspread import check_master, run_on_spark
from ftctl.sim.determinism import DEFAULT_INTERLEAVINGS, check_determinism
from ftctl.sim.faults import CRASH_ONLY, SCENARIO_NAMES, FaultKind, kind_names, parse_kinds
from ftctl.sim.recovery import MEASURES
from ftctl.sim.runner import ScheduleCrashed, ScheduleOutcome, SimSummary, Simulator, refusals
from ftctl.sim.spread import SimJob, local_pool, run_parallel
from ftctl.tables import print_table
from protocols.contract.spec import Guarantee

if TYPE_CHECKING:
    from multiprocessing.pool import Pool

    from ftctl.sim.scenario import SimScenario

_KINDS = ("lost", "duplicated", "unexpected", "reordered", "stalled")

# Runs the schedules, told how many are done (progress) and what the cluster is doing (step).
Progressed = Callable[[Callable[[int], None], Callable[[str], None]], SimSummary]


def sim(
    topology: Annotated[Path, typer.Argument(help="Topology YAML file.")],
    protocol: Annotated[
        str, typer.Option("--protocol", "-p", help="Protocol to test, or one of its mutants "
                          "as PROTOCOL/MUTANT (ftctl list mutants).")
    ] = "checkpoint",
    schedules: Annotated[
        int, typer.Option("--schedules", "-n", min=1, help="How many failure schedules to run.")
    ] = 100,
    seed: Annotated[
        int | None,
        typer.Option(
            "--seed",
            help="Replay exactly this schedule, with a trace (as printed by a failing run).",
        ),
    ] = None,
    first_seed: Annotated[int, typer.Option(help="Seed of the first of the N schedules.")] = 1,
    param: Annotated[
        list[str] | None,
        typer.Option(
            "--param", help="Protocol parameter key=value, e.g. alignment=aligned (repeatable)."
        ),
    ] = None,
    records: Annotated[int | None, typer.Option(
        "--records", min=1, help="Input records instead of the topology's own (snapshots "
        "and fault windows scale with the run).")] = None,
    max_failures: Annotated[int, typer.Option(min=1, help="Most strikes per schedule.")] = 3,
    max_burst: Annotated[int, typer.Option(min=1, help="Most instances per strike.")] = 3,
    faults: Annotated[
        str,
        typer.Option("--faults", help="Fault kinds the schedules draw, comma-separated: "
                     f"{kind_names()}."),
    ] = "kill-task",
    scenario: Annotated[
        Path | None,
        typer.Option("--scenario", help="Replay this chaos-scenario file (chaos/*.yaml) "
                     "instead of random schedules; its seconds scale onto the simulated run."),
    ] = None,
    during: Annotated[
        str | None,
        typer.Option("--during", help="Phase-triggered schedules, as the conformance kit's "
                     "~during- cases: each also crashes an instance holding this phase at one "
                     "of its first openings, and is judged on the phase contract too."),
    ] = None,
    workers: Annotated[int, typer.Option(
        "--workers", min=1, help="With --scenario: simulated nodes w0, w1, ...")] = 2,
    node_label: Annotated[list[str] | None, typer.Option(
        "--label", help="With --scenario: node labels, one per node, cycled (rack=a).")] = None,
    slots: Annotated[list[str] | None, typer.Option(
        "--slots", help="With --scenario: slots per node, N for every node or key=value:N "
        "for the nodes with that label (repeatable); default: room for every instance "
        "twice.")] = None,
    expect: Annotated[
        str | None,
        typer.Option(
            help="Judge against this guarantee instead of the protocol's own "
            "(exactly-once, at-least-once, at-most-once)."
        ),
    ] = None,
    fail_fast: Annotated[bool, typer.Option(help="Stop at the first violating schedule.")] = False,
    trace: Annotated[Path | None, typer.Option(help="With --seed: write the trace here.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON summary.")] = False,
    jobs: Annotated[int, typer.Option(
        "--jobs", "-j", min=1, help="Run the schedules in this many local processes "
        "(same seeds, same summary).")] = 1,
    master: Annotated[str | None, typer.Option(
        "--master", help="Run the schedules as Spark tasks on this cluster (spark://host:port), "
        "or 'local' to start a local one for this command; same seeds, same summary. "
        "Executors need ftctl installed.")] = None,
    determinism: Annotated[int, typer.Option(
        "--determinism", min=0, metavar="N", help="Before the first schedule, run the "
        "topology fault-free under N seeded interleavings and refuse it (exit 2) if its "
        "output differs between them; 0 skips the check.")] = DEFAULT_INTERLEAVINGS,
    bind: Bind = DEFAULT_BIND,
) -> None:
    """Run seeded failure schedules on the simulation host and check every output.

    Each schedule crashes one or several instances at seeded points (during snapshots,
    during recovery, anywhere) and compares the sinks with the fault-free golden run.
    With --faults the schedules also pause units (past the hang timeout they are fenced),
    partition, delay or slow them, or take nodes down. Exits 1 on any violation of the
    protocol's guarantee and prints the seed to replay. The summary gives each fault kind's
    recovery times (detect, restart, recovered, first output) in simulated time. With
    --scenario every schedule
    replays a chaos-scenario file (as ftctl chaos --scenario), each with its own seeded
    interleaving, on --workers simulated nodes.

    Before the first schedule the topology runs fault-free under --determinism (default
    3) seeded orders of delivery between instances: a topology whose output depends on
    that order is refused (exit 2), naming the first diverging sink and key, since
    every protocol would otherwise be blamed for records it never lost.

    Examples:

      ftctl sim topologies/wordcount.yaml --protocol checkpoint --schedules 1000

      ftctl sim topologies/diamond.yaml -p checkpoint --param alignment=aligned

      ftctl sim topologies/wordcount.yaml -p none --seed 17 --trace trace.txt

      ftctl sim topologies/diamond.yaml -p checkpoint/commit-early --seed 1

      ftctl sim topologies/diamond.yaml -p causal \\
          --faults kill-task,pause,partition,delay,slow

      ftctl sim topologies/wordcount.yaml -p causal -n 200 \\
          --faults kill-task,pause

      ftctl sim topologies/wordcount.yaml -p checkpoint -n 50 \\
          --scenario chaos/flapping.yaml

      ftctl sim topologies/diamond.yaml -p causal -n 5000 -j 2

      ftctl sim topologies/nexmark/q5.yaml -p checkpoint --records 20000 -n 1000

      ftctl sim topologies/diamond.yaml -p causal -n 5000 \\
          --master spark://10.0.0.5:7077
    """
    kinds = _kinds(faults)
    if master is not None and (why := check_master(master)) is not None:
        raise ConfigError("--master", None, why)
    if master is not None and jobs > 1:
        raise ConfigError("--jobs", None, "runs local processes; --master runs on a cluster "
                          "instead: give one of them")
    if scenario is not None and kinds != CRASH_ONLY:
        raise ConfigError("--faults", None, "draws random schedules; --scenario replays a file "
                          "instead: give one of them")
    if scenario is not None and during is not None:
        raise ConfigError("--during", None, "adds to random schedules; --scenario replays a "
                          "file instead (its faults may use during: PHASE): give one of them")
    topo = load_topology(topology, records=records)
    info, given = protocol_and_params(protocol, param)
    if during is not None and during not in (known := _phases(info)):
        raise ConfigError("--during", None, f"{info.name} never enters phase {during!r} (its "
                          f"phases: {', '.join(known)})")
    for why in refusals(given, topo):  # a topology outside the protocol's scope
        raise ConfigError(str(topology), "--protocol", why)
    guarantee = _guarantee(expect) if expect else None
    if slots and scenario is None:
        raise ConfigError("--slots", None, "sizes the nodes of a --scenario run: give "
                          "--scenario")
    planned = (_scenario(scenario, topo, workers, node_label, info, slots or [])
               if scenario is not None else None)
    # What another process or an executor needs to rebuild this simulator (-j, --master).
    job = SimJob(topo, info.name, given, guarantee, max_failures, max_burst, kinds, planned,
                 during)
    with function_errors(str(topology), topo):
        simulator = job.simulator()
    if determinism:
        check_determinism(simulator.graph, str(topology), determinism, simulator.golden)
    run = _Run(topology, topo, info.name, schedules, first_seed, jobs, master, bind,
               fail_fast, as_json, tuple(param or ()), records)
    try:
        if seed is not None:
            _replay(simulator, seed, trace)
        _simulate(simulator, job, run)
    except ScheduleCrashed as exc:
        err_console.print(
            f"[red]error:[/red] {escape(str(exc))}; replay it with: ftctl sim {topology} "
            f"-p {info.name}{_input_options(run)} --seed {exc.seed}{_faults_option(simulator)}",
            highlight=False, soft_wrap=True)
        raise typer.Exit(EXIT_FAILED) from None


@dataclass(frozen=True)
class _Run:
    """The options of one ``ftctl sim`` run over many schedules, as the command gave them."""

    topology: Path  # the file, as the user named it (for the reproduce line)
    topo: Topology
    protocol: str
    schedules: int
    first_seed: int
    jobs: int
    master: str | None
    bind: str
    fail_fast: bool
    as_json: bool
    params: tuple[str, ...]  # --param as given, repeated in the reproduce line
    records: int | None

    @property
    def label(self) -> str:
        return f"{self.topo.name} / {self.protocol}"


def _replay(simulator: Simulator, seed: int, trace: Path | None) -> NoReturn:
    """Replay one schedule with its trace; exits with its verdict."""
    outcome = simulator.run_reported(seed, trace=True)
    _show_replay(outcome, trace)
    ok = outcome.verdict.passed or outcome.verdict.stopped_safely
    raise typer.Exit(EXIT_OK if ok else EXIT_FAILED)


def _simulate(simulator: Simulator, job: SimJob, run: _Run) -> NoReturn:
    """Run the schedules, show the summary and exit with its verdict."""
    started = time.perf_counter()
    with contextlib.ExitStack() as stack:
        # Local workers start before the progress display's thread, so they can be forked
        # with the simulator already built (``ftctl.sim.spread.start_method``).
        pool = (stack.enter_context(local_pool(simulator, job, min(run.jobs, run.schedules)))
                if run.master is None and run.jobs > 1 else None)
        summary = _with_progress(run, partial(_schedules, simulator, job, run, pool))
    elapsed = time.perf_counter() - started
    if run.as_json:
        print(json.dumps(_summary_json(summary, run.topo.name, run.protocol, simulator,
                                       elapsed)))
    else:
        _show_summary(summary, run, simulator, elapsed)
    raise typer.Exit(EXIT_OK if summary.passed else EXIT_FAILED)


def _schedules(simulator: Simulator, job: SimJob, run: _Run, pool: Pool | None,
               progress: Callable[[int], None], step: Callable[[str], None]) -> SimSummary:
    """The schedules in local processes, or as Spark tasks with --master."""
    if run.master is None:
        return run_parallel(simulator, job, run.schedules, run.first_seed, run.jobs, progress,
                            run.fail_fast, pool)
    try:
        return run_on_spark(simulator, job, run.schedules, run.first_seed, run.master,
                            progress, run.fail_fast, step, check_bind(run.bind))
    except ClusterError as exc:
        err_console.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False,
                          soft_wrap=True)
        raise typer.Exit(exc.exit_code) from None


def _with_progress(run: _Run, body: Progressed) -> SimSummary:
    """Call ``body(progress, step)`` while showing how far the schedules are."""
    if err_console.is_terminal and not run.as_json:
        # A bar on stderr in a terminal; stdout keeps only the results.
        with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                      TimeElapsedColumn(), console=err_console, transient=True) as bar:
            task = bar.add_task(run.label, total=run.schedules)
            return body(lambda done: bar.update(task, completed=done),
                        lambda msg: bar.update(task, description=f"{run.label}: {msg}"))
    # A pipe or CI log: a plain line now and then (LiveLine), none with --json.
    with LiveLine(quiet=run.as_json) as live:
        return body(lambda done: live.update(f"{run.label}: {done:,}/{run.schedules:,} "
                                             "schedules"), live.update)


def _scenario(path: Path, topo: Topology, workers: int, labels: list[str] | None,
              protocol: object, slots: list[str]) -> SimScenario:
    from ftctl.cluster.labels import LabelSyntaxError, expand_labels
    from ftctl.runtime.graph import ExecutionGraph
    from ftctl.sim.host import MAX_STEP
    from ftctl.sim.runner import nominal_duration
    from ftctl.sim.scenario import load_sim_scenario, node_slots

    try:
        node_labels = expand_labels(labels, workers)
    except LabelSyntaxError as exc:
        raise ConfigError("--label", None, str(exc)) from None
    graph = ExecutionGraph(topo)
    try:
        per_node = node_slots(slots, node_labels, len(graph.order)) if slots else None
    except ValueError as exc:
        raise ConfigError("--slots", None, str(exc)) from None
    return load_sim_scenario(path, topo, nominal_duration(graph, MAX_STEP), node_labels,
                             protocol=protocol, slots=per_node)


def _phases(info: Any) -> tuple[str, ...]:
    from chaos.plan import phases_of  # the chaos package only when --during is given

    return phases_of(info)


def _kinds(value: str) -> tuple[FaultKind, ...]:
    try:
        return parse_kinds(value)
    except ValueError as exc:
        raise ConfigError("--faults", None, str(exc)) from None


def _input_options(run: _Run) -> str:
    """The options besides the faults that a replay of one seed needs to run the same."""
    extra = "".join(f" --param {p}" for p in run.params)
    return extra if run.records is None else f"{extra} --records {run.records}"


def _faults_option(sim: Simulator) -> str:
    if sim.scenario is not None:
        cluster = sim.scenario.labels
        labels = "".join(f" --label {','.join(f'{k}={v}' for k, v in x.items())}"
                         for x in cluster if x)
        sized = "".join(f" --slots {v}" for v in sim.scenario.slot_options())
        return f" --scenario {sim.scenario.source} --workers {len(cluster)}{labels}{sized}"
    during = "" if sim.during is None else f" --during {sim.during}"
    return during + ("" if sim.kinds == CRASH_ONLY else f" --faults {','.join(sim.kinds)}")


def _guarantee(value: str) -> Guarantee:
    try:
        return Guarantee(value)
    except ValueError:
        known = ", ".join(g.value for g in Guarantee)
        raise ConfigError(
            "--expect", None, f"unknown guarantee {value!r} (known: {known})"
        ) from None


def _summary_json(
    s: SimSummary, topo: str, proto: str, sim: Simulator, elapsed: float
) -> dict[str, object]:
    return {
        "topology": topo,
        "protocol": proto,
        "guarantee": sim.guarantee.value,
        "schedules": s.schedules,
        "records": sim.graph.topology.input.records,
        "faults": list(sim.kinds) if sim.scenario is None else sim.scenario.name,
        "faults_injected": s.faults,
        "failures_injected": s.failures,
        "violating_schedules": len(s.failing_seeds),
        "violations": dict(s.violations),
        "stopped_safely": len(s.stops),
        "stops": [{"seed": seed, "reason": why} for seed, why in s.stops[:50]],
        "failing_seeds": s.failing_seeds[:50],
        "fallbacks": s.fallbacks,
        "piggyback": s.piggyback_totals(),
        "recovery": s.recovery_times(),
        "restores": [{"t": round(t, 6), "nodes_back": list(nodes), "queries": list(qs)}
                     for t, nodes, qs in s.stages],
        "passed": s.passed,
        "seconds": round(elapsed, 3),
    }


def _show_summary(s: SimSummary, run: _Run, sim: Simulator, elapsed: float) -> None:
    table = Table(
        title=f"{sim.graph.topology.name} under {run.protocol} (judged {sim.guarantee.value})")
    for col in ("schedules", "faults injected", "instances failed", "violating", *_KINDS):
        table.add_column(col, justify="right")
    table.add_row(
        str(s.schedules),
        str(s.faults),
        str(s.failures),
        str(len(s.failing_seeds)),
        *(str(s.violations.get(k, 0)) for k in _KINDS),
    )
    print_table(table, key=0)  # one row of counts: no column names it
    rate = s.schedules / elapsed * 60 if elapsed > 0 else 0.0
    faults = (f"fault kinds: {', '.join(SCENARIO_NAMES.get(k, k) for k in sim.kinds)}"
              if sim.scenario is None
              else f"scenario {sim.scenario.name} (x{sim.scenario.scale:.3g} s per scenario s)")
    console.print(f"{elapsed:.1f} s, {rate:,.0f} schedules/min; {faults}", highlight=False)
    _show_stops(s)
    _show_recovery(s)
    _show_stages(s, run)
    pb = s.piggyback_totals()
    if pb["bytes"] or pb["clock_only"]:
        console.print(f"piggyback: {pb['mean']:g} B per batch (largest {pb['max']:,}), "
                      f"{pb['clock_only']:,} clock-only batches of {pb['batches']:,} sent",
                      highlight=False)
    if s.first_failure is not None:
        bad = s.first_failure
        console.print(f"[red]violation[/red] in schedule {bad.seed}: {bad.verdict.totals()}")
        for sink in bad.verdict.sinks:
            for d in sink.divergences[:3]:
                console.print(f"  {sink.sink}: first divergence {d.describe()}", highlight=False)
        console.print(
            f"reproduce: ftctl sim {run.topology} --protocol {run.protocol}{_input_options(run)}"
            f"{_faults_option(sim)} --seed {bad.seed}",
            highlight=False,
        )
    else:
        console.print("[green]no violations[/green]")


def _show_stops(s: SimSummary) -> None:
    """Schedules the protocol stopped safely (not violations, not passes), by reason."""
    if not s.stops:
        return
    console.print(f"stopped safely: {len(s.stops)} of {s.schedules} schedules "
                  "(output so far correct; the run stopped on an object it could not trust)",
                  highlight=False)
    for seed, why in s.stops[:5]:
        console.print(f"  schedule {seed}: {why}", highlight=False)
    if len(s.stops) > 5:
        console.print(f"  ... {len(s.stops) - 5} more", highlight=False)


def _show_recovery(s: SimSummary) -> None:
    """Recovery times per fault kind, in simulated milliseconds."""
    times = s.recovery_times()
    if not any(k["failed"] for k in times.values()):
        return
    table = Table(title="recovery per fault kind (simulated ms since the fault)")
    for col in ("fault", "struck", "failed", "measure", "n", "median", "p95", "max"):
        table.add_column(col, justify="left" if col in ("fault", "measure") else "right")
    for kind, entry in times.items():
        first = True
        for name in MEASURES:
            got = entry[name]
            if got is None:
                continue
            table.add_row(kind if first else "", str(entry["faults"]) if first else "",
                          str(entry["failed"]) if first else "", name.replace("_", " "),
                          str(got["n"]), *(f"{got[k] * 1000:.2f}" for k in ("median", "p95",
                                                                          "max")))
            first = False
    print_table(table)


def _show_stages(s: SimSummary, run: _Run) -> None:
    """The first schedule's capacity returning in stages, and the queries each brought back."""
    if not s.stages:
        return
    table = Table(title=f"capacity back and queries restored (schedule {run.first_seed})")
    for col in ("t (sim s)", "nodes back", "queries restored, in the order they came back"):
        table.add_column(col, justify="right" if col.startswith("t") else "left")
    for t, nodes, queries in s.stages:
        table.add_row(f"{t:.4f}", ", ".join(nodes) or "(survivors)", " ".join(queries) or "-")
    print_table(table)


def _show_replay(outcome: ScheduleOutcome, trace_file: Path | None) -> None:
    res = outcome.result
    if trace_file is not None:
        trace_file.write_text("\n".join(res.trace) + "\n")
        console.print(f"trace: {len(res.trace)} lines written to {trace_file}")
    else:
        for line in res.trace:
            console.print(line, highlight=False, markup=False)
    console.print(f"trace hash {res.trace_hash}")
    for ev in res.events:
        console.print(f"  {ev.to_json()}", highlight=False, markup=False)
    v = outcome.verdict
    status = ("[green]passed[/green]" if v.passed
              else f"[yellow]{escape(v.outcome)}[/yellow]" if v.stopped_safely
              else "[red]violated[/red]")
    console.print(
        f"schedule {outcome.seed}: {status} ({v.guarantee.value}); "
        f"anomalies {v.totals() or 'none'}; complete={res.complete}"
    )
    for sink in v.sinks:
        for d in sink.divergences:
            console.print(f"  {sink.sink}: {d.describe()}", highlight=False)


def register(app: typer.Typer) -> None:
    app.command("sim")(user_errors(sim))
