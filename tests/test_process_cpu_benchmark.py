"""``benchmarks/process_cpu.py`` puts a run's CPU in the window its records flowed, by
process group (stand-in processes, no cluster)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from tests.benchscripts import load_benchmark

# Says "busy", uses a second of CPU, says "idle", idles a second: the same CPU however
# loaded the machine is.
BUSY_THEN_IDLE = """
import time
print("busy", flush=True)
while time.process_time() < 1.0:
    pass
print("idle", flush=True)
time.sleep(1.0)
"""


def test_cpu_is_counted_inside_the_window_only() -> None:
    bench = load_benchmark("process_cpu")
    proc = subprocess.Popen([sys.executable, "-c", BUSY_THEN_IDLE], stdout=subprocess.PIPE,
                            text=True)
    sampler = bench.CpuSampler(proc.pid, every=0.05)  # the stand-in is the driver
    assert proc.stdout is not None
    assert proc.stdout.readline() == "busy\n"
    began = time.time()
    assert proc.stdout.readline() == "idle\n"
    ended = time.time()
    time.sleep(0.3)
    idle_from = time.time()
    proc.wait()
    sampler.stop()
    busy = sampler.window(began - 0.1, ended + 0.1, {})
    idle = sampler.window(idle_from, time.time(), {})
    assert 0.8 < busy["driver"] <= 1.3
    assert idle.get("driver", 0.0) < 0.1
    # A task's pid (from the run's history) is grouped by its operator.
    named = sampler.window(began - 0.1, ended + 0.1, {proc.pid: "count[1]"})
    assert named["task count"] == busy["driver"] and "driver" not in named


def test_the_window_and_the_tasks_come_from_the_run_history(tmp_path: Path) -> None:
    bench = load_benchmark("process_cpu")
    events = [
        {"kind": "instance-registered", "instance": "split[0]", "wall":
         "2026-12-03T10:00:01.000+00:00", "data": {"pid": 41}},
        {"kind": "instance-running", "wall": "2026-12-03T10:00:02.500+00:00", "data": {}},
        {"kind": "instance-running", "wall": "2026-12-03T10:00:09.000+00:00", "data": {}},
    ]
    (tmp_path / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    start, end, tasks = bench.processing_window(tmp_path, 4.0)
    assert end - start == 4.0 and tasks == {41: "split[0]"}
    assert start == bench.datetime.fromisoformat("2026-12-03T10:00:02.500+00:00").timestamp()
