"""replica-ring's guarantee over many seeded fault schedules on the simulation host.

Each schedule mixes the simulator's random crashes (one to three strikes, some of them
bursts of several units) with a correlated loss: a replica and its ring successor at
once, the double failure the fixed variant's ring walk handles (flaw F6). Every run is
judged against the fault-free output by the semantics chosen. The fault model keeps one
replica of each ring up (``ProtocolSpec.spared``).

    python benchmarks/replica_ring_schedules.py -n 2000
    python benchmarks/replica_ring_schedules.py -n 200 --variant faithful

Exit 1 if any schedule violates the guarantee; the seed printed replays it.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

from ftctl.config.load import load_topology
from ftctl.sim.faults import FailureSchedule, Strike
from ftctl.sim.host import SimHost
from ftctl.sim.runner import Simulator
from ftctl.verify.checker import verify
from protocols.contract.view import GraphView
from protocols.registry import get_protocol
from protocols.replica_ring.spec import rings

ROOT = Path(__file__).resolve().parent.parent


def schedule(sim: Simulator, seed: int) -> FailureSchedule:
    """The simulator's random strikes plus, in half the schedules, a replica and its
    successor struck together."""
    rng = random.Random(seed)
    strikes = list(FailureSchedule.random(rng, sim.horizon, sim.max_failures,
                                          sim.max_burst).strikes)
    if rng.random() < 0.5:
        ring = sorted(rng.choice(rings(GraphView(sim.graph))))
        i = rng.randrange(len(ring))
        pair = (ring[i], ring[(i + 1) % len(ring)])
        strikes.append(Strike(rng.randint(1, sim.horizon), 2, pair))
    return FailureSchedule(sorted(strikes, key=lambda s: s.at_event))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=2000, help="schedules per semantics")
    ap.add_argument("--topology", default=str(ROOT / "topologies" / "replica-chain.yaml"))
    ap.add_argument("--variant", default="fixed")
    ap.add_argument("--semantics", default="exactly-once,at-least-once,at-most-once")
    args = ap.parse_args()
    spec = get_protocol("replica-ring")
    topo = load_topology(args.topology)
    failed = False
    for semantics in args.semantics.split(","):
        started = time.perf_counter()
        sim = Simulator(topo, spec, {"semantics": semantics, "variant": args.variant})
        bad: list[tuple[int, dict[str, int]]] = []  # seed, anomalies
        strikes = 0
        for seed in range(1, args.n + 1):
            host = SimHost(sim.graph, spec, sim.params, seed=seed,
                           schedule=schedule(sim, seed), max_events=sim.stall_after)
            try:
                res = host.run()
            except Exception as exc:  # a crash of the protocol is a failed schedule
                bad.append((seed, {repr(exc): 1}))
                continue
            strikes += res.stats.failures
            v = verify(sim.modes, sim.golden, res.outputs, sim.guarantee,
                       complete=res.complete, golden_index=sim.golden_index)
            if not v.passed:
                bad.append((seed, dict(v.totals())))
        failed |= bool(bad)
        print(f"{topo.name} {semantics} {args.variant}: {args.n} schedules, {strikes} "
              f"strikes, {len(bad)} violating {bad[:5]} "
              f"({time.perf_counter() - started:.0f} s)", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
