"""Soak: one long ``ftctl chaos`` run under a flapping task, memory sampled throughout.

    flock /tmp/ftctl-spark.lock python benchmarks/soak.py [--minutes 20] [--rate 1000]
        [--protocol checkpoint] [--every 10] [--scenario chaos/flapping.yaml]

The scenario (default ``chaos/flapping.yaml``: count[0] paused 3 s every 8 s) is copied
with its ``count`` raised so the pauses go on for the whole run; wordcount's input is
sized to last ``--minutes`` at ``--rate`` records/s per source. Every ``--every`` seconds
the resident memory of each process under the run is sampled and summed per kind: the
driver's Python process, the driver JVM, the Spark daemons, the executor JVMs and the
tasks' Python workers. It prints, per kind, the median of each quarter of the samples and
the least-squares slope (MB/min) over the run's second half (past the warm-up), fitted to
the highest sample of each minute so a sample taken mid-restart does not pass for a trend
(for the tasks, of the memory per task process: see ``level``); then
the run's verdict: exit 0 only when the run passed exactly-once and no kind grew more than
``--max-growth`` MB/min.

Sampling covers the streaming only: it starts when the tasks are up and stops at the run's
``run-finished`` history record, before the driver reads the whole output back to check it.
The driver keeps a bounded tail of what grows with the run (committed output, latency
samples, throughput metrics) in memory and the rest in the run's ``spill`` folder
(``ftctl/spill.py``), so its memory measures the run, not the output.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import psutil
import yaml

ROOT = Path(__file__).resolve().parent.parent
KINDS = ("driver", "driver-jvm", "daemons", "executors", "tasks")
MB = 1024 * 1024
END_MARGIN_S = 60.0  # no flapping in the run's last minute


def kind_of(proc: psutil.Process, root: int) -> str | None:
    if proc.pid == root:
        return "driver"
    cmd = " ".join(proc.cmdline())
    if "SparkSubmit" in cmd:
        return "driver-jvm"
    if "CoarseGrainedExecutorBackend" in cmd:
        return "executors"
    if "deploy.master.Master" in cmd or "deploy.worker.Worker" in cmd:
        return "daemons"
    if "pyspark" in cmd:
        return "tasks"
    return None


def sample(root: psutil.Process) -> dict[str, float]:
    out: dict[str, float] = defaultdict(float)
    for proc in [root, *root.children(recursive=True)]:
        try:
            kind = kind_of(proc, root.pid)
            if kind is not None:
                out[kind] += proc.memory_info().rss / MB
                out[f"{kind}#n"] += 1
        except psutil.Error:
            continue
    return dict(out)


def level(s: dict[str, float], kind: str) -> float:
    """What the trend is judged on: the sum over the kind's processes, but per process
    for the tasks. Under checkpoint a pause restarts every task, so how many are alive
    when a sample is taken swings the sum by half; a task that leaks grows its own."""
    if kind != "tasks":
        return s.get(kind, 0.0)
    return s.get(kind, 0.0) / max(1.0, s.get(f"{kind}#n", 0.0))


def finished(results: Path, offsets: dict[Path, int]) -> bool:
    """Whether a run under ``results`` has written its ``run-finished`` history record."""
    for log in results.glob("*/events.jsonl"):
        with open(log, "rb") as f:
            f.seek(offsets.get(log, 0))
            chunk = f.read()
        # Read only whole lines; a line still being written is read next time.
        whole = chunk[:chunk.rfind(b"\n") + 1]
        offsets[log] = offsets.get(log, 0) + len(whole)
        if b'"kind": "run-finished"' in whole:
            return True
    return False


def slope(points: list[tuple[float, float]]) -> float:
    """Least-squares MB per minute of (seconds, MB) points."""
    if len(points) < 2:
        return 0.0
    n = len(points)
    mx = sum(t for t, _ in points) / n
    my = sum(v for _, v in points) / n
    var = sum((t - mx) ** 2 for t, _ in points)
    return 0.0 if var == 0 else sum((t - mx) * (v - my) for t, v in points) / var * 60


def by_minute(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """(mid-time, highest MB) per minute. A sample that falls into a restart (every pause
    under checkpoint restarts the tasks) catches fresh, small processes: it can only be
    lower than what the processes hold, so the fullest sample of a minute is the level."""
    groups: dict[int, list[tuple[float, float]]] = defaultdict(list)
    for t, v in points:
        groups[int(t // 60)].append((t, v))
    return [(statistics.mean(t for t, _ in g), max(v for _, v in g))
            for _, g in sorted(groups.items())]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--minutes", type=float, default=20.0)
    ap.add_argument("--rate", type=float, default=1000.0)
    ap.add_argument("--protocol", default="checkpoint")
    ap.add_argument("--every", type=float, default=10.0)
    ap.add_argument("--scenario", type=Path, default=ROOT / "chaos" / "flapping.yaml")
    ap.add_argument("--max-growth", type=float, default=1.0, help="MB/min allowed per kind")
    args = ap.parse_args()
    seconds = args.minutes * 60
    work = Path(tempfile.mkdtemp(prefix="ftctl-soak-"))
    scenario = yaml.safe_load(args.scenario.read_text())
    for fault in scenario["faults"]:
        if "every" in fault:  # keep flapping until the run ends, but not past it:
            # an occurrence due after the topology stopped is undelivered and fails the run.
            fault["count"] = max(1, math.floor((seconds - END_MARGIN_S) / float(fault["every"])))
    (work / "soak.yaml").write_text(yaml.safe_dump(scenario))
    # wordcount has one source: records = rate x seconds.
    records = int(args.rate * seconds)
    cmd = [sys.executable, "-m", "ftctl.cli", "chaos", str(ROOT / "topologies" / "wordcount.yaml"),
           "-p", args.protocol, "--scenario", str(work / "soak.yaml"), "--records", str(records),
           "--rate", str(args.rate), "--timeout", str(seconds * 2 + 600), "--json",
           "--results", str(work / "results")]
    print(f"soak: {args.minutes:g} min, {records:,} records at {args.rate:g}/s, "
          f"{args.protocol}, {args.scenario.name} (pauses until the end), every {args.every:g} s",
          flush=True)
    started = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=work)
    root = psutil.Process(proc.pid)
    samples: list[tuple[float, dict[str, float]]] = []
    offsets: dict[Path, int] = {}
    while proc.poll() is None and not finished(work / "results", offsets):
        with_time = (time.monotonic() - started, sample(root))
        if with_time[1].get("tasks"):  # the run is under way
            samples.append(with_time)
        time.sleep(args.every)
    out, err = proc.communicate()
    rows = [{"t": round(t, 1), **{k: round(v, 1) for k, v in mb.items()}} for t, mb in samples]
    (work / "samples.json").write_text(json.dumps(rows))
    print(f"{len(samples)} samples over {time.monotonic() - started:.0f} s "
          f"(each: {work / 'samples.json'})")
    print(f"{'kind':<12}" + "".join(f"{f'Q{k} median MB':>15}" for k in range(1, 5))
          + f"{'MB/min (2nd half)':>20}")
    print("(the slope of tasks is per task process)")
    grew = []
    quarter = max(1, len(samples) // 4)
    half = samples[len(samples) // 2:]
    for kind in KINDS:
        medians = [statistics.median(s.get(kind, 0.0) for _, s in samples[k:k + quarter])
                   for k in range(0, quarter * 4, quarter)]
        rate = slope(by_minute([(t, level(s, kind)) for t, s in half]))
        if rate > args.max_growth:
            grew.append(kind)
        print(f"{kind:<12}" + "".join(f"{m:>15.1f}" for m in medians) + f"{rate:>20.2f}")
    try:
        summary = json.loads(out)
    except json.JSONDecodeError:
        print(f"ftctl chaos exited {proc.returncode} without a summary: {err[-1000:]}")
        return 1
    anomalies = summary.get("anomalies", {})
    print(f"ftctl chaos exit {proc.returncode}: passed={summary.get('passed')} "
          f"guarantee={summary.get('guarantee')} anomalies={anomalies or 'none'} "
          f"faults={len(summary.get('faults') or [])} run {summary.get('run_id')} in {work}")
    if grew:
        print(f"memory grows: {', '.join(grew)}")
    return 0 if proc.returncode == 0 and summary.get("passed") and not grew else 1


if __name__ == "__main__":
    os.environ.setdefault("COLUMNS", "200")
    sys.exit(main())
