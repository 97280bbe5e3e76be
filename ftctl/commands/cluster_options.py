"""Options for running against a cluster: ``--master`` (a running cluster), ``--bind``
(where the driver's control channel listens) and ``--store`` (where snapshots go)."""

from __future__ import annotations

from typing import Annotated

import typer

from ftctl.config.errors import ConfigError
from ftctl.spark import wire
from ftctl.store import open_location

DEFAULT_BIND = wire.HOST

Master = Annotated[str | None, typer.Option(
    "--master", help="spark://host:port of a running cluster (default: start one); process "
    "faults go through each task's own agent there (kill-task, lose-unsynced, kill-executor, "
    "pause, slow).")]


def check_master(value: str | None) -> str | None:
    """The master URL as given; else the one-line usage error."""
    if value is not None and not value.startswith("spark://"):
        raise ConfigError("--master", None, f"expected spark://host:port, got {value!r}")
    return value

Verbose = Annotated[bool, typer.Option(
    "--verbose", "-v", help="Also stream Spark's JVM logs to stderr (they are always "
    "written to logs/ in the run folder).")]

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


Store = Annotated[str | None, typer.Option(
    "--store", help="Stable storage for snapshots: a path or a URI pyarrow can open "
    "(file:///srv/ftctl, s3://bucket/prefix, hdfs://...). Each run writes under <store>/"
    "<run id>. Default: snapshots/ in the run's results directory. Executors that see the "
    "same store write their snapshots there themselves; others send them to the driver.")]


def check_store(value: str | None) -> str | None:
    """The store location if pyarrow can open it; else the one-line usage error."""
    if value is None:
        return None
    try:
        open_location(value)
    except ValueError as exc:
        raise ConfigError("--store", None, str(exc)) from None
    return value
