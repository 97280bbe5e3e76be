"""Whose process a task's pid names: checked before the driver signals it.

A task reports its pid when it registers, but a pid names a process only in the process
table it came from: on another host, or in a container with its own PID namespace, the
same number is some other process of the driver's machine, or none. So the task also
reports where it runs and what it is: its host name, the process table (the kernel's boot
id and the task's PID namespace), its start time and its command line. The driver signals
a pid only if the process table is its own and the process it finds there under that pid
started at that time with that command line (``mismatch``); otherwise the fault goes
through the task's own agent (``--master``) or is refused.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from typing import Any

BOOT_ID = "/proc/sys/kernel/random/boot_id"
START_SLACK = 0.05  # s; start times are read from /proc in clock ticks


@dataclass(frozen=True)
class Identity:
    host: str  # for messages: the table below is what is compared
    table: str  # boot id and PID namespace: which process table ``pid`` belongs to
    pid: int
    start: float  # seconds since the epoch, as psutil gives it
    cmdline: tuple[str, ...]

    def to_wire(self) -> dict[str, Any]:
        return {"host": self.host, "table": self.table, "pid": self.pid, "start": self.start,
                "cmdline": list(self.cmdline)}

    @classmethod
    def from_wire(cls, data: Any) -> Identity | None:
        """The identity a registration carried; None for none or a malformed one."""
        try:
            return cls(str(data["host"]), str(data["table"]), int(data["pid"]),
                       float(data["start"]), tuple(str(a) for a in data["cmdline"]))
        except (TypeError, KeyError, ValueError):
            return None


def process_table() -> str:
    """This process's process table: boot id (the host, this boot) and PID namespace."""
    try:
        with open(BOOT_ID) as f:
            boot = f.read().strip()
        namespace = os.readlink("/proc/self/ns/pid")
    except OSError:  # no /proc: nothing can be shown to be the driver's own table
        return ""
    return f"{boot}/{namespace}"


def this_process() -> Identity | None:
    """What a task reports about itself; None where it cannot tell (then the driver
    signals nothing it reports)."""
    try:
        import psutil
    except ImportError:
        return None
    try:
        proc = psutil.Process()
        return Identity(socket.gethostname(), process_table(), proc.pid, proc.create_time(),
                        tuple(proc.cmdline()))
    except psutil.Error:
        return None


def is_local(identity: Identity | None) -> bool:
    """Whether the reported pid is from this process table (the same host and namespace)."""
    return identity is not None and bool(identity.table) and identity.table == process_table()


def mismatch(identity: Identity | None, pid: int) -> str | None:
    """Why ``pid`` must not be signalled here as the process ``identity`` describes; None
    when it is that process: same host and PID namespace, same start time, same command
    line (a pid reused since, or another host's number, is never signalled)."""
    import psutil

    if identity is None:
        return "the task did not say where it runs"
    if identity.pid != pid:
        return f"it registered as pid {identity.pid}"
    if not is_local(identity):
        return f"it runs on {identity.host} in another process table (host or PID namespace)"
    try:
        proc = psutil.Process(pid)
        start, cmdline = proc.create_time(), tuple(proc.cmdline())
    except psutil.Error:
        return "no such process on this host"
    if abs(start - identity.start) > START_SLACK:
        return "the process with that pid here started at another time"
    if cmdline != identity.cmdline:
        return "the process with that pid here runs another command line"
    return None
