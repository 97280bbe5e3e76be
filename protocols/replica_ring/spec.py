"""``replica-ring`` as the registry and the conformance kit see it (contract v2)."""

from __future__ import annotations

from protocols.contract.actions import RECOVERING, REINSTATING, TAKEOVER
from protocols.contract.spec import ProtocolSpec, Variant
from protocols.contract.view import GraphView
from protocols.replica_ring.checks import breaches
from protocols.replica_ring.logic import ReplicaRingCoordinator, ReplicaRingInstance
from protocols.replica_ring.messages import MESSAGES
from protocols.replica_ring.mutants import MUTANTS
from protocols.replica_ring.params import ReplicaRingParams


def rings(graph: GraphView) -> tuple[frozenset[str], ...]:
    """Each ring operator's replicas: the fault model keeps one of them up (a ring with
    no replica left has nobody to take its slots over; §1 assumes one failure at a time)."""
    by_op: dict[str, set[str]] = {}
    for i in graph.order:
        if not graph.is_source(i) and not graph.is_sink(i):
            by_op.setdefault(graph.operator_of(i), set()).add(i)
    return tuple(frozenset(v) for _op, v in sorted(by_op.items()))


SPEC: ProtocolSpec[ReplicaRingParams] = ProtocolSpec(
    name="replica-ring",
    paper="002 (DADSTORM)",
    description="operator replicas in a ring: ping the successor, take over a dead "
                "replica's slot, tuple records shared among replicas; semantics chosen "
                "per run",
    params=ReplicaRingParams,
    instance=ReplicaRingInstance,
    coordinator=ReplicaRingCoordinator,
    guarantee=lambda p: p.semantics,
    messages=MESSAGES,
    phases=(RECOVERING, TAKEOVER, REINSTATING),
    needs=frozenset({"peers", "timers", "routing"}),
    # each semantics of the fixed variant must hold it; the faithful variant claims the
    # same guarantees and breaks them (docs/protocols.md, tests/test_replica_ring_*)
    variants=tuple(Variant(g, {"semantics": g})
                   for g in ("exactly-once", "at-least-once", "at-most-once")),
    mutants=MUTANTS,
    # the kit's short timings: ping every 2 ms, timeout 6 ms, retry 2 ms, reinstatement
    # 4 ms after a takeover (at the defaults every takeover on the bundled chain happens
    # after the input has ended)
    timings={"ping_every": 0.04, "ping_timeout": 0.04, "retry_every": 0.04,
             "reinstate_after": 0.004},
    spared=rings,
    unsettled=(REINSTATING,),
    # a running unit is fenced only for a suspicion of its own generation; a record is
    # confirmed only by a unit speaking for its slot (checks.py)
    checks=breaches,
    gate={"replica-chain/exactly-once": 40, "replica-chain/at-least-once": 40,
          "replica-chain/at-most-once": 40},
)
