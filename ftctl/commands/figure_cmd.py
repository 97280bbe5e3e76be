"""``ftctl figure``: list and reproduce the seed papers' figures and tables."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table
from typer.core import TyperCommand

from ftctl.commands.common import parse_params, user_errors
from ftctl.config.errors import ConfigError
from ftctl.console import EXIT_FAILED, EXIT_OK, console, err_console
from ftctl.figures import FigureOptions, FigureResult, FigureRunFailed, figures
from ftctl.tables import print_table

# A cell that is a number (or "-" for none): its column is right-aligned, like figures.
_FIGURE = re.compile(r"-|[-+]?[\d,]*\.?\d+(e[-+]?\d+)?%?")


@user_errors
def figure(
    name: Annotated[
        str | None, typer.Argument(
            help="Figure to reproduce, e.g. 001-fig7; omit (or 'list') to list them.")
    ] = None,
    host: Annotated[str | None, typer.Option(
        help="Where to run it: sim or spark (default: sim, or the figure's only host).")
    ] = None,
    out: Annotated[
        Path, typer.Option(help="Folder for the PNG and data files.")
    ] = Path("results/figures"),
    quick: Annotated[bool, typer.Option(help="A smaller run, for a first look.")] = False,
    opt: Annotated[
        list[str] | None, typer.Option("--opt", help="Figure option key=value (repeatable).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Reproduce a figure or table of a seed paper: print its table, write its plot.

    Examples:

      ftctl figure                       # list the figures

      ftctl figure 001-fig7              # Falkirk Wheel's Figure 7 frontiers

      ftctl figure 000-fig2 --quick      # paper 000's Figure 2, on Spark
    """
    known = figures()
    if name is None or name == "list":
        _list(known, as_json)
        raise typer.Exit(EXIT_OK)
    fig = known.get(name)
    if fig is None:
        raise ConfigError("figure", None, f"unknown figure {name!r} (known: {', '.join(known)})")
    if host is None:  # a Spark-only figure needs no --host spark
        host = "sim" if "sim" in fig.hosts else fig.hosts[0]
    if host not in fig.hosts:
        raise ConfigError("--host", None, f"{name} runs on {', '.join(fig.hosts)}, not {host!r}")
    options = FigureOptions(out=out / name, host=host, quick=quick, options=parse_params(opt))
    created = _missing(options.out)
    options.out.mkdir(parents=True, exist_ok=True)
    try:
        result = fig.run(options)
    except KeyboardInterrupt:
        from ftctl.run.execute import EXIT_INTERRUPTED

        # The run under way was torn down by ``execute``; points already measured were
        # printed as they came and their runs stay under --out.
        err_console.print(f"[yellow]interrupted[/yellow]: {name} stopped; the runs so far "
                          f"are in {options.out}", highlight=False, soft_wrap=True)
        raise typer.Exit(EXIT_INTERRUPTED) from None
    except FigureRunFailed as exc:
        # A simulated figure has no runs folder: what is kept is whatever it wrote.
        err_console.print(f"[red]error[/red]: {name}: {exc}; what it wrote so far is in "
                          f"{options.out}", highlight=False, soft_wrap=True)
        raise typer.Exit(EXIT_FAILED) from None
    finally:
        _remove_empty(created)
    _show(result, as_json)


def _missing(folder: Path) -> list[Path]:
    """``folder`` and those of its parents that do not exist yet, deepest first."""
    out: list[Path] = []
    while not folder.exists():
        out.append(folder)
        if folder.parent == folder:
            break
        folder = folder.parent
    return out


def _remove_empty(created: list[Path]) -> None:
    """A figure that wrote nothing (a table only) leaves no empty folders behind."""
    for folder in created:  # deepest first
        try:
            folder.rmdir()
        except OSError:  # not empty (or already gone): keep it and its parents
            return


def _list(known: dict, as_json: bool) -> None:
    if as_json:
        console.print_json(json.dumps([
            {"name": f.name, "paper": f.paper, "title": f.title, "hosts": list(f.hosts)}
            for f in known.values()]))
        return
    table = Table("figure", "paper", "hosts", "what", title="seed figures")
    for f in known.values():
        table.add_row(f.name, f.paper, ",".join(f.hosts), f.title)
    print_table(table)


def _show(result: FigureResult, as_json: bool) -> None:
    if as_json:
        console.print_json(json.dumps({
            "title": result.title, "header": list(result.header),
            "rows": [list(r) for r in result.rows], "files": [str(p) for p in result.files],
            "summary": dict(result.summary), "notes": list(result.notes)}, default=str))
        return
    table = Table(title=result.title)
    cells = [[str(v) for v in row] for row in result.rows]
    for i, head in enumerate(result.header):
        figures_only = all(_FIGURE.fullmatch(r[i]) for r in cells if i < len(r))
        table.add_column(head, justify="right" if figures_only else "left")
    for row in cells:
        table.add_row(*row)
    print_table(table)
    for note in result.notes:
        console.print(note)
    plots = [p for p in result.files if p.suffix == ".png"]
    for path in plots:
        console.print(f"plot: {path}", highlight=False, soft_wrap=True)
    for path in result.files:
        if path not in plots:
            console.print(f"data: {path}", highlight=False, soft_wrap=True)
    if not plots:
        console.print("this figure has no plot; its table above is the result",
                      highlight=False)


class _FigureCommand(TyperCommand):
    """``ftctl figure NAME --help`` ends with NAME's ``--opt`` keys: --help is answered
    before NAME is parsed, so the words of the command line are kept to find it. (``ctx``
    is the click Context typer vendors privately, hence Any.)"""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        ctx.meta["figure.words"] = [a for a in args if not a.startswith("-")]
        return super().parse_args(ctx, args)

    def format_help(self, ctx: Any, formatter: Any) -> None:
        self.epilog = _options_help(ctx.meta.get("figure.words", []))
        try:
            super().format_help(ctx, formatter)
        finally:
            self.epilog = None


def _options_help(words: list[str]) -> str | None:
    known = figures()
    fig = next((known[w] for w in words if w in known), None)
    if fig is None or not fig.options:
        return None
    return "\n\n".join([f"{fig.name} --opt keys:",
                         *(f"{k}=...  {what}" for k, what in fig.options.items())])


def register(app: typer.Typer) -> None:
    app.command("figure", cls=_FigureCommand)(figure)
