"""Errors raised by the cluster backends.

Two kinds, because the CLI maps them to different exit codes (see ``ftctl.console``):
a problem the user can fix in their environment or command line (missing Java, a port
already taken, a bad label) is a :class:`ClusterUsageError` (exit 2); a cluster that was
asked for correctly but would not come up is an :class:`InfraError` (exit 3).
Both render as one line so the CLI never needs to show a traceback.
"""

from __future__ import annotations

from pathlib import Path

from ftctl.console import EXIT_INFRA, EXIT_USAGE


class ClusterError(Exception):
    """Base of every cluster-backend error; ``exit_code`` is what the CLI exits with."""

    exit_code: int = EXIT_INFRA


class ClusterUsageError(ClusterError):
    """The user's environment or request is wrong (exit 2)."""

    exit_code = EXIT_USAGE


class JavaNotFoundError(ClusterUsageError):
    """No usable Java 17+ runtime."""


class PortInUseError(ClusterUsageError):
    """A port the user asked for is already taken on 127.0.0.1."""


class LabelSyntaxError(ClusterUsageError):
    """A worker label is not ``key=value``."""


class ClusterAlreadyRunningError(ClusterUsageError):
    """``up`` was asked for while the state directory records a live cluster."""


class NoClusterError(ClusterUsageError):
    """An operation needs a running cluster and the state directory has none."""


class InfraError(ClusterError):
    """The cluster (or a piece of it) would not start or stopped working (exit 3).

    ``log_tail`` keeps the last lines of the relevant log for callers that want to show
    more; ``str()`` stays one line and names the log file instead.
    """

    exit_code = EXIT_INFRA

    def __init__(
        self, message: str, *, log_path: Path | None = None, log_tail: list[str] | None = None
    ) -> None:
        self.message = message
        self.log_path = log_path
        self.log_tail = list(log_tail or [])
        super().__init__(str(self))

    def __str__(self) -> str:
        text = self.message
        key_line = _most_telling_line(self.log_tail)
        if key_line:
            text += f"; log says: {key_line}"
        if self.log_path is not None:
            text += f" (see {self.log_path})"
        return text


def _most_telling_line(lines: list[str]) -> str:
    """Pick the log line most likely to explain a failure: the last error, else the last line.

    JVM logs end with shutdown chatter, so the last line alone is usually not the cause.
    """
    markers = ("Exception", "ERROR", "Error:", "error:", "Caused by")
    for line in reversed(lines):
        if any(marker in line for marker in markers):
            return _shorten(line)
    for line in reversed(lines):
        if line.strip():
            return _shorten(line)
    return ""


def _shorten(line: str, limit: int = 240) -> str:
    line = line.strip()
    return line if len(line) <= limit else line[: limit - 3] + "..."
