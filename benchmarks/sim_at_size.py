"""Simulation at size: failure schedules per minute on the bundled Nexmark files (1M
events) and progressive15 (600,000 records), per topology and protocol.

    python benchmarks/sim_at_size.py [-n 5] [-j 1] [--budget 120]
        [--topologies nexmark/q1,nexmark/q3,nexmark/q5,progressive15]
        [--protocols causal,checkpoint,none] [--no-memo] [--records N]

For each pair it builds the simulator (the golden and fault-free runs, timed apart: a
``ftctl sim`` pays them once), then runs schedules 1..n as ``ftctl sim -n N -j J`` does
and prints schedules/min (wall clock), CPU seconds per schedule (with -j 1), whether
they passed, and the 1-minute load average before and after: on a shared machine the
figures mean little without it. With -j 1 a pair stops early once ``--budget`` seconds
of schedules are spent (the rate is then over the schedules run). ``--no-memo`` makes
every batch anew in every run (``Simulator(memo=False)``), for comparison; ``--records``
runs a smaller input instead (a quick check of the script).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from ftctl.config.load import load_topology
from ftctl.sim.runner import SimSummary, Simulator, refusals
from ftctl.sim.spread import SimJob, run_parallel
from protocols.contract.params import validate
from protocols.registry import get_protocol

ROOT = Path(__file__).resolve().parent.parent
TOPOLOGIES = "nexmark/q1,nexmark/q3,nexmark/q5,progressive15"
PROTOCOLS = "causal,checkpoint,none"


def load_average() -> float:
    return os.getloadavg()[0]


def schedules(sim: Simulator, job: SimJob, n: int, jobs: int,
              budget: float) -> tuple[SimSummary, float, float]:
    """Run seeds 1..n: (summary, wall seconds, CPU seconds of this process)."""
    wall, cpu = time.perf_counter(), time.process_time()
    if jobs > 1:
        summary = run_parallel(sim, job, n, 1, jobs)
    else:
        summary = SimSummary()
        for seed in range(1, n + 1):
            summary.add(sim.run_record(seed))
            if time.perf_counter() - wall > budget:
                break
    return summary, time.perf_counter() - wall, time.process_time() - cpu


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", "--schedules", type=int, default=5)
    ap.add_argument("-j", "--jobs", type=int, default=1)
    ap.add_argument("--budget", type=float, default=120.0,
                    help="with -j 1: stop a pair's schedules after this many seconds")
    ap.add_argument("--topologies", default=TOPOLOGIES)
    ap.add_argument("--protocols", default=PROTOCOLS)
    ap.add_argument("--no-memo", action="store_true")
    ap.add_argument("--records", type=int, default=None)
    args = ap.parse_args(argv)
    print(f"{args.schedules} schedules per pair, -j {args.jobs}"
          + (", no memo" if args.no_memo else "") + f"; {os.cpu_count()} CPUs")
    print(f"{'topology':<16} {'protocol':<11} {'build s':>8} {'sched':>5} {'sched/min':>9} "
          f"{'CPU s/sched':>11} {'passed':>6}  load before/after")
    for name in args.topologies.split(","):
        topo = load_topology(ROOT / "topologies" / f"{name}.yaml").with_input(
            records=args.records)
        for proto in args.protocols.split(","):
            spec = get_protocol(proto)
            given = validate(spec.params, {}, spec.name)
            if refusals(given, topo):
                print(f"{name:<16} {proto:<11} (refuses this topology)")
                continue
            before = load_average()
            built = time.perf_counter()
            extra = {"memo": False} if args.no_memo else {}
            sim = Simulator(topo, spec, given, **extra)
            built = time.perf_counter() - built
            job = SimJob(topo, proto, given)
            summary, wall, cpu = schedules(sim, job, args.schedules, args.jobs, args.budget)
            rate = summary.schedules / wall * 60
            per = f"{cpu / summary.schedules:.2f}" if args.jobs == 1 else "-"
            print(f"{name:<16} {proto:<11} {built:8.1f} {summary.schedules:5d} {rate:9.1f} "
                  f"{per:>11} {'yes' if summary.passed else 'NO':>6}  "
                  f"{before:.2f}/{load_average():.2f}", flush=True)


if __name__ == "__main__":
    main()
