"""Simulation speed: failure schedules per minute for wordcount with 2,000 records.

    python benchmarks/sim_speed.py [--schedules N]

Prints schedules/minute per protocol (goal: at least 1,000 per minute under
checkpoint on a 2-core machine) and the ratio checkpoint / none.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from ftctl.config.load import load_topology
from ftctl.sim.runner import Simulator
from protocols.registry import PROTOCOLS

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--schedules", type=int, default=300)
    args = ap.parse_args()
    topo = load_topology(ROOT / "topologies" / "wordcount.yaml")
    assert topo.input.records == 2000
    rates: dict[str, float] = {}
    print(f"wordcount, {topo.input.records} records, {args.schedules} schedules each")
    for name, given in [("none", {}), ("checkpoint", {}),
                        ("checkpoint", {"alignment": "aligned"})]:
        sim = Simulator(topo, PROTOCOLS[name], given)
        t0 = time.perf_counter()
        summary = sim.run_many(args.schedules, seed=1)
        secs = time.perf_counter() - t0
        label = name + ("/aligned" if given else "")
        rates[label] = args.schedules / secs * 60
        print(f"  {label:<20} {rates[label]:8,.0f} schedules/min  "
              f"({secs / args.schedules * 1000:.1f} ms each, "
              f"{summary.failures} failures injected, "
              f"{len(summary.failing_seeds)} violating)")
    print(f"checkpoint / none speed ratio: {rates['checkpoint'] / rates['none']:.2f}")


if __name__ == "__main__":
    main()
