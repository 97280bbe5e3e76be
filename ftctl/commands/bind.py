"""``--bind``: the address the driver's control channel listens on."""

from __future__ import annotations

from typing import Annotated

import typer

from ftctl.config.errors import ConfigError
from ftctl.spark import wire

DEFAULT_BIND = wire.HOST

Bind = Annotated[str, typer.Option(
    "--bind", help="Address the driver listens on for its tasks' control connections "
    "(default loopback). Set it to an address of this machine that the cluster's executors "
    "can reach, or 0.0.0.0 for all; every connection must still prove the run's token.")]


def check_bind(value: str) -> str:
    """The address if this machine can listen on it; else the one-line usage error."""
    try:
        return wire.check_bind(value)
    except ValueError as exc:
        raise ConfigError("--bind", None, str(exc)) from None
