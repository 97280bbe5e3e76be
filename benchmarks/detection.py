"""How fast the Spark host's coordinator detects a killed and a paused task, and whether a
loaded run has false detections.

    python benchmarks/detection.py [--trials 3] [--load-records 600000] [--no-load]

Each trial runs wordcount (``none``, 20k lines at 5k lines/s) on a warm two-worker local
cluster and, 1.5 s after every instance is running, either SIGKILLs the task of
``count[0]`` or SIGSTOPs it (SIGCONT 3 s later). Detection time = the host's ``detected``
event minus the moment of the signal, on the host's clock. Then one unpaced wordcount of
``--load-records`` lines under ``checkpoint`` counts detections that no fault caused
(there must be none). Spark's own failure-detection defaults are read from the JVM.

Issue 4's targets: a killed task within 0.5 s, a paused one within 2 s.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from ftctl.cluster import LocalCluster
from ftctl.config.load import load_topology
from ftctl.kernel.history import HistoryEvent, read_history
from ftctl.runtime.graph import ExecutionGraph
from ftctl.spark.host import HEARTBEAT_TIMEOUT, SparkHost
from ftctl.spark.session import start_session, stop_session
from protocols.registry import PROTOCOLS

ROOT = Path(__file__).resolve().parent.parent
WORDCOUNT = ROOT / "topologies" / "wordcount.yaml"
VICTIM = "count[0]"
STRIKE_AFTER = 1.5
PAUSE_FOR = 3.0


def trial(sc: Any, how: str, work: Path) -> float | None:
    topology = load_topology(WORDCOUNT).with_input(records=20_000, rate=5_000)
    info = PROTOCOLS["none"]
    host = SparkHost(sc, ExecutionGraph(topology), info, info.resolve({}),
                     f"bench-{how}", work / f"{how}-{time.monotonic_ns()}", rate=5_000,
                     timeout=120)
    struck: list[float] = []

    def striker() -> None:
        while not host.started_at:
            time.sleep(0.01)
        time.sleep(STRIKE_AFTER)
        pid = host.task_pid(VICTIM)
        if pid is None:
            return
        os.kill(pid, signal.SIGKILL if how == "kill" else signal.SIGSTOP)
        struck.append(host.now())
        if how == "pause":
            time.sleep(PAUSE_FOR)
            with contextlib.suppress(ProcessLookupError):  # cancelled by the coordinator
                os.kill(pid, signal.SIGCONT)

    threading.Thread(target=striker, daemon=True).start()
    result = host.run()
    if not struck:
        return None
    detected = [e.t for e in read_history(result.events) if e.kind == "failure-detected"
                and VICTIM in e.data["instances"] and e.t >= struck[0]]
    return detected[0] - struck[0] if detected else None


def load_run(sc: Any, records: int, work: Path) -> tuple[int, float, list[HistoryEvent]]:
    topology = load_topology(WORDCOUNT).with_input(records=records)
    info = PROTOCOLS["checkpoint"]
    host = SparkHost(sc, ExecutionGraph(topology), info, info.resolve({}),
                     "bench-load", work / "load", timeout=600)
    result = host.run()
    false = [e for e in read_history(result.events) if e.kind == "failure-detected"]
    return result.detections, result.seconds - result.started_at, false


def spark_defaults(sc: Any) -> dict[str, str]:
    """Spark's failure-detection defaults as this pyspark's JVM defines them."""
    jvm = sc._jvm
    found: dict[str, str] = {}
    entries = {
        "spark.network.timeout": ("Network", "NETWORK_TIMEOUT"),
        "spark.executor.heartbeatInterval": ("package", "EXECUTOR_HEARTBEAT_INTERVAL"),
        "spark.worker.timeout": ("Worker", "WORKER_TIMEOUT"),
    }
    config = jvm.org.apache.spark.internal.config
    for key, (obj, name) in entries.items():
        try:
            try:
                entry = getattr(getattr(config, obj), name)()
            except Exception:
                # A Scala package object has no static forwarders: go through MODULE$.
                entry = getattr(getattr(getattr(config, f"{obj}$"), "MODULE$"), name)()
            found[key] = str(entry.defaultValueString())
        except Exception as exc:
            found[key] = f"? ({type(exc).__name__})"
    return found


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--load-records", type=int, default=600_000)
    ap.add_argument("--no-load", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        cluster = LocalCluster(workers=2, cores=6, state_dir=work / "cluster")
        spark = None
        try:
            cluster.up()
            spark = start_session(cluster.master_url, "ftctl-bench-detection", slots=6)
            sc = spark.sparkContext
            print(f"hang threshold {HEARTBEAT_TIMEOUT} s; load average {os.getloadavg()[0]:.2f}")
            for how, target in (("kill", 0.5), ("pause", 2.0)):
                times = [trial(sc, how, work) for _ in range(args.trials)]
                shown = ", ".join("missed" if t is None else f"{t:.3f}" for t in times)
                got = [t for t in times if t is not None]
                worst = max(got) if got else float("nan")
                print(f"{how:5s}: detected after {shown} s (median "
                      f"{statistics.median(got) if got else float('nan'):.3f}, max "
                      f"{worst:.3f}; target < {target} s)")
            if not args.no_load:
                n, secs, false = load_run(sc, args.load_records, work)
                print(f"load : {args.load_records:,} lines under checkpoint in {secs:.1f} s, "
                      f"{n} detection(s) with no fault")
                for ev in false:
                    print(f"       false detection: {ev}")
            for key, value in spark_defaults(sc).items():
                print(f"spark default {key} = {value}")
        finally:
            if spark is not None:
                stop_session(spark)
            cluster.down()


if __name__ == "__main__":
    main()
