"""Argument helpers shared by commands."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Annotated, Any, ParamSpec, TypeVar

import typer
from rich.markup import escape

from ftctl.config.errors import ConfigError
from ftctl.config.topology import Topology
from ftctl.console import EXIT_USAGE, err_console
from ftctl.runtime.graph import ExecutionGraph
from ftctl.runtime.operators import FunctionFailed
from protocols.contract.params import ParamError, ProtocolParams, parse_items, validate
from protocols.contract.spec import ProtocolSpec
from protocols.contract.view import GraphView
from protocols.registry import UnknownProtocol, resolve

Spares = Annotated[int | None, typer.Option(
    "--spares", min=0, max=64, help="Empty slots (long-lived Spark tasks) kept waiting: a "
    "restarted instance is handed one instead of waiting for a Spark job of its own. Default: "
    "enough to cover the largest failure domain (a worker, or workers sharing a label) of a "
    "cluster ftctl starts; 1 with --master.")]

StartMode = Annotated[str, typer.Option(
    "--start", help="How instances start: slot (default: long-lived Spark tasks that host "
    "one instance after another, so a restart is an assignment) or job (a Spark job per "
    "instance and incarnation, no slot reused: Spark's job start is then part of every "
    "restart, as a baseline to measure against).")]


def check_start(start: str) -> str:
    if start not in ("slot", "job"):
        raise ConfigError("--start", None, f"expected slot or job, got {start!r}")
    return start


P = ParamSpec("P")
R = TypeVar("R")


def user_errors(fn: Callable[P, R]) -> Callable[P, R]:
    """Bad input becomes one line on stderr and exit code 2, never a traceback."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except (ConfigError, UnknownProtocol) as exc:
            # UnknownProtocol here is a plug-in met while listing every protocol.
            text = str(exc) if isinstance(exc, ConfigError) else f"--protocol: {exc}"
            err_console.print(f"[red]error:[/red] {escape(text)}", highlight=False,
                              soft_wrap=True)
            raise typer.Exit(EXIT_USAGE) from None

    return wrapper


@contextmanager
def function_errors(file: str, topology: Topology) -> Iterator[None]:
    """A user's function that returns what its operator cannot use (or raises), met while
    running ``topology`` (the golden run), becomes a ConfigError naming the operator's
    ``function`` field."""
    try:
        yield
    except FunctionFailed as exc:
        names = [op.name for op in topology.operators]
        field = (f"operators[{names.index(exc.operator)}].function"
                 if exc.operator in names else None)
        raise ConfigError(file, field, str(exc)) from None


def parse_params(items: list[str] | None) -> dict[str, Any]:
    """Flat ``["a=1", "b=x"]`` -> dict for options that are not protocol params (figures)."""
    out: dict[str, Any] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError("--param", None, f"expected key=value, got {item!r}")
        out[key.strip()] = value.strip()
    return out


def check_scope(params: ProtocolParams, topology: Topology, where: str) -> None:
    """ConfigError naming ``where`` when the protocol (its ``params``) refuses ``topology``
    (e.g. replica-ring on a stateful operator without state mirroring)."""
    for why in params.check(GraphView(ExecutionGraph(topology))):
        raise ConfigError(where, "--protocol", why)


def protocol_and_params(name: str,
                        items: list[str] | None,
                        ) -> tuple[ProtocolSpec[Any], ProtocolParams]:
    """The protocol by name and the user's ``--param`` items, validated (raises ConfigError
    naming the param). Dotted keys nest: ``burst.window=5``. ``"auto"`` values stay until
    the host resolves them for its run (``ProtocolSpec.resolve``). A shipped mutant's
    variant params come first; the user's override them."""
    try:
        info, planted = resolve(name)
    except UnknownProtocol as exc:
        raise ConfigError("--protocol", None, str(exc)) from None
    try:
        return info, validate(info.params, {**planted, **parse_items(items)}, info.name)
    except ParamError as exc:
        raise ConfigError("--param", None, str(exc)) from None
