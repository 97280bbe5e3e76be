"""The ``ftctl`` command line. Each command group lives in ``ftctl.commands``."""

from __future__ import annotations

import sys
from typing import Any

import typer
from rich.markup import escape

from ftctl.config.errors import ConfigError
from ftctl.console import EXIT_USAGE, err_console

# Commands that need only the config modules: `ftctl validate` and friends start without
# importing Spark, Docker, numpy or matplotlib (1.9 s of CPU before they were lazy).
_LIGHT = {"validate", "list", "schema"}


def build_app(light: bool = False) -> typer.Typer:
    """The CLI; ``light`` registers only the config commands."""
    from ftctl.commands import config_cmds

    app = typer.Typer(
        name="ftctl",
        help="Chaos-testing harness for fault-tolerance protocols of streaming dataflows.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
    )
    config_cmds.register(app)
    if light:
        return app
    from ftctl.commands import (
        chaos_cmd,
        cluster_cmds,
        compare_cmd,
        conformance_cmd,
        figure_cmd,
        gate_cmd,
        image_cmd,
        run_cmd,
        sim_cmd,
        stored_cmds,
    )

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
    return app


def __getattr__(name: str) -> Any:
    """``ftctl.cli.app``, the full CLI, built on first use."""
    if name == "app":
        app = build_app()
        globals()["app"] = app
        return app
    raise AttributeError(name)


def main() -> None:
    """Entry point: a user's or the environment's error is one line, never a traceback."""
    light = len(sys.argv) > 1 and sys.argv[1] in _LIGHT
    try:
        build_app(light)()
    except ConfigError as exc:
        _fail(str(exc), EXIT_USAGE)
    except KeyboardInterrupt:
        _fail("interrupted", 130)
    except Exception as exc:
        # Imported only here: the cluster package is heavy and config commands never
        # raise its errors.
        from ftctl.cluster.errors import ClusterError

        if isinstance(exc, ClusterError):
            _fail(str(exc), exc.exit_code)
        raise


def _fail(message: str, code: int) -> None:
    err_console.print(f"[red]error:[/red] {escape(message)}", highlight=False, soft_wrap=True)
    sys.exit(code)


if __name__ == "__main__":
    main()
