"""CPU seconds each process of a Spark-hosted run spent while its records flowed.

A sampler thread reads the CPU time (user + system) of every process of the machine every
``every`` seconds while an ``ftctl run`` goes; afterwards ``window`` takes the part of it
inside the run's processing window (from its ``instance-running`` history record, for
``processing_s``) and groups it: the driver's Python process, its JVM, the executors'
JVMs, the cluster's daemons (``soak.kind_of``), and the tasks by operator (their pids are
in the run's ``instance-registered`` records; other Python workers are ``tasks``).
Records/s say how fast a run went on a machine shared with other work; CPU seconds say
which process the time went to.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections import defaultdict
from datetime import datetime
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from soak import kind_of  # a sibling script, not a package


class CpuSampler:
    """Samples (wall time, {pid: (group, CPU s)}) until ``stop``."""

    def __init__(self, driver: int, every: float = 0.2) -> None:
        self.driver = driver
        self.every = every
        self.samples: list[tuple[float, dict[int, tuple[str, float]]]] = []
        self._stop = threading.Event()
        self._kinds: dict[int, str | None] = {}
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            now: dict[int, tuple[str, float]] = {}
            for proc in psutil.process_iter():
                try:
                    if proc.pid not in self._kinds:
                        self._kinds[proc.pid] = kind_of(proc, self.driver)
                    kind = self._kinds[proc.pid]
                    if kind is not None:
                        t = proc.cpu_times()
                        now[proc.pid] = (kind, t.user + t.system)
                except psutil.Error:
                    continue
            self.samples.append((time.time(), now))
            self._stop.wait(self.every)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def window(self, start: float, end: float, tasks: dict[int, str]) -> dict[str, float]:
        """CPU seconds per group between ``start`` and ``end`` (wall clock); a task's pid
        in ``tasks`` is grouped as its operator's (``count[1]`` -> ``task count``). A
        process counts what it used between its last samples before each end (a process
        that started inside the window, all of its CPU)."""
        at_start: dict[int, float] = {}
        at_end: dict[int, tuple[str, float]] = {}
        for t, now in self.samples:
            for pid, (kind, cpu) in now.items():
                if t <= start:
                    at_start[pid] = cpu
                if t <= end:
                    at_end[pid] = (kind, cpu)
        out: dict[str, float] = defaultdict(float)
        for pid, (kind, cpu) in at_end.items():
            name = tasks.get(pid)
            group = f"task {name.split('[', 1)[0]}" if name else kind
            out[group] += max(cpu - at_start.get(pid, 0.0), 0.0)
        return dict(out)


def processing_window(run_dir: Path, processing_s: float) -> tuple[float, float,
                                                                   dict[int, str]]:
    """(start, end) of the run's processing, wall clock, and the tasks' pids."""
    start = None
    tasks: dict[int, str] = {}
    for line in (run_dir / "events.jsonl").read_text().splitlines():
        ev = json.loads(line)
        if ev["kind"] == "instance-running" and start is None:
            start = datetime.fromisoformat(ev["wall"]).timestamp()
        elif ev["kind"] == "instance-registered":
            tasks[int(ev["data"]["pid"])] = ev["instance"]
    if start is None:
        raise SystemExit(f"{run_dir}: no instance-running record")
    return start, start + processing_s, tasks
