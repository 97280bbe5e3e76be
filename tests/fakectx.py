"""A FaultContext over throwaway local processes: `sleep` stands in for tasks and workers.

Every process it starts is killed and reaped by ``close()``; tests use it through the
``fake_ctx`` fixture, whose teardown calls ``close()`` whatever the test did.
"""

from __future__ import annotations

import contextlib
import subprocess
import threading
import time
from collections.abc import Mapping

import psutil

from chaos.context import ChannelFault, ContainerAction, WorkerRef


class FakeContext:
    def __init__(self) -> None:
        self.t0 = time.monotonic()
        self.popens: list[subprocess.Popen[bytes]] = []
        self.tasks: dict[str, int] = {}
        self.order: list[str] = []
        self.live_workers: dict[str, WorkerRef] = {}
        self.executors: dict[str, int] = {}
        self.killed: list[tuple[str, float]] = []
        self.started: list[tuple[WorkerRef, float]] = []
        self.channel_faults: dict[str, ChannelFault] = {}
        self.container_calls: list[tuple[str, ContainerAction, float | None]] = []
        self.down: dict[str, WorkerRef] = {}  # stopped containers, by worker id
        self.cleared: list[str] = []
        self.snapshot = False
        self.snapshot_looks = 0  # how often the nemesis asked: a test waits for a look
        self.recovering = False
        self.phases: set[str] = set()  # phases the fake protocol has open
        self.holders: dict[str, list[str]] = {}  # phase -> the instances holding it
        self._lock = threading.Lock()
        self._next_worker = 0

    # ------------------------------------------------------------------ set-up helpers

    def spawn(self, argv: list[str] | None = None) -> subprocess.Popen[bytes]:
        popen = subprocess.Popen(argv or ["sleep", "60"])
        self.popens.append(popen)
        return popen

    def add_task(self, instance: str, pid: int | None = None) -> int:
        pid = pid if pid is not None else self.spawn().pid
        self.tasks[instance] = pid
        if instance not in self.order:
            self.order.append(instance)
        return pid

    def add_instances(self, *instances: str) -> None:
        """Instances known to the topology without a running task (planning only)."""
        self.order.extend(i for i in instances if i not in self.order)

    def add_worker(self, labels: Mapping[str, str]) -> WorkerRef:
        with self._lock:
            wid = f"worker-{self._next_worker}"
            self._next_worker += 1
        worker = WorkerRef(wid, self.spawn().pid, dict(labels))
        self.live_workers[wid] = worker
        return worker

    def alive(self, pid: int) -> bool:
        try:
            return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return False

    def close(self) -> None:
        for popen in self.popens:
            with contextlib.suppress(ProcessLookupError):
                popen.kill()
            popen.wait(timeout=5)

    # ------------------------------------------------------------------ FaultContext

    def now(self) -> float:
        return time.monotonic() - self.t0

    def instances(self) -> list[str]:
        return list(self.order)

    def task_pid(self, instance: str) -> int | None:
        return self.tasks.get(instance)

    def executor_pids(self) -> dict[str, int]:
        return dict(self.executors)

    def workers(self) -> list[WorkerRef]:
        return list(self.live_workers.values())

    def kill_worker(self, worker_id: str) -> WorkerRef:
        worker = self.live_workers.pop(worker_id)
        self.killed.append((worker_id, self.now()))
        psutil.Process(worker.pid).kill()
        return worker

    def start_worker(self, labels: Mapping[str, str]) -> WorkerRef:
        worker = self.add_worker(labels)
        self.started.append((worker, self.now()))
        return worker

    def container(
        self, worker_id: str, action: ContainerAction, timeout: float | None = None
    ) -> WorkerRef:
        """Containers played by the worker's stand-in process: SIGSTOP for a pause, a new
        process for a start or restart."""
        self.container_calls.append((worker_id, action, timeout))
        if action == "start":
            old = self.down.pop(worker_id)
            worker = WorkerRef(worker_id, self.spawn().pid, dict(old.labels))
            self.live_workers[worker_id] = worker
            return worker
        worker = self.live_workers[worker_id]
        proc = psutil.Process(worker.pid)
        if action == "pause":
            proc.suspend()
            _settle(proc, stopped=True)
        elif action == "unpause":
            proc.resume()
            _settle(proc, stopped=False)
        elif action in ("kill", "stop"):
            proc.kill()
            del self.live_workers[worker_id]
            if action == "stop":
                self.down[worker_id] = worker
        else:  # restart
            proc.kill()
            worker = WorkerRef(worker_id, self.spawn().pid, dict(worker.labels))
            self.live_workers[worker_id] = worker
        return worker

    def channel_fault(self, spec: ChannelFault) -> None:
        self.channel_faults[spec.id] = spec

    def clear_channel_fault(self, fault_id: str) -> None:
        self.cleared.append(fault_id)
        self.channel_faults.pop(fault_id, None)

    def snapshot_in_progress(self) -> bool:
        self.snapshot_looks += 1
        return self.snapshot

    def recovery_in_progress(self) -> bool:
        return self.recovering

    def phase_active(self, phase: str) -> bool:
        return phase in self.phases

    def phase_holders(self, phase: str) -> list[str]:
        return list(self.holders.get(phase, ()))


def _settle(proc: psutil.Process, *, stopped: bool, within: float = 5.0) -> None:
    """Wait until the kernel shows the signal taken: the engine's pause returns once the
    cgroup is frozen, while SIGSTOP is delivered asynchronously."""
    deadline = time.monotonic() + within
    while (proc.status() == psutil.STATUS_STOPPED) != stopped:
        if time.monotonic() > deadline:
            raise AssertionError(f"process {proc.pid} not {'stopped' if stopped else 'running'}")
        time.sleep(0.01)
