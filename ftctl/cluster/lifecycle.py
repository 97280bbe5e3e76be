"""The start/stop skeleton every cluster backend shares: ``up`` and ``down`` written once.

A backend (``LocalCluster``: daemons as processes; ``DockerCluster``: daemons as
containers) supplies the hooks: how to get ready (``_prepare``), how to start the master
and a worker, what to write before the master starts (``_before_master``) and how to stop
everything (``_stop_everything``). The order, the state lock, the watchdog of an owned
cluster, the waiting for ALIVE and the rule that a failed or interrupted start leaves
nothing behind live here, so no backend can get them subtly different.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import FrameType

from ftctl.cluster.labels import Labels
from ftctl.cluster.state import ClusterState, WorkerInfo, state_lock

Progress = Callable[[str], None]


@contextlib.contextmanager
def interrupts_deferred() -> Iterator[None]:
    """Hold Ctrl-C until teardown has finished; a half-done teardown leaks processes.

    Only the main thread may touch signal handlers; elsewhere this is a no-op.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[int] = []

    def remember(signum: int, _frame: FrameType | None) -> None:
        received.append(signum)

    previous = signal.signal(signal.SIGINT, remember)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if received:
        raise KeyboardInterrupt


class ClusterLifecycle:
    """``up``/``down`` in terms of hooks; see the module docstring."""

    # What the daemons are, for progress messages ("worker container(s)").
    DAEMON_NOUN = ""
    state_dir: Path
    start_timeout: float
    grace: float
    n_workers: int
    labels: list[Labels]
    cores: int
    memory: str

    def up(self, progress: Progress | None = None) -> ClusterState:
        """Start the master and all workers; return once every worker is ALIVE.

        Anything that goes wrong (including Ctrl-C) tears down what was started before
        the exception propagates, so a failed ``up`` leaves nothing behind.
        """
        say = progress or (lambda _msg: None)
        home = self._prepare(say)
        deadline = time.monotonic() + self.start_timeout
        self._prune_abandoned()
        noun = self.DAEMON_NOUN
        with state_lock(self.state_dir):
            # Outside the cleanup below: refusing to start over a running cluster must
            # not tear that cluster down.
            self._clear_previous()
            self._prepare_dirs()
            say(f"starting the Spark master{noun}")
            try:
                self._start_watchdog()
                self._before_master()
                self._start_master(home)
            except BaseException:
                self._teardown_after_failure()
                raise
        try:
            say("waiting for the Spark master")
            self._wait_master_alive(deadline)
            say(f"starting {self.n_workers} worker{noun}(s)")
            started = [
                self._launch_worker(home, labels, self.cores, self.memory) for labels in self.labels
            ]
            self._wait_workers_alive(started, deadline, say)
        except BaseException:
            self._teardown_after_failure()
            raise
        return self.state

    def down(self, grace: float | None = None) -> list[int]:
        """Stop everything of the cluster and forget its state; returns the pids stopped.

        Safe to call when nothing runs; also finds what a crashed ftctl left behind in
        the same state dir.
        """
        with interrupts_deferred(), state_lock(self.state_dir):
            pids = self._stop_everything(self.grace if grace is None else grace)
            self._forget()
        return pids

    def _teardown_after_failure(self) -> None:
        with interrupts_deferred():
            self._stop_everything(self.grace)
            self._forget()

    # ------------------------------------------------------------------ hooks

    @property
    def state(self) -> ClusterState:
        raise NotImplementedError

    def _prepare(self, say: Progress) -> Path:
        """Check what the daemons need; return the Spark home they run from."""
        raise NotImplementedError

    def _prune_abandoned(self) -> None:
        """Clean up after killed runs (owned clusters only)."""

    def _clear_previous(self) -> None:
        raise NotImplementedError

    def _prepare_dirs(self) -> None:
        raise NotImplementedError

    def _start_watchdog(self) -> None:
        raise NotImplementedError

    def _before_master(self) -> None:
        """Anything to record before the first daemon starts."""

    def _start_master(self, home: Path) -> None:
        raise NotImplementedError

    def _wait_master_alive(self, deadline: float) -> None:
        raise NotImplementedError

    def _launch_worker(self, home: Path, labels: Labels, cores: int, memory: str) -> WorkerInfo:
        raise NotImplementedError

    def _wait_workers_alive(self, workers: Sequence[WorkerInfo], deadline: float,
                            say: Progress) -> None:
        raise NotImplementedError

    def _stop_everything(self, grace: float) -> list[int]:
        """Stop every process/container of the cluster and drop its records."""
        raise NotImplementedError

    def _forget(self) -> None:
        raise NotImplementedError
