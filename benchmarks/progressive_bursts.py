"""Exactly-once of progressive under correlated node loss with progressive return.

    python benchmarks/progressive_bursts.py [-n 2000] [--param schedule=blocking]

Every bundled topology the kit simulates runs on 4 simulated nodes with just enough slots
for its instances; per seed, 3 of the 4 nodes die within 5% of the run, come back one by
one (ftctl/sim/bursts.py ``NodeBurst``), and in half the seeds one more unit crashes
while the first returned node's restarts replay. Prints, per topology, schedules,
violations (first failing seeds, replayable with ``NodeBurst.random(seed, ...)``),
incomplete runs and plans made; exits 1 on any violation.
"""

from __future__ import annotations

import argparse
import sys
import time

from ftctl.config.load import load_topology
from ftctl.conformance.cases import topologies
from ftctl.sim.bursts import BurstRunner
from protocols.progressive.spec import SPEC


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("-n", type=int, default=200, help="schedules per topology")
    ap.add_argument("--first-seed", type=int, default=1)
    ap.add_argument("--param", action="append", default=[], help="key=value (progressive)")
    args = ap.parse_args()
    given = dict(p.split("=", 1) for p in args.param)
    failed = False
    print(f"progressive {given or ''}: {args.n} node-burst schedules per topology")
    for path in topologies():
        t0 = time.perf_counter()
        runner = BurstRunner(load_topology(path), SPEC, given)
        bad: list[int] = []
        incomplete = plans = further = 0
        for seed in range(args.first_seed, args.first_seed + args.n):
            o = runner.run_one(seed)
            if not o.verdict.passed:
                bad.append(seed)
            incomplete += not o.result.complete
            further += o.burst.further is not None
            plans += sum(1 for e in o.result.events if e.note == "plan")
        failed |= bool(bad)
        print(f"  {path.stem:<18} {args.n:>5} schedules  {len(bad):>3} violations "
              f"{bad[:5]}  {incomplete} incomplete  {further} with a further crash  "
              f"{plans} plans  {time.perf_counter() - t0:6.1f} s", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
