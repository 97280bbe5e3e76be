"""Live progress for long steps: one updating line in a terminal, sparse plain lines elsewhere.

In a terminal the line is a rich status (spinner + text) redrawn in place, so a cluster
start shows "1/2 worker(s) ALIVE" turning into "2/2" instead of a new line per poll. In a
pipe or a CI log there is no redraw: a line is printed only when the message says
something new (its words change, not just its numbers) or ``quiet_s`` have passed since
the last one, so a log stays short and still shows that a long step is alive.
"""

from __future__ import annotations

import re
import time
from types import TracebackType

from rich.console import Console
from rich.status import Status

from ftctl.console import err_console

QUIET_S = 15.0  # non-terminal: at most one line per this many seconds for the same message
_NUMBERS = re.compile(r"[-+]?\d[\d,.]*")


def skeleton(message: str) -> str:
    """The message with its numbers blanked: "1/2 worker(s) ALIVE" -> "#/# worker(s) ALIVE"."""
    return _NUMBERS.sub("#", message)


class LiveLine:
    """A context manager; ``update(msg)`` replaces the line, ``note(msg)`` keeps one above it."""

    def __init__(self, console: Console | None = None, *, quiet: bool = False,
                 quiet_s: float = QUIET_S, prefix: str = ""):
        self.console = console or err_console
        self.quiet = quiet
        self.quiet_s = quiet_s
        self.prefix = prefix
        self.live = self.console.is_terminal and not quiet
        self._status: Status | None = None
        self._last_printed = ""
        self._last_time = 0.0

    def __enter__(self) -> LiveLine:
        if self.live:
            self._status = Status(self.prefix or "working", console=self.console,
                                  spinner="dots")
            self._status.start()
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None

    def __call__(self, message: str) -> None:
        self.update(message)

    def update(self, message: str) -> None:
        if self.quiet:
            return
        text = f"{self.prefix}{message}"
        if self._status is not None:
            self._status.update(text)
            return
        now = time.monotonic()
        new_words = skeleton(text) != skeleton(self._last_printed)
        if text != self._last_printed and (new_words or now - self._last_time >= self.quiet_s):
            self._print(text)
            self._last_time = now

    def note(self, message: str) -> None:
        """A line that stays (a step finished, a warning); printed in every mode."""
        if not self.quiet:
            self._print(f"{self.prefix}{message}")

    def _print(self, text: str) -> None:
        self._last_printed = text
        self.console.print(text, style="dim", highlight=False, markup=False, soft_wrap=True)
