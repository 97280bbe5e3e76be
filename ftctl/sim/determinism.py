"""Is a topology's output a function of its input alone? Run it fault-free under several
seeded interleavings and compare every run with the golden one.

A topology whose output depends on the order in which batches from different instances
reach an operator (a window taking the max of running counts fed by several instances)
differs between runs that lost nothing, so every protocol would be blamed for records it
never lost. Static checks cannot catch every such shape; this check runs it.

Each interleaving is a fault-free run under the ``none`` protocol on a host whose senders
each lag by their own seeded amount, on top of the usual per-message delay, so batches
from different instances reach a receiver in orders the golden run never shows. Delivery
stays FIFO per channel (as over TCP): a topology that relies on that is not refused.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ftctl.config.errors import ConfigError
from ftctl.runtime.graph import ExecutionGraph
from ftctl.sim.faults import NET_DELAY
from ftctl.sim.golden import golden_output
from ftctl.sim.host import MAX_STEP, SimHost
from ftctl.verify.checker import Divergence, index_by_key, verify
from protocols.contract.params import NoParams
from protocols.contract.spec import Guarantee
from protocols.registry import PROTOCOLS

# Interleavings ``ftctl sim`` tries before its first schedule (--determinism to change).
DEFAULT_INTERLEAVINGS = 3
# A sender's own lag is drawn up to this many source steps (or nominal message delays,
# whichever is longer): enough to move one instance's batches past several of another's.
LAG_STEPS = 4


class ShuffledHost(SimHost):
    """A fault-free ``none`` host whose senders each lag by their own seeded amount."""

    def __init__(self, graph: ExecutionGraph, seed: int):
        super().__init__(graph, PROTOCOLS["none"], NoParams(), seed=seed, max_events=None,
                         max_step=MAX_STEP)
        spread = LAG_STEPS * max(NET_DELAY, self.step_dt)
        # Some senders fast, some slow, and each message jittered within its sender's lag.
        self.lag = {iid: spread * self.rng.random() for iid in graph.order}

    def _transfer(self, sender: str, msg: Any) -> float:
        return self.lag.get(sender, 0.0) * self.rng.random()


@dataclass(frozen=True)
class Divergent:
    """The first interleaving whose output differed from the golden run's."""

    seed: int
    sink: str
    divergence: Divergence

    def describe(self, runs: int) -> str:
        d = self.divergence
        return (f"sink '{self.sink}' key {d.key!r}: output differs between fault-free runs "
                f"(interleaving {self.seed} of {runs}: expected {d.expected!r}, got "
                f"{d.actual!r}); it depends on the order in which batches from different "
                "instances arrive, so every protocol would be blamed for it")


def check_determinism(graph: ExecutionGraph, file: str, runs: int,
                      golden: dict[str, list[tuple[Any, Any]]] | None = None) -> None:
    """ConfigError naming ``file`` and the first diverging sink and key when the output
    differs between ``runs`` seeded interleavings and the golden run."""
    found = first_divergence(graph, runs, golden)
    if found is not None:
        raise ConfigError(file, None, found.describe(runs))


def first_divergence(graph: ExecutionGraph, runs: int,
                     golden: dict[str, list[tuple[Any, Any]]] | None = None) -> Divergent | None:
    """The first of ``runs`` seeded interleavings whose sinks differ from the golden run
    (judged as ``ftctl sim`` judges exactly-once), or None: the output did not depend on
    the order of deliveries in any of them."""
    golden = golden if golden is not None else golden_output(graph)
    index = {s: index_by_key(out) for s, out in golden.items()}
    modes = graph.topology.sink_modes()
    for seed in range(1, runs + 1):
        result = ShuffledHost(graph, seed).run()
        verdict = verify(modes, golden, result.outputs, Guarantee.EXACTLY_ONCE,
                         complete=result.complete, golden_index=index)
        for sink in verdict.sinks:
            if sink.divergences:
                return Divergent(seed, sink.sink, sink.divergences[0])
    return None
