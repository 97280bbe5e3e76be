"""Shared rich consoles and the exit-code contract."""

from __future__ import annotations

from rich.console import Console

console = Console()
err_console = Console(stderr=True)

EXIT_OK = 0
EXIT_FAILED = 1  # verification failed or regression
EXIT_USAGE = 2  # bad input or configuration
EXIT_INFRA = 3  # the cluster or another piece of infrastructure would not work
