"""Wall time and the machine's CPU seconds of whole `ftctl run`s, this checkout against another.

    python benchmarks/run_cost.py [--before OLD_CHECKOUT] [--repeat 3]
        [--topology topologies/sharder.yaml] [--protocol none]

Each run starts its own local cluster and tears it down, so it pays everything a user's
`ftctl run` does: the cluster's start, a Python worker per Spark task (the slots, the
golden run's and the check's jobs), the records, the check. With ``--before``, runs
alternate between that checkout and this one (each on ``PYTHONPATH``, which the cluster's
executors inherit), so a drift in the machine's load hits both alike. CPU seconds are
the whole machine's (``/proc/stat``, user + system), so run nothing else meanwhile.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def busy_seconds() -> float:
    """CPU seconds the machine has spent busy since boot (all cores)."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = map(int, fields[:8])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def one_run(checkout: Path, topology: str, protocol: str, results: Path) -> tuple[float, float]:
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    cpu0, t0 = busy_seconds(), time.monotonic()
    done = subprocess.run([sys.executable, "-m", "ftctl.cli", "run", topology, "-p", protocol,
                           "--results", str(results)], cwd=checkout, env=env,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall, cpu = time.monotonic() - t0, busy_seconds() - cpu0
    if done.returncode != 0:
        raise SystemExit(f"ftctl run from {checkout} failed ({done.returncode}): "
                         f"{done.stderr.strip().splitlines()[-1:]}")
    return wall, cpu


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", type=Path, default=None, metavar="CHECKOUT")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--topology", default="topologies/sharder.yaml")
    ap.add_argument("--protocol", default="none")
    args = ap.parse_args()
    sides = ([("before", args.before.resolve())] if args.before else []) + [("this", ROOT)]
    got: dict[str, list[tuple[float, float]]] = {name: [] for name, _ in sides}
    with tempfile.TemporaryDirectory(prefix="ftctl-run-cost-") as tmp:
        for k in range(args.repeat):
            for name, checkout in sides:
                wall, cpu = one_run(checkout, args.topology, args.protocol, Path(tmp))
                got[name].append((wall, cpu))
                print(f"{name:6} run {k + 1}: {wall:6.1f} s wall, {cpu:6.1f} s CPU, "
                      f"load {os.getloadavg()[0]:.1f}", flush=True)
    for name, runs in got.items():
        print(f"{name:6} median: {statistics.median(w for w, _ in runs):6.1f} s wall, "
              f"{statistics.median(c for _, c in runs):6.1f} s CPU")
    return 0


if __name__ == "__main__":
    sys.exit(main())
