"""A per-run cluster dies with the process that started it, even by SIGKILL.

``ftctl run`` tears its cluster down in a ``finally``; SIGKILL (or the OOM killer) skips
that and used to leave the master, the workers and their executors running for good.
Before the first daemon starts, an owned cluster starts this watchdog: a small process in
its own session (so Ctrl-C in the terminal does not reach it) whose stdin is a pipe whose
only writer is the owner. When the owner ends, however it ends, the kernel closes the pipe
and the watchdog reads EOF. An owner that tore its cluster down itself writes ``done``
first and the watchdog just exits; EOF without it means the owner died, and the watchdog
stops everything recorded in (or carrying the marker of) the cluster's state dir.

Chosen over ``PR_SET_PDEATHSIG`` in each daemon: that signal fires when the *thread* that
spawned the daemon ends, it would reach only the daemons (not executors the workers start,
nor containers, whose main process is not our child), and a SIGKILLed worker JVM leaves
its executors behind. The watchdog runs the same teardown as ``cluster down``.

Runs ``main(STATE_DIR, MODULE:CLASS)`` of this module, MODULE:CLASS being the cluster class
whose ``down`` tears the cluster down (named, not imported here: the docker backend
builds on this package, not the other way round).
"""

from __future__ import annotations

import contextlib
import importlib
import signal
import subprocess
import sys
from pathlib import Path
from typing import IO

DONE = b"done\n"
LOG_FILE = "watchdog.log"
# The owner is gone: nothing is waiting for a clean Spark shutdown, so escalate fast.
GRACE = 2.0


# Not ``-m ftctl.cluster.watchdog``: the package imports this module first, and runpy
# warns about running a module that is already imported.
_ENTRY = "import sys; from ftctl.cluster.watchdog import main; sys.exit(main(sys.argv[1:]))"


class Watchdog:
    """The owner's end: ``release()`` after a clean teardown, before the process exits."""

    def __init__(self, state_dir: Path, cluster_class: type) -> None:
        backend = f"{cluster_class.__module__}:{cluster_class.__qualname__}"
        state_dir.mkdir(parents=True, exist_ok=True)
        with open(state_dir / LOG_FILE, "ab") as log:
            # The pipe's write end is not inheritable (Python's default), so no daemon
            # started later holds it open: the owner's death alone closes it.
            self.popen: subprocess.Popen[bytes] | None = subprocess.Popen(
                [sys.executable, "-c", _ENTRY, str(state_dir), backend],
                stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip

    @property
    def pid(self) -> int | None:
        return self.popen.pid if self.popen is not None else None

    def release(self, timeout: float = 10.0) -> None:
        """The cluster is down: tell the watchdog so and wait for it to exit."""
        popen, self.popen = self.popen, None
        if popen is None:
            return
        stdin: IO[bytes] | None = popen.stdin
        with contextlib.suppress(OSError):
            if stdin is not None:
                stdin.write(DONE)
                stdin.flush()
        with contextlib.suppress(OSError):
            if stdin is not None:
                stdin.close()
        try:
            popen.wait(timeout)
        except subprocess.TimeoutExpired:
            popen.kill()
            popen.wait()


def watch(state_dir: Path, backend: str) -> int:
    """Block until the owner writes ``done`` or dies; in the second case, tear down."""
    data = b""
    while True:
        chunk = sys.stdin.buffer.read1(64) if hasattr(sys.stdin.buffer, "read1") else b""
        if not chunk:
            break
        data += chunk
    if data.endswith(DONE):
        return 0
    # Imported only now: the watchdog should start fast and hold little while it waits.
    module, _, name = backend.partition(":")
    cluster_class = getattr(importlib.import_module(module), name)
    print(f"owner gone: tearing down the cluster in {state_dir}", flush=True)
    pids = cluster_class(workers=0, state_dir=state_dir).down(grace=GRACE)
    print(f"stopped {len(pids)} process(es)", flush=True)
    return 0


def main(argv: list[str]) -> int:
    # Not ours to die of: a terminal hangup or Ctrl-C reaches the owner, which tears down.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    state_dir, backend = Path(argv[0]), argv[1]
    return watch(state_dir, backend)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
