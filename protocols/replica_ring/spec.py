"""``replica-ring`` as the registry and the conformance kit see it (contract v2)."""

from __future__ import annotations

from protocols.contract.spec import Mutant, ProtocolSpec, Variant
from protocols.replica_ring.logic import ReplicaRingCoordinator, ReplicaRingInstance
from protocols.replica_ring.messages import MESSAGES
from protocols.replica_ring.mutants import MODEL_ONLY, MUTANTS
from protocols.replica_ring.params import ReplicaRingParams


def _planted(name: str) -> tuple[type[ReplicaRingInstance], type[ReplicaRingCoordinator]]:
    """The protocol's two classes with one bug planted (a class attribute the units read)."""
    tag = "".join(p.title() for p in name.split("-"))
    planted = frozenset({name})
    inst = type(f"ReplicaRingInstance{tag}", (ReplicaRingInstance,), {"mutants": planted})
    coord = type(f"ReplicaRingCoordinator{tag}", (ReplicaRingCoordinator,),
                 {"mutants": planted})
    return inst, coord


def _mutants() -> tuple[Mutant, ...]:
    out = []
    for m in MUTANTS:
        if m.name in MODEL_ONLY:
            continue
        inst, coord = _planted(m.name)
        out.append(Mutant(m.name, m.planted, instance=inst, coordinator=coord))
    return tuple(out)


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
    mutants=_mutants(),
)
