"""replica-ring on ftctl's simulation host (the kernel drives its contract-v2 logic).

Failure-free only: the kernel does not route slots or adopt them yet (``Route``,
``AdoptSlot``), so a takeover cannot run on this host; the in-test kernel of
tests/test_replica_ring_contract_run.py covers failures.
"""

from __future__ import annotations

from collections import Counter

import pytest

from ftctl.runtime.graph import ExecutionGraph
from ftctl.sim.host import SimHost
from protocols.base import Guarantee
from protocols.replica_ring.accounting import PAPER_TABLE1, table1_messages
from protocols.replica_ring.messages import KIND
from protocols.replica_ring.params import ReplicaRingParams
from protocols.replica_ring.spec import SPEC
from tests.test_replica_ring_contract_run import chain


class CountingHost(SimHost):
    """The simulation host, counting peer messages by (kind, from operator, to operator)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.kinds: Counter[tuple[str, str, str]] = Counter()

    def send_peer(self, sender, to, msg):
        ops = self.graph.instances
        self.kinds[KIND.get(type(msg), type(msg).__name__), ops[sender].op, ops[to].op] += 1
        super().send_peer(sender, to, msg)


def run(r: int, semantics: Guarantee) -> CountingHost:
    host = CountingHost(ExecutionGraph(chain(r, 100 * r, sources=r)), SPEC,
                        ReplicaRingParams(semantics=semantics, reinstate_after=None), seed=1)
    res = host.run()
    assert res.complete and sum(len(v) for v in res.outputs.values()) == 100 * r
    return host


@pytest.mark.parametrize("r", [2, 4])
def test_table1_from_messages_counted_on_the_simulation_host(r):
    k = run(r, Guarantee.EXACTLY_ONCE).kinds
    colleague: Counter[str] = Counter()
    for (kind, a, b), n in k.items():
        if a == b:
            colleague[kind] += n
    assert colleague["record"] == table1_messages(r) == PAPER_TABLE1[r]
    assert colleague["purge"] == colleague["record_ok"] == table1_messages(r)
    n = 100 * r
    assert {key: k[key] for key in (("ack", "B", "A"), ("ack", "out", "B"),
                                     ("delete", "B", "A"), ("delete", "out", "B"))} == {
        ("ack", "B", "A"): n, ("ack", "out", "B"): n, ("delete", "B", "A"): n,
        ("delete", "out", "B"): n}


def test_at_most_once_sends_no_records_on_the_simulation_host():
    k = run(2, Guarantee.AT_MOST_ONCE).kinds
    assert not {kind for kind, _a, _b in k} & {"record", "purge", "ack", "delete"}
