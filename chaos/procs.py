"""Signals to processes and process trees, and finding which process runs under which.

psutil.Process objects are kept between stopping and continuing a tree: psutil checks
the creation time before signalling, so a pid reused in the meantime is never hit.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterable

import psutil

# Executor JVMs are started by a Worker with this main class on their command line.
EXECUTOR_CLASS = "org.apache.spark.executor.CoarseGrainedExecutorBackend"


def tree(pid: int) -> list[psutil.Process]:
    """The process and its descendants, parent first; empty if it is gone."""
    try:
        proc = psutil.Process(pid)
        return [proc, *proc.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def kill(pid: int) -> bool:
    """SIGKILL one process; False if it was already gone."""
    return signal_all(tree(pid)[:1], signal.SIGKILL) == 1


def signal_all(procs: Iterable[psutil.Process], sig: int) -> int:
    """Send ``sig`` to each process that is still there; how many were signalled."""
    sent = 0
    for proc in procs:
        with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
            proc.send_signal(sig)
            sent += 1
    return sent


def stop_tree(pid: int) -> list[psutil.Process]:
    """SIGSTOP a process tree, parent first so it cannot spawn past the stop."""
    procs = tree(pid)
    signal_all(procs, signal.SIGSTOP)
    return procs


def cont_tree(procs: list[psutil.Process]) -> None:
    """SIGCONT what ``stop_tree`` stopped, children first: a parent resumed before its
    children could time out waiting on them."""
    signal_all(reversed(procs), signal.SIGCONT)


def ancestor_in(pid: int, candidates: Iterable[int]) -> int | None:
    """The nearest ancestor of ``pid`` (itself included) whose pid is in ``candidates``.

    How a task is mapped to its executor or worker: its Python worker runs under the
    executor JVM, which runs under the Worker JVM.
    """
    wanted = set(candidates)
    try:
        proc = psutil.Process(pid)
        chain = [proc, *proc.parents()]
    except psutil.NoSuchProcess:
        return None
    return next((p.pid for p in chain if p.pid in wanted), None)


def executor_pids_under(worker_pids: Iterable[int]) -> dict[str, int]:
    """Executor JVMs running under the given Worker JVMs, keyed by ``<worker pid>/<pid>``.

    A helper for a host's ``FaultContext.executor_pids``; executor ids proper are only
    known to the driver.
    """
    found: dict[str, int] = {}
    for wpid in worker_pids:
        for proc in tree(wpid)[1:]:
            with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
                if EXECUTOR_CLASS in proc.cmdline():
                    found[f"{wpid}/{proc.pid}"] = proc.pid
    return found
