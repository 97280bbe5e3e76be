"""replica-ring's ping detector under a clock fault of one pinger (docs/chaos.md, Clock
faults): for each drift rate, in how many seeds a live replica is suspected and in how
many the output breaks exactly-once; and the same for a forward jump of ``ping_timeout``
struck while a ping is outstanding.

    python benchmarks/clock_bound.py -n 30 --rates 40,80,85,90,100,170

Simulation host, ``topologies/replica-chain.yaml`` (600 records), exactly-once, fixed
variant; the fault strikes ``split[0]`` (which pings ``split[1]``) at 0.011 s.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from ftctl.config.load import load_topology
from ftctl.kernel.clocks import ClockFault, Drift, Jump
from ftctl.runtime.graph import ExecutionGraph
from ftctl.sim.clock_faults import apply_clock_fault
from ftctl.sim.golden import golden_output
from ftctl.sim.host import SimHost
from ftctl.sim.runner import sim_params
from ftctl.verify.checker import verify
from protocols.contract.spec import Guarantee
from protocols.registry import get_protocol
from protocols.replica_ring.messages import Ping

TOPOLOGY = Path(__file__).resolve().parent.parent / "topologies" / "replica-chain.yaml"
PINGER = "split[0]"
RING = {"semantics": "exactly-once", "variant": "fixed"}


def run(seed: int, fault: ClockFault, on_ping: bool) -> tuple[bool, bool]:
    """(a live replica was suspected, the output is exactly-once)."""
    topo = load_topology(TOPOLOGY)
    topo = topo.model_copy(update={"input": topo.input.model_copy(update={"records": 600})})
    graph = ExecutionGraph(topo)
    spec = get_protocol("replica-ring")
    host = SimHost(graph, spec, sim_params(graph, spec, RING), seed)
    if on_ping:  # strike right after the pinger's first ping past 0.03 s goes out
        sent = host.send_peer
        struck: list[float] = []

        def send_peer(sender: str, to: str, msg: Any, unit: str | None = None) -> None:
            sent(sender, to, msg, unit)
            if isinstance(msg, Ping) and sender == PINGER and host.now > 0.03 and not struck:
                struck.append(host.now)
                host.at(host.now, lambda: apply_clock_fault(host, PINGER, fault))
        host.send_peer = send_peer  # type: ignore[method-assign]
    else:
        host.at(0.011, lambda: apply_clock_fault(host, PINGER, fault))
    result = host.run()
    verdict = verify(topo.sink_modes(), golden_output(graph), result.outputs,
                     Guarantee.EXACTLY_ONCE, complete=result.complete, stopped=result.stopped)
    return any(e.kind == "failure-suspected" for e in result.events), verdict.passed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=30, help="seeds 1..n per case")
    ap.add_argument("--rates", default="40,80,85,90,100,170")
    ap.add_argument("--jump", type=float, default=0.15, help="forward jump, s (0: none)")
    args = ap.parse_args()
    cases: list[tuple[str, ClockFault, bool]] = [
        (f"drift {r}", Drift(float(r)), False) for r in args.rates.split(",")]
    if args.jump:
        cases.append((f"jump +{args.jump} on a ping", Jump(args.jump), True))
    print(f"{'case':<24} {'seeds':>5} {'suspected':>9} {'violated':>8} {'time':>6}")
    for name, fault, on_ping in cases:
        began = time.perf_counter()
        outcomes = [run(seed, fault, on_ping) for seed in range(1, args.n + 1)]
        print(f"{name:<24} {args.n:>5} {sum(s for s, _ in outcomes):>9} "
              f"{sum(not ok for _, ok in outcomes):>8} {time.perf_counter() - began:>5.1f}s")


if __name__ == "__main__":
    main()
