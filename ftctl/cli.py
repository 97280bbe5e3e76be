"""The ``ftctl`` command line. Each command group lives in ``ftctl.commands``."""

from __future__ import annotations

import sys

import typer
from rich.markup import escape

from ftctl.cluster.errors import ClusterError
from ftctl.commands import (
    chaos_cmd,
    cluster_cmds,
    compare_cmd,
    config_cmds,
    conformance_cmd,
    figure_cmd,
    gate_cmd,
    image_cmd,
    run_cmd,
    sim_cmd,
    stored_cmds,
)
from ftctl.config.errors import ConfigError
from ftctl.console import EXIT_USAGE, err_console

app = typer.Typer(
    name="ftctl",
    help="Chaos-testing harness for fault-tolerance protocols of streaming dataflows.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
config_cmds.register(app)
sim_cmd.register(app)
conformance_cmd.register(app)
cluster_cmds.register(app)
image_cmd.register(app)
run_cmd.register(app)
chaos_cmd.register(app)
gate_cmd.register(app)
compare_cmd.register(app)
figure_cmd.register(app)
stored_cmds.register(app)


def main() -> None:
    """Entry point: a user's or the environment's error is one line, never a traceback."""
    try:
        app()
    except ConfigError as exc:
        _fail(str(exc), EXIT_USAGE)
    except ClusterError as exc:
        _fail(str(exc), exc.exit_code)
    except KeyboardInterrupt:
        _fail("interrupted", 130)


def _fail(message: str, code: int) -> None:
    err_console.print(f"[red]error:[/red] {escape(message)}", highlight=False, soft_wrap=True)
    sys.exit(code)


if __name__ == "__main__":
    main()
