"""``ftctl analyze`` and ``ftctl report``: work on stored runs without running them again."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from ftctl.commands.common import user_errors
from ftctl.compare.report import write_report as write_compare_report
from ftctl.config.errors import ConfigError
from ftctl.console import EXIT_FAILED, EXIT_OK, console
from ftctl.report.run_report import run_summary, write_run_report
from ftctl.results import RunStore
from ftctl.sim.golden import golden_output
from ftctl.tables import print_table
from ftctl.verify.reverify import reverify
from protocols.contract.spec import Guarantee

RESULTS = Path("results")


def analyze(
    run_id: Annotated[str, typer.Argument(help="Run id (or a unique prefix) or its folder.")],
    results: Annotated[Path, typer.Option(help="Results folder.")] = RESULTS,
    expect: Annotated[str | None, typer.Option(
        help="Judge against this guarantee instead of the protocol's own.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Re-verify a stored run: its recorded outputs against the golden run, again.

    Says whether the fresh verdict reproduces the stored one. Exit 1 if it does not
    pass (an unfinished run never passes).

    Example:

      ftctl analyze 20261121-220228-wordcount-checkpoint-6f55
    """
    run = RunStore.open(run_id, results)
    guarantee = None
    if expect is not None:
        try:
            guarantee = Guarantee(expect)
        except ValueError:
            raise ConfigError("--expect", None, f"unknown guarantee {expect!r}") from None
    rv = reverify(run, golden_output, guarantee)
    if as_json:
        print(json.dumps({"run_id": run.run_id, "status": rv.status, "passed": rv.passed,
                          "matches_stored": rv.matches_stored,
                          "verdict": rv.verdict.to_json()}))
    else:
        table = Table(title=f"{run.run_id} ({rv.status}), judged {rv.verdict.guarantee.value}")
        for col in ("sink", "mode", "golden", "output", "lost", "duplicated", "unexpected",
                    "reordered"):
            table.add_column(col, justify="right" if col not in ("sink", "mode") else "left")
        for s in rv.verdict.sinks:
            table.add_row(s.sink, s.mode, str(s.golden_records), str(s.output_records),
                          str(s.lost), str(s.duplicated), str(s.unexpected), str(s.reordered))
        print_table(table)
        for s in rv.verdict.sinks:
            for d in s.divergences:
                console.print(f"  {s.sink}: {d.describe()}", highlight=False, markup=False)
        if rv.stored is None:
            console.print("no stored verdict to compare with")
        elif rv.matches_stored:
            console.print("the fresh verdict reproduces the stored one")
        else:
            console.print("[yellow]the fresh verdict differs from the stored one[/yellow]")
        console.print("[green]passed[/green]" if rv.passed else "[red]failed[/red]")
    raise typer.Exit(EXIT_OK if rv.passed else EXIT_FAILED)


def report(
    run_id: Annotated[str, typer.Argument(help="Run id (or a unique prefix) or its folder.")],
    results: Annotated[Path, typer.Option(help="Results folder.")] = RESULTS,
    html: Annotated[Path | None, typer.Option(
        help="Where to write the HTML (default: report.html in the run folder).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
) -> None:
    """Re-render a stored run or comparison: a summary here and a self-contained HTML report.

    The report opens offline in any browser: interactive plots (plotly, inlined), the
    verdict first, faults and output on one time axis.

    Examples:

      ftctl report 20261121-220228-wordcount-checkpoint-6f55

      ftctl report 20261123-201535-wordcount-compare-7a71
    """
    run = RunStore.open(run_id, results)
    if (run.path / "comparison.json").exists():
        path = write_compare_report(run.path, path=html)
        if as_json:
            print(json.dumps({"run_id": run.run_id, "kind": "compare", "html": str(path)}))
        else:
            console.print(f"report: {path}", highlight=False, soft_wrap=True)
        return
    path = write_run_report(run, html)
    summary = run_summary(run)
    if as_json:
        print(json.dumps({**summary, "html": str(path)}, default=repr))
        return
    v = summary["verdict"]
    console.print(f"{run.run_id}: {summary['topology']} under {summary['protocol']}, "
                  f"status {summary['status']}, "
                  + ("[green]passed[/green]" if summary["passed"] else "[red]not passed[/red]"))
    for s in v.get("sinks", []):
        console.print(f"  {s['sink']} ({s['mode']}): lost {s['lost']}, duplicated "
                      f"{s['duplicated']}, unexpected {s['unexpected']}", highlight=False)
    console.print(f"report: {path}")


def register(app: typer.Typer) -> None:
    app.command("analyze")(user_errors(analyze))
    app.command("report")(user_errors(report))
