"""``ftctl conformance``: every protocol's guarantee and every shipped mutant, in one run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ftctl.commands.common import user_errors
from ftctl.config.errors import ConfigError
from ftctl.conformance.cases import BUNDLED_TOPOLOGIES, MAX_SIM_RECORDS, topologies
from ftctl.conformance.kit import CaseResult, Kit, KitReport
from ftctl.console import EXIT_FAILED, EXIT_OK, console
from ftctl.tables import print_table
from protocols.registry import PROTOCOLS, UnknownProtocol, registered


def conformance(
    protocol: Annotated[
        list[str] | None,
        typer.Option("--protocol", "-p", help="Only this protocol (repeatable); default: all."),
    ] = None,
    schedules: Annotated[
        int, typer.Option("--schedules", "-n", min=1,
                          help="Seeded schedules per case, and most seeds tried per mutant.")
    ] = 30,
    first_seed: Annotated[int, typer.Option(help="Seed of the first schedule.")] = 1,
    topology_dir: Annotated[
        Path, typer.Option("--topologies", help="Directory of topology YAML files to run.")
    ] = BUNDLED_TOPOLOGIES,
    max_records: Annotated[
        int, typer.Option("--max-records", min=1, help=(
            "Simulate topologies with up to this many input records; larger ones are "
            "listed as skipped. 1000000 takes in the Nexmark files (slow: see "
            "docs/conformance.md, At size)."))
    ] = MAX_SIM_RECORDS,
    mutants: Annotated[bool, typer.Option(help="Also run every shipped mutant.")] = True,
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON report.")] = False,
) -> None:
    """Check every registered protocol against its declared guarantee, and its mutants.

    For each protocol (or the ones named), each of its variants runs on every topology in
    --topologies over N seeded schedules on the simulation host (crashes; a third of them
    again with every fault kind: pause, partition, drop, delay, slow, node loss, as cases
    named +all-faults) and must hold the guarantee the protocol declares on that topology
    (a protocol may declare none, no delivery promise: `none` where an operator keeps state;
    such a case only has to finish, shown as finished or stalled). Then every
    mutant the protocol ships (a planted bug, listed by `ftctl list mutants`) runs
    through the same seeds, each seed on every
    topology, until a schedule on which the protocol holds breaks it: the mutant is caught.
    Every failure names its first violating seed, replayable with `ftctl sim`. A case none
    of whose schedules injected a fault tested nothing: shown as `no fault injected`, not
    holds. Exits 1 if a guarantee breaks, a case never receives a fault, or a mutant
    survives.

    Examples:

      ftctl conformance -n 200

      ftctl conformance -p causal -p lineage -n 50

      ftctl conformance -p checkpoint --no-mutants --json

      ftctl conformance -p causal -n 10 --no-mutants \\
          --topologies topologies/nexmark --max-records 1000000

      ftctl sim topologies/diamond.yaml -p checkpoint/commit-early --seed 1
    """
    names = list(protocol or PROTOCOLS)
    for name in names:
        try:
            registered(name)  # the kit runs a protocol's mutants itself: none named here
        except UnknownProtocol as exc:
            raise ConfigError("--protocol", None, str(exc)) from None
    if not topologies(topology_dir, max_records):
        raise ConfigError(str(topology_dir), None, "no topology YAML files in this directory"
                          f" with at most {max_records:,} input records (--max-records)")
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=console, transient=True,
                  disable=as_json or not console.is_terminal) as progress:
        kit = Kit(topology_dir, first_seed, max_records=max_records)
        task = progress.add_task("conformance", total=kit.planned_runs(names, schedules, mutants))
        kit.progress = lambda what: progress.update(task, advance=1, description=what)
        report = kit.run(names, schedules, mutants)
    if as_json:
        print(json.dumps(report.to_json(), indent=2))
    else:
        _show(report, schedules)
    raise typer.Exit(EXIT_OK if report.passed else EXIT_FAILED)


def _status(c: CaseResult) -> str:
    """``holds``/``broken`` for a delivery guarantee; with no delivery promise (guarantee
    ``none``) only completion is checked: ``finished``/``stalled``. A case no fault
    struck tested nothing: ``no fault injected``, whatever its output."""
    if c.error:
        return "[red]error[/red]"
    if c.passed and c.untested:
        return "[red]no fault injected[/red]"
    if c.checks == "completion":
        return "[green]finished[/green]" if c.passed else "[red]stalled[/red]"
    return "[green]holds[/green]" if c.passed else "[red]broken[/red]"


def _show(report: KitReport, n: int) -> None:
    cases = Table(title=f"guarantees over {n} seeded schedules per case")
    for col in ("case", "guarantee", "runs", "faults", "violating", "first seed", ""):
        numeric = col in ("runs", "faults", "violating", "first seed")
        cases.add_column(col, no_wrap=col == "case", justify="right" if numeric else "left")
    for c in report.cases:
        cases.add_row(c.case.name, c.case.guarantee.value, str(c.schedules),
                      str(c.failures_injected), str(len(c.failing_seeds)),
                      str(c.failing_seeds[0]) if c.failing_seeds else "-",
                      _status(c))
    print_table(cases)
    if report.mutants:
        muts = Table(title="mutants (planted bugs)")
        for col in ("mutant", "caught on", "violations", "runs", ""):
            muts.add_column(col, no_wrap=col == "mutant",
                            justify="right" if col == "runs" else "left")
        for m in report.mutants:
            totals = ", ".join(f"{k}={v}" for k, v in sorted(m.violations.items()))
            where = f"{m.topology.stem} seed {m.seed}" if m.topology else "-"
            muts.add_row(m.qualified, where, totals or "-", str(m.schedules),
                         "[green]caught[/green]" if m.caught else "[red]survived[/red]")
        print_table(muts)
    for stem, why in report.skipped.items():
        console.print(f"skipped {stem}: {why}", highlight=False)
    for c in report.cases:
        if c.error is not None:
            console.print(f"[red]could not run[/red] {c.case.name}: {escape(c.error)}",
                          highlight=False)
        elif not c.passed:
            what = "guarantee broken" if c.checks == "delivery" else "did not finish"
            console.print(f"[red]{what}[/red]: {c.case.name} "
                          f"({', '.join(f'{k}={v}' for k, v in sorted(c.violations.items()))})")
            console.print(f"  reproduce: {escape(c.reproduce() or '')}", highlight=False)
        elif c.untested:
            console.print(f"[red]no fault injected[/red]: {c.case.name}: none of its "
                          f"{c.schedules} schedules struck; it tests nothing", highlight=False)
    for m in report.mutants:
        if not m.caught:
            console.print(f"[red]mutant survived[/red] {m.qualified}: "
                          f"{escape(m.mutant.description)} ({m.schedules} runs); the kit "
                          "needs a topology or fault kind that exposes it", highlight=False)
    shown = sum(c.schedules for c in report.cases) + sum(m.schedules for m in report.mutants)
    console.print(f"{report.seconds:.1f} s, {shown} schedules run")
    if report.passed:
        console.print("[green]every guarantee held and every mutant was caught[/green]")


def register(app: typer.Typer) -> None:
    app.command("conformance")(user_errors(conformance))
