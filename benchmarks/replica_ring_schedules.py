"""replica-ring's guarantee over many seeded fault schedules on the simulation host.

``--scenario mixed`` (the default) mixes the simulator's random crashes (one to three
strikes, some of them bursts of several units) with a correlated loss: a replica and its
ring successor at once, the double failure the fixed variant's ring walk handles (flaw
F6). ``pair`` strikes only such a pair, at a random point; ``reinstated-predecessor``
kills one replica and, 0-12 ms after its replacement starts, the replica before it in the
ring (the one whose taker the replacement is). Every run is judged against the fault-free
output by the semantics chosen. The fault model keeps one replica of each ring up
(``ProtocolSpec.spared``). ``--param`` sets protocol params, e.g. the short ring timings
of the conformance kit, under which failures overlap live tuples.

    python benchmarks/replica_ring_schedules.py -n 2000
    python benchmarks/replica_ring_schedules.py -n 200 --variant faithful
    python benchmarks/replica_ring_schedules.py -n 60 --scenario pair --mutant stale-suspicion
    python benchmarks/replica_ring_schedules.py -n 1000 --scenario pair --param \
        ping_every=0.002 --param ping_timeout=0.006 --param retry_every=0.002 \
        --param reinstate_after=0.004

Exit 1 if any schedule violates the guarantee; the seed printed replays it.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from dataclasses import replace
from pathlib import Path

from ftctl.config.load import load_topology
from ftctl.sim.faults import FailureSchedule, Strike
from ftctl.sim.host import SimHost
from ftctl.sim.nemesis import SimNemesis, drawn_faults, on_progress
from ftctl.sim.runner import Simulator
from ftctl.verify.checker import verify
from protocols.contract.view import GraphView
from protocols.registry import get_protocol
from protocols.replica_ring.mutants import planted
from protocols.replica_ring.spec import rings

ROOT = Path(__file__).resolve().parent.parent


SCENARIOS = ("mixed", "pair", "reinstated-predecessor")
PREDECESSOR_WITHIN = 0.012  # seconds after the replacement starts


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


def pair(sim: Simulator, seed: int) -> FailureSchedule:
    """A replica and its ring successor struck together, at a random point."""
    rng = random.Random(seed)
    ring = sorted(rng.choice(rings(GraphView(sim.graph))))
    i = rng.randrange(len(ring))
    return FailureSchedule([Strike(rng.randint(1, sim.horizon), 2,
                                   (ring[i], ring[(i + 1) % len(ring)]))])


def reinstated_predecessor(sim: Simulator, seed: int, host: SimHost) -> FailureSchedule:
    """One replica struck at a random point; once its replacement runs, the replica
    before it is struck too (armed on ``host``, polled at half the ping period)."""
    rng = random.Random(seed)
    ring = sorted(rng.choice(rings(GraphView(sim.graph))))
    i = rng.randrange(len(ring))
    victim, before = ring[i], ring[(i - 1) % len(ring)]
    delay = rng.uniform(0, PREDECESSOR_WITHIN)
    step = sim.params.ping_every / 2  # type: ignore[attr-defined]

    def watch() -> None:
        unit = host.live.get(victim)
        if unit is not None and unit.inc > 0:
            host.at(host.now + delay, lambda: host.inject(Strike(0, 1, (before,))))
        elif host.now < 10 * sim.fault_free_end:
            host.at(host.now + step, watch)

    host.at(step, watch)
    return FailureSchedule([Strike(rng.randint(1, sim.horizon), 1, (victim,))])


def host_for(sim: Simulator, scenario: str, seed: int) -> SimHost:
    host = SimHost(sim.graph, sim.protocol, sim.params, seed=seed, max_events=sim.stall_after)
    if scenario == "mixed":
        planned = schedule(sim, seed)
    elif scenario == "pair":
        planned = pair(sim, seed)
    else:
        planned = reinstated_predecessor(sim, seed, host)
    # Through the trigger engine, as SimHost(schedule=...) does: each strike is due once
    # the host has processed its ``at_event`` events.
    drawn = drawn_faults(planned.strikes)
    SimNemesis(host, on_progress(drawn), drawn=drawn).install()
    return host


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=2000, help="schedules per semantics")
    ap.add_argument("--topology", default=str(ROOT / "topologies" / "replica-chain.yaml"))
    ap.add_argument("--variant", default="fixed")
    ap.add_argument("--semantics", default="exactly-once,at-least-once,at-most-once")
    ap.add_argument("--scenario", choices=SCENARIOS, default="mixed")
    ap.add_argument("--mutant", help="plant this bug (protocols/replica_ring/mutants.py "
                    "BUGS), e.g. stale-suspicion")
    ap.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                    help="protocol param (repeatable)")
    args = ap.parse_args()
    given = dict(p.split("=", 1) for p in args.param)
    spec = get_protocol("replica-ring")
    if args.mutant is not None:
        instance, coordinator = planted(args.mutant)
        spec = replace(spec, instance=instance, coordinator=coordinator)
    topo = load_topology(args.topology)
    failed = False
    for semantics in args.semantics.split(","):
        started = time.perf_counter()
        sim = Simulator(topo, spec, {**given, "semantics": semantics,
                                     "variant": args.variant})
        bad: list[tuple[int, dict[str, int]]] = []  # seed, anomalies
        strikes = 0
        for seed in range(1, args.n + 1):
            host = host_for(sim, args.scenario, seed)
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
        print(f"{topo.name} {args.scenario} {semantics} {args.variant}: {args.n} schedules, "
              f"{strikes} "
              f"strikes, {len(bad)} violating {bad[:5]} "
              f"({time.perf_counter() - started:.0f} s)", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
