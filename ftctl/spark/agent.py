"""The fault agent inside each task: process faults carried out by the task on itself.

On a cluster ftctl did not start (``--master``) the driver's machine is not the tasks'
machine, so it must never signal a pid a task reported: the pid means nothing there, or
something else. The driver sends the fault over the task's authenticated control
connection instead, and the task's control reader carries it out at once (the main
thread may be blocked on a full downstream):

- ``kill``: SIGKILL of the task's own process (its Python worker), as ``kill-task``.
- ``kill-executor``: SIGKILL of the executor JVM the task runs under, found among its own
  ancestors by its main class (nothing else on that host is a candidate).
- ``kill-worker``: the node's loss as far as Spark goes: SIGKILL of the standalone Worker
  JVM among its ancestors, then of its executor (which would otherwise linger until it
  notices the worker gone), then of itself. The agent per worker is thus the agent of a
  task on it: a worker with no task of the run has nothing to deliver a fault to, and
  starting a worker anew (``restore-capacity``) needs the cluster's hosts, not a task.
- ``pause``: SIGSTOP of its own process for ``seconds``. A stopped process cannot wake
  itself, and the driver cannot reach it, so a helper process started just before (a
  child of the task, exiting with it) sends SIGCONT when the time is up.
- ``slow``: the same helper runs the duty cycle of ``slow`` (stopped for
  ``1 - 1/factor`` of each period) for ``seconds``.
- ``clock``: a clock fault (skew, drift, jump, stall: ``ftctl/kernel/clocks.py``) on the
  task's own runtime clock, the one its unit's events and timers go by. The system clock
  and the task's heartbeats are untouched. The driver sends ``clock_payload(fault)``
  through ``SparkHost.agent_fault``.

Channel faults (delay, drop, partition) already act inside the sending task
(``ftctl.spark.links``). Run as
``python -m ftctl.spark.agent PID SECONDS FACTOR PERIOD [SINCE]`` it is that helper; it
imports nothing but the standard library.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ftctl.kernel.clocks import ClockFault

AGENT_KIND = "ftctl-agent"  # Control payloads {"kind": AGENT_KIND, "op": ..., ...}
OPS = ("kill", "kill-executor", "kill-worker", "pause", "slow", "clock")
EXECUTOR_CLASS = "org.apache.spark.executor.CoarseGrainedExecutorBackend"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
SLOW_PERIOD = 0.1  # as chaos.faults.SLOW_PERIOD


def payload(op: str, seconds: float | None = None, factor: float = 1.0) -> dict[str, Any]:
    if op not in OPS:
        raise ValueError(f"unknown agent op {op!r}")
    return {"kind": AGENT_KIND, "op": op, "seconds": seconds, "factor": factor}


def clock_payload(fault: ClockFault) -> dict[str, Any]:
    """The agent payload that sets ``fault`` on a task's runtime clock."""
    from ftctl.kernel.clocks import fault_to_dict

    return {"kind": AGENT_KIND, "op": "clock", "fault": fault_to_dict(fault)}


def is_agent_payload(msg: Any) -> bool:
    return isinstance(msg, dict) and msg.get("kind") == AGENT_KIND


def carry_out(msg: dict[str, Any],
              on_clock: Callable[[ClockFault], None] | None = None) -> None:
    """Do what the driver asked, to this process (or its executor); a clock fault goes to
    ``on_clock`` (the task's runtime clock)."""
    op = msg["op"]
    if op == "clock":
        # imported here: run as the pause helper, this module needs the standard library only
        from ftctl.kernel.clocks import fault_from_dict

        if on_clock is None:
            raise ValueError("a clock fault needs the task's clock")
        on_clock(fault_from_dict(msg["fault"]))
    elif op == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    elif op in ("kill-executor", "kill-worker"):
        classes = (WORKER_CLASS, EXECUTOR_CLASS) if op == "kill-worker" else (EXECUTOR_CLASS,)
        found = [pid for pid in map(own_ancestor, classes) if pid is not None]
        # The task itself last: it dies with its executor anyway, and outside an executor
        # (a test harness) it is what is left to kill.
        for pid in found if op == "kill-executor" and found else [*found, os.getpid()]:
            os.kill(pid, signal.SIGKILL)
    elif op in ("pause", "slow"):
        seconds = float(msg["seconds"])
        factor = float(msg["factor"]) if op == "slow" else 0.0
        _helper(seconds, factor)
        if op == "pause":
            os.kill(os.getpid(), signal.SIGSTOP)  # the helper continues us


def own_ancestor(main_class: str = EXECUTOR_CLASS) -> int | None:
    """The pid of the JVM running ``main_class`` this process runs under (its executor,
    its worker), checked by its command line."""
    import psutil

    try:
        for proc in psutil.Process().parents():
            if main_class in " ".join(proc.cmdline()):
                return int(proc.pid)
    except psutil.Error:
        return None
    return None


def _helper(seconds: float, factor: float) -> None:
    # The slowdown's time counts from now, not from when the helper is up: on a busy
    # machine starting Python takes a good part of a second. CLOCK_MONOTONIC is one clock
    # for every process on the host.
    subprocess.Popen([sys.executable, "-m", "ftctl.spark.agent", str(os.getpid()), str(seconds),
                      str(factor), str(SLOW_PERIOD), repr(time.monotonic())],
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL)


def helper_main(pid: int, seconds: float, factor: float, period: float,
                since: float | None = None) -> int:
    """Continue ``pid`` after ``seconds`` (factor 0: a pause) or slow it down until then.
    A slowdown's ``seconds`` count from ``since`` (the task's ``time.monotonic()`` when it
    took the fault), a pause's from when the task is stopped. Acts only while ``pid`` is
    still its parent: a pid reused by another process is never signalled."""
    if factor <= 1.0:  # a pause: the time counts from when the task is stopped
        _wait_stopped(pid, 2.0)
        since = None
    deadline = (time.monotonic() if since is None else since) + seconds
    try:
        if factor <= 1.0:
            while time.monotonic() < deadline and os.getppid() == pid:
                time.sleep(min(0.05, max(0.0, deadline - time.monotonic())))
            return 0
        running = period / factor
        while time.monotonic() < deadline and os.getppid() == pid:
            os.kill(pid, signal.SIGSTOP)
            time.sleep(period - running)
            os.kill(pid, signal.SIGCONT)
            time.sleep(running)
        return 0
    except OSError:
        return 0
    finally:
        if os.getppid() == pid:
            os.kill(pid, signal.SIGCONT)


def _wait_stopped(pid: int, timeout: float) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] in ("T", "t"):
                    return
        except (OSError, IndexError):
            return
        time.sleep(0.005)


if __name__ == "__main__":
    args = sys.argv[1:]
    sys.exit(helper_main(int(args[0]), float(args[1]), float(args[2]), float(args[3]),
                         float(args[4]) if len(args) > 4 else None))
