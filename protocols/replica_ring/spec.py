"""``replica-ring`` as the registry and the conformance kit see it (contract v2)."""

from __future__ import annotations

from protocols.contract.spec import ProtocolSpec, Variant
from protocols.replica_ring.logic import ReplicaRingCoordinator, ReplicaRingInstance
from protocols.replica_ring.messages import MESSAGES
from protocols.replica_ring.mutants import MUTANTS
from protocols.replica_ring.params import ReplicaRingParams

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
    needs=frozenset({"peers", "timers", "routing"}),
    variants=tuple(Variant(f"{g}-{v}", {"semantics": g, "variant": v})
                   for g in ("at-most-once", "at-least-once", "exactly-once")
                   for v in ("fixed", "faithful")),
    mutants=MUTANTS,
)
