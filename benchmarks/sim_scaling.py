"""Simulation scaling: schedules per minute in 1 and 2 local processes and on a Spark cluster.

    python benchmarks/sim_scaling.py [--schedules N] [--topology T] [--protocol P]
                                     [--master spark://host:port | local | none]

Runs the same seeds three ways (``ftctl sim -j 1``, ``-j 2`` and ``--master``) and prints
schedules/min for each, counting the time from the first seed to the last summary (for
``-j 2``, spawning the workers and rebuilding the simulator in each; for Spark, the tasks'
Python workers starting, but not the cluster and session, printed apart). It checks that
the three summaries are identical, seed for seed, and exits 1 if they are not.
``--master local`` (the default) starts a one-worker local standalone cluster with a core
per CPU; take the Spark lock first (``flock /tmp/ftctl-spark.lock``).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

from ftctl.config.load import load_topology
from ftctl.run.simspread import LOCAL, run_on_context, sim_session
from ftctl.sim.runner import SimSummary
from ftctl.sim.spread import SimJob, run_parallel
from protocols.contract.params import validate
from protocols.registry import get_protocol

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--schedules", type=int, default=1000)
    ap.add_argument("--topology", default="wordcount")
    ap.add_argument("--protocol", default="checkpoint")
    ap.add_argument("--master", default=LOCAL, help="spark://host:port, local, or none")
    args = ap.parse_args()
    topo = load_topology(ROOT / "topologies" / f"{args.topology}.yaml")
    info = get_protocol(args.protocol)
    job = SimJob(topo, info.name, validate(info.params, {}, info.name))
    sim = job.simulator()
    n = args.schedules
    print(f"{topo.name} under {info.name}, {n} schedules each, {os.cpu_count()} CPUs")
    runs: dict[str, SimSummary] = {}

    def timed(label: str, fn: Callable[[], SimSummary]) -> None:
        t0 = time.perf_counter()
        runs[label] = fn()
        secs = time.perf_counter() - t0
        print(f"  {label:<24} {n / secs * 60:8,.0f} schedules/min  ({secs:.1f} s)", flush=True)

    timed("-j 1", lambda: run_parallel(sim, job, n, 1, 1))
    timed("-j 2", lambda: run_parallel(sim, job, n, 1, 2))
    if args.master != "none":
        t0 = time.perf_counter()
        with sim_session(args.master) as (sc, url):
            print(f"  (cluster and session on {url}: {time.perf_counter() - t0:.1f} s)")
            timed(f"--master ({sc.defaultParallelism} slots)",
                  lambda: run_on_context(sc, sim, job, n, 1))
    first = next(iter(runs.values()))
    same = all(_key(s) == _key(first) for s in runs.values())
    print(f"summaries identical seed for seed: {'yes' if same else 'NO'} "
          f"({first.faults} faults, {len(first.failing_seeds)} violating)")
    return 0 if same else 1


def _key(s: SimSummary) -> tuple[object, ...]:
    return (s.schedules, s.failures, s.faults, s.failing_seeds, dict(s.violations),
            s.delays, s.resent, s.fallbacks)


if __name__ == "__main__":
    sys.exit(main())
