"""Shared rich consoles and the exit-code contract."""

from __future__ import annotations

from typing import IO

from rich.console import Console


def make_console(file: IO[str] | None = None, *, stderr: bool = False,
                 width: int | None = None, force_terminal: bool | None = None) -> Console:
    """A console that never hard-wraps a line of text when it does not write to a terminal.

    In a pipe or a CI log rich still assumes 80 columns (or $COLUMNS) and would break a
    sentence at that width ("total 53.8 " / "s (cluster ...)"), so grep sees half a fact;
    there, lines are printed whole (soft wrap). Tables still fit the width: ``print_table``
    lays them out for it. In a terminal rich wraps at spaces as usual.
    """
    con = Console(file=file, stderr=stderr, width=width, force_terminal=force_terminal)
    con.soft_wrap = not con.is_terminal
    return con


console = make_console()
err_console = make_console(stderr=True)

EXIT_OK = 0
EXIT_FAILED = 1  # verification failed or regression
EXIT_USAGE = 2  # bad input or configuration
EXIT_INFRA = 3  # the cluster or another piece of infrastructure would not work
