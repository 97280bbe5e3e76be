"""The ``ftctl`` command line. Each command group lives in ``ftctl.commands``."""

from __future__ import annotations

import sys
from typing import Any

import typer
from rich.markup import escape

from ftctl.config.errors import ConfigError
from ftctl.console import EXIT_USAGE, err_console
from ftctl.lifetime import tie_from_environment

# Every top-level command: the module in ``ftctl.commands`` that registers it, and the
# one-line summary ``ftctl --help`` shows. A command imports only its own module, so
# `ftctl validate` does not pay for Spark, Docker or matplotlib, and `ftctl --help` pays
# for none of them (tests/test_cli_startup.py keeps the summaries equal to the commands').
COMMANDS: dict[str, tuple[str, str]] = {
    "validate": ("config_cmds",
                 "Check topology and chaos-scenario files without running anything."),
    "list": ("config_cmds",
             "List topologies, protocols, their mutants (planted bugs), operator types, "
             "record types (the fields key_by and window field: can name) or fault types."),
    "schema": ("config_cmds",
               "Print the JSON Schema of topology or scenario files (for editors and CI)."),
    "sim": ("sim_cmd",
            "Run seeded failure schedules on the simulation host and check every output."),
    "conformance": ("conformance_cmd", "Check every registered protocol against its declared "
                    "guarantee, and its mutants."),
    "run": ("run_cmd", "Run TOPOLOGY on a Spark cluster under a protocol and verify its output."),
    "chaos": ("chaos_cmd", "Run TOPOLOGY under scripted faults, verify exactly-once and "
              "measure recovery."),
    "gate": ("gate_cmd", "Run a suite of topology x protocol x scenario cases; exit 1 on a "
             "broken guarantee or a recovery-time regression against the baseline."),
    "figure": ("figure_cmd", "Reproduce a figure or table of a seed paper: print its table, "
               "write its plot."),
    "analyze": ("stored_cmds", "Re-verify a stored run: its recorded outputs against the "
                "golden run, again."),
    "report": ("stored_cmds", "Re-render a stored run or comparison: a summary here and a "
               "self-contained HTML report."),
    "cluster": ("cluster_cmds", "Start, inspect and stop a Spark standalone cluster (master + "
                "workers on 127.0.0.1, as local processes or, with --backend docker, as "
                "containers)."),
    "image": ("image_cmd", "Build the image of the docker cluster backend."),
    "compare": ("compare_cmd", "Compare protocols side by side."),
    "new": ("new_cmd", "Write a new protocol package to start from."),
}


def _new_app() -> typer.Typer:
    app = typer.Typer(
        name="ftctl",
        help="Chaos-testing harness for fault-tolerance protocols of streaming dataflows.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
    )
    # A callback keeps the app a group when only one command is loaded; without it typer
    # would make that command the whole CLI and read `sim` as its first argument.
    app.callback()(_group)
    return app


def _group() -> None:
    pass


def build_app(only: str | None = None) -> typer.Typer:
    """The CLI: every command, or with ``only`` just the module of that command."""
    import importlib

    app = _new_app()
    modules = [COMMANDS[only][0]] if only else list(dict.fromkeys(m for m, _ in
                                                                   COMMANDS.values()))
    for name in modules:
        importlib.import_module(f"ftctl.commands.{name}").register(app)
    from ftctl.helptext import reflow_app

    reflow_app(app)
    return app


def summary_app() -> typer.Typer:
    """What ``ftctl`` and ``ftctl --help`` print: every command by its summary, with
    nothing imported. A command is never run from here (``main`` dispatches first)."""
    app = _new_app()
    for name, (_module, summary) in COMMANDS.items():
        app.command(name, help=summary, add_help_option=False)(_not_loaded)
    return app


def _not_loaded() -> None:
    raise RuntimeError("a command summary was invoked instead of its command")


def __getattr__(name: str) -> Any:
    """``ftctl.cli.app``, the full CLI, built on first use."""
    if name == "app":
        app = build_app()
        globals()["app"] = app
        return app
    raise AttributeError(name)


def main() -> None:
    """Entry point: a user's or the environment's error is one line, never a traceback."""
    tie_from_environment()  # a child of another ftctl (the gate's runs) dies with it
    first = sys.argv[1] if len(sys.argv) > 1 else None
    try:
        if first in COMMANDS:
            build_app(first)()
        elif first is None or first == "--help":
            summary_app()()
        else:
            build_app()()  # an unknown command: typer names it and suggests the nearest
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
        from protocols.registry import UnknownProtocol

        if isinstance(exc, UnknownProtocol):  # a plug-in that cannot be used, wherever met
            _fail(f"--protocol: {exc}", EXIT_USAGE)
        raise


def _fail(message: str, code: int) -> None:
    err_console.print(f"[red]error:[/red] {escape(message)}", highlight=False, soft_wrap=True)
    sys.exit(code)


if __name__ == "__main__":
    main()
