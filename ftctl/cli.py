"""The ``ftctl`` command line. Each command group lives in ``ftctl.commands``."""

from __future__ import annotations

import sys

import typer

from ftctl.commands import cluster_cmds, config_cmds, run_cmd, sim_cmd
from ftctl.config.errors import ConfigError
from ftctl.console import err_console

app = typer.Typer(
    name="ftctl",
    help="Chaos-testing harness for fault-tolerance protocols of streaming dataflows.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
config_cmds.register(app)
sim_cmd.register(app)
cluster_cmds.register(app)
run_cmd.register(app)


def main() -> None:
    try:
        app()
    except ConfigError as exc:
        err_console.print(f"[red]error:[/red] {exc}", highlight=False, soft_wrap=True)
        sys.exit(2)


if __name__ == "__main__":
    main()
