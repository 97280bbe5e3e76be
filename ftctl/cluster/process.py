"""Starting daemon processes and taking whole process trees down again."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

import psutil

# A pid alone is not an identity: after a reboot or a long time it may belong to another
# program. A pid plus its creation time is; we record both and compare with this slack
# because psutil derives creation times from clock ticks.
_CREATE_TIME_SLACK = 1.0


def spawn(argv: Sequence[str], env: Mapping[str, str], log_path: Path, cwd: Path) -> psutil.Popen:
    """Start a daemon detached from our terminal, its output appended to ``log_path``.

    ``start_new_session`` keeps Ctrl-C in the terminal from reaching the JVMs directly:
    teardown is ftctl's job (it must happen in order and be complete), and `cluster up`
    must leave the daemons running after the command exits. The new session also makes
    the daemon a process-group leader, so its executors can be found by group later.
    Output goes to a file, not a pipe, so the daemon never blocks or dies on a closed pipe.
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        return psutil.Popen(
            list(argv),
            env=dict(env),
            cwd=str(cwd),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def same_process(pid: int, create_time: float | None) -> psutil.Process | None:
    """The live process with this pid and creation time, or None if it is gone or reused."""
    try:
        proc = psutil.Process(pid)
        if create_time is not None and abs(proc.create_time() - create_time) > _CREATE_TIME_SLACK:
            return None
        if proc.status() == psutil.STATUS_ZOMBIE:
            return None
        return proc
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None


def is_alive(proc: psutil.Process) -> bool:
    """Running and not a zombie (a zombie has exited; only its exit status remains)."""
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False


def tree(proc: psutil.Process) -> list[psutil.Process]:
    """``proc`` and all its descendants (a worker's executors and their Python workers)."""
    try:
        return [proc, *proc.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def group_members(leaders: Iterable[int], not_before: float) -> list[psutil.Process]:
    """Processes in the process groups led by ``leaders``, created at or after ``not_before``.

    Catches descendants that were orphaned (re-parented to init) when their parent died,
    e.g. an executor whose worker was SIGKILLed. The time bound keeps a reused pgid from
    pulling in an unrelated, older process group.
    """
    wanted = set(leaders)
    found: list[psutil.Process] = []
    for proc in psutil.process_iter(["pid", "create_time"]):
        try:
            if (
                os.getpgid(proc.pid) in wanted
                and proc.info["create_time"] >= not_before - _CREATE_TIME_SLACK
            ):
                found.append(proc)
        except (ProcessLookupError, psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


def processes_mentioning(marker: str, work_dir: Path | None = None) -> list[psutil.Process]:
    """JVMs with ``marker`` as one of their arguments, plus JVM/Python processes running in
    ``work_dir``: whatever a crashed or interrupted ftctl left behind without recording it."""
    found: list[psutil.Process] = []
    work_prefix = str(work_dir) + os.sep if work_dir is not None else None
    for proc in psutil.process_iter(["pid", "name", "cmdline"]):
        try:
            name = (proc.info["name"] or "").lower()
            cmdline = proc.info["cmdline"] or []
            if name.startswith("java") and marker in cmdline:
                found.append(proc)
            elif work_prefix and name.startswith(("java", "python")):
                cwd = proc.cwd() + os.sep
                if cwd.startswith(work_prefix):
                    found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found


def terminate_all(
    procs: Iterable[psutil.Process], grace: float, sig: int = signal.SIGTERM
) -> list[int]:
    """Send ``sig`` to every process, wait up to ``grace`` seconds, SIGKILL the rest.

    Returns the pids that were signalled. Everything is signalled at once rather than
    one after another so the grace periods overlap; waiting through psutil also reaps
    processes that are our own children, so none is left as a zombie.
    """
    # Zombies are already dead (spark-class leaves one: the subshell of its process
    # substitution becomes an unreaped child of the JVM it execs); not counted.
    unique = _dedupe(p for p in procs if p.pid != os.getpid() and is_alive(p))
    signalled: list[psutil.Process] = []
    for proc in unique:
        with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
            proc.send_signal(sig)
            signalled.append(proc)
    if sig != signal.SIGKILL:
        _, alive = psutil.wait_procs(signalled, timeout=grace)
        for proc in alive:
            with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
                proc.kill()
    psutil.wait_procs(signalled, timeout=max(grace, 5.0))
    return [p.pid for p in signalled]


def _dedupe(procs: Iterable[psutil.Process]) -> list[psutil.Process]:
    seen: dict[int, psutil.Process] = {}
    for proc in procs:
        seen.setdefault(proc.pid, proc)
    return list(seen.values())


def tail(path: Path, lines: int = 20, max_bytes: int = 64_000) -> list[str]:
    """The last lines of a log file (empty if it does not exist yet)."""
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - max_bytes))
            text = handle.read().decode("utf-8", errors="replace")
    except OSError:
        return []
    return text.splitlines()[-lines:]


def wait_until(predicate: Callable[[], bool], timeout: float, interval: float = 0.1) -> bool:
    """Poll ``predicate`` until it returns true or ``timeout`` passes."""
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)
