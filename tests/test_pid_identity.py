"""The host part of the pid check (``ftctl.spark.identity``): a task's pid is signalled, or
read for failure detection, only on the process table it registered from (same boot id
and PID namespace), and only while that pid is still the process that registered (start
time, command line)."""

from __future__ import annotations

import dataclasses
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import psutil
import pytest

from chaos.faults import FaultError, KillTask
from chaos.hostctx import HostFaultContext
from ftctl.spark import host
from ftctl.spark.identity import Identity, is_local, mismatch, process_table, this_process


def _identity_of(pid: int) -> Identity:
    """What the task with ``pid`` would report about itself at registration."""
    proc = psutil.Process(pid)
    return Identity("here", process_table(), pid, proc.create_time(), tuple(proc.cmdline()))


def _sleeping() -> subprocess.Popen[bytes]:
    """A process that sleeps, returned once it runs its own command line: until its exec,
    a forked child still shows this one's, and an identity read then is not the one it
    would register."""
    cmd = [sys.executable, "-c", "import time; time.sleep(60)"]
    proc = subprocess.Popen(cmd)
    deadline = time.monotonic() + 10
    while psutil.Process(proc.pid).cmdline() != cmd:
        assert time.monotonic() < deadline, "the sleeper never ran its own command line"
        time.sleep(0.01)
    return proc


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    proc = _sleeping()
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait(10)


def test_this_process_reports_its_own_process_table() -> None:
    me = this_process()
    assert me is not None and is_local(me)
    boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    assert me.table.startswith(boot + "/pid:[")
    assert mismatch(me, me.pid) is None
    assert Identity.from_wire(me.to_wire()) == me
    assert Identity.from_wire({"host": "h"}) is None and Identity.from_wire(None) is None


@pytest.mark.parametrize(("change", "why"), [
    ({"table": "another-boot/pid:[4026531836]"}, "in another process table"),
    ({"table": process_table().rsplit("/", 1)[0] + "/pid:[1]"}, "in another process table"),
    ({"start": 1.0}, "started at another time"),
    ({"cmdline": ("java", "-cp", "x")}, "runs another command line"),
    ({"pid": 1}, "it registered as pid 1"),
])
def test_a_pid_that_is_not_the_registered_process_here_is_refused(
        sleeper: subprocess.Popen[bytes], change: dict[str, Any], why: str) -> None:  # fmt: skip
    registered = dataclasses.replace(_identity_of(sleeper.pid), **change)
    reason = mismatch(registered, sleeper.pid)
    assert reason is not None and why in reason
    assert mismatch(None, sleeper.pid) == "the task did not say where it runs"


def test_a_kill_signals_only_the_pid_of_a_task_registered_on_this_host(
        sleeper: subprocess.Popen[bytes]) -> None:  # fmt: skip
    victim = _sleeping()
    try:
        # count[0]'s task registered from another host (or a container with its own PID
        # namespace) under a number that, here, is ``sleeper``.
        elsewhere = dataclasses.replace(_identity_of(sleeper.pid), host="node-2",
                                        table="other-boot/pid:[4026532000]")
        registered = {"count[0]": elsewhere, "count[1]": _identity_of(victim.pid)}
        ctx = HostFaultContext(
            clock=lambda: 1.0, instance_ids=list(registered),
            task_pids=lambda i: registered[i].pid,
            pid_mismatch=lambda i, pid: mismatch(registered[i], pid))  # fmt: skip
        with pytest.raises(FaultError, match=f"pid {sleeper.pid}, but it runs on node-2 in "
                           "another process table .*: not signalled"):
            KillTask("count[0]").inject(ctx)
        time.sleep(0.2)
        assert sleeper.poll() is None, "the driver's own process with that pid lives"
        assert KillTask("count[1]").inject(ctx).pids == [victim.pid]
        assert victim.wait(10) == -signal.SIGKILL
    finally:
        victim.kill()
        victim.wait(10)


def test_the_host_checks_a_pid_against_the_task_that_registered_it(
        sleeper: subprocess.Popen[bytes]) -> None:  # fmt: skip
    task = SimpleNamespace(pid=sleeper.pid, identity=_identity_of(sleeper.pid))
    spark_host = SimpleNamespace(live={"count[0]": task})
    assert host.SparkHost.pid_mismatch(spark_host, "count[0]", sleeper.pid) is None  # type: ignore[arg-type]
    assert "not the task" in str(host.SparkHost.pid_mismatch(spark_host, "count[1]", 7))  # type: ignore[arg-type]
    task.identity = dataclasses.replace(task.identity, table="elsewhere")
    assert "another process table" in str(
        host.SparkHost.pid_mismatch(spark_host, "count[0]", sleeper.pid))  # type: ignore[arg-type]


def test_a_stopped_pid_counts_as_a_hang_only_on_the_table_it_came_from(
        sleeper: subprocess.Popen[bytes]) -> None:  # fmt: skip
    sleeper.send_signal(signal.SIGSTOP)
    try:
        deadline = time.monotonic() + 5
        while psutil.Process(sleeper.pid).status() != psutil.STATUS_STOPPED:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        here = SimpleNamespace(pid=sleeper.pid, identity=_identity_of(sleeper.pid))
        assert host._stopped(here)  # type: ignore[arg-type]
        # The same number reported from another host is not this stopped process.
        there = SimpleNamespace(pid=sleeper.pid, identity=dataclasses.replace(
            here.identity, table="other-boot/pid:[4026532000]"))
        assert not host._stopped(there)  # type: ignore[arg-type]
        assert not host._stopped(SimpleNamespace(pid=sleeper.pid, identity=None))  # type: ignore[arg-type]
    finally:
        sleeper.send_signal(signal.SIGCONT)
