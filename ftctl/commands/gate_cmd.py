"""``ftctl gate``: the CI regression gate."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from ftctl.commands.common import user_errors
from ftctl.config.errors import ConfigError
from ftctl.console import EXIT_FAILED, EXIT_OK, console
from ftctl.gate.baseline import read_baseline, write_baseline
from ftctl.gate.junit import write_junit
from ftctl.gate.runner import CaseResult, judge, measure_all
from ftctl.gate.suite import GateCase, load_suite
from ftctl.tables import print_table
from protocols.registry import UnknownProtocol, resolve

DEFAULT_SUITE = Path("gate/ci.yaml")


def gate(
    suite_file: Annotated[Path, typer.Option("--suite", help="Suite YAML.")] = DEFAULT_SUITE,
    baseline_file: Annotated[Path | None, typer.Option(
        "--baseline", help="Baseline JSON (default results/baselines/<suite>.json).")] = None,
    junit: Annotated[Path | None, typer.Option(help="Write JUnit XML here.")] = None,
    update_baseline: Annotated[bool, typer.Option(
        help="Accept this run's metrics as the new baseline (cases whose guarantee held).")
    ] = False,
    only: Annotated[list[str] | None, typer.Option(help="Run only these cases.")] = None,
    list_cases: Annotated[bool, typer.Option(
        "--list", help="Print the suite's cases (registry ones included) and exit.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON summary.")] = False,
    jobs: Annotated[int, typer.Option(
        "--jobs", "-j", min=1, help="Simulation cases run side by side in this many "
        "processes (default: one per CPU); Spark cases run one at a time after them.")
    ] = os.cpu_count() or 1,
) -> None:
    """Run a suite of topology x protocol x scenario cases; exit 1 on a broken guarantee
    or a recovery-time regression against the baseline.

    Simulation cases are judged on violations and on the median simulated recovery delay
    and records re-sent; Spark cases run `ftctl chaos` and are judged on exactly-once and
    the median recovery and detection times over the suite's repeats.

    Examples:

      ftctl gate

      ftctl gate --suite gate/ci.yaml --junit results/gate.xml

      ftctl gate --update-baseline

      ftctl gate --only wordcount-causal --jobs 1

      ftctl gate --list
    """
    suite = load_suite(suite_file)
    if list_cases:
        for c in suite.cases:
            runs = f"{c.schedules} schedules" if c.host == "sim" else "spark"
            params = "".join(f" {k}={v}" for k, v in c.params.items())
            console.print(f"{c.name}: {c.protocol}{params} on {c.topology} ({runs})",
                          highlight=False)
        return
    for case in suite.cases:
        try:
            resolve(case.protocol)  # a plug-in, an import path or a mutant, as on the CLI
        except UnknownProtocol as exc:
            raise ConfigError(str(suite_file), f"cases.{case.name}.protocol", str(exc)) from None
        if not case.topology.exists():
            raise ConfigError(str(suite_file), f"cases.{case.name}.topology",
                              f"no such file {case.topology}")
    cases = [c for c in suite.cases if not only or c.name in only]
    if only and len(cases) != len(set(only)):
        missing = sorted(set(only) - {c.name for c in cases})
        raise ConfigError(str(suite_file), "cases", f"no case named {missing[0]!r}")
    baseline_path = baseline_file or Path("results/baselines") / f"{suite.name}.json"
    baseline = read_baseline(baseline_path)

    finished: list[str] = []
    with console.status(f"gate {suite.name}: 0/{len(cases)} cases done") as status:

        def done(case: GateCase) -> None:
            finished.append(case.name)
            status.update(f"gate {suite.name}: {len(finished)}/{len(cases)} cases done, "
                          f"the last {case.name}")

        measured = measure_all(cases, suite, jobs, done)
    results = [judge(r, c, suite, None if update_baseline else baseline.get(c.name))
               for r, c in zip(measured, cases, strict=True)]

    if junit is not None:
        write_junit(junit, suite.name, results)
    if update_baseline:
        accepted = {**baseline, **{r.name: r.metrics for r in results if r.guarantee_held}}
        write_baseline(baseline_path, suite.name, accepted)
    failed = [r for r in results if not r.passed]
    if as_json:
        print(json.dumps({"suite": suite.name, "passed": not failed,
                          "cases": [r.to_json() for r in results]}))
    else:
        _show(suite.name, results, baseline_path, update_baseline)
    raise typer.Exit(EXIT_FAILED if failed else EXIT_OK)


def _show(suite: str, results: list[CaseResult], baseline: Path, updated: bool) -> None:
    table = Table(title=f"gate {suite}")
    for col in ("case", "result", "metrics", "why"):
        table.add_column(col)
    for r in results:
        mark = "[green]pass[/green]" if r.passed else "[red]FAIL[/red]"
        metrics = ", ".join(f"{k}={v:g}" for k, v in sorted(r.metrics.items()))
        table.add_row(r.name, mark, metrics, "; ".join(r.reasons))
    print_table(table)
    for r in results:
        if r.details and not r.passed:
            console.print(f"{r.name}: {r.details}", highlight=False, markup=False)
    if updated:
        console.print(f"baseline written to {baseline}")


def register(app: typer.Typer) -> None:
    app.command("gate")(user_errors(gate))
