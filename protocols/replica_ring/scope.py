"""Which topologies ``replica-ring`` accepts (spec section 4, Scope).

Refusals are one line naming the operator; the caller reports them with exit code 2.
"""

from __future__ import annotations

from ftctl.runtime.operators import is_source
from ftctl.runtime.topology import Topology
from protocols.replica_ring.params import ReplicaRingParams

STATEFUL = frozenset({"count", "sum", "max"})
UNSUPPORTED = frozenset({"window", "join"})


def check_topology(topology: Topology, params: ReplicaRingParams) -> str | None:
    """None if the protocol can run ``topology`` correctly, else the reason, one line."""
    for op in topology.operators:
        if is_source(op.type) or op.type == "sink":
            continue  # not ring members: restarted by the coordinator
        if op.type in UNSUPPORTED:
            return f"replica-ring: operator {op.name!r} ({op.type}) is not supported"
        if op.type in STATEFUL:
            return (f"replica-ring: operator {op.name!r} keeps state ({op.type}), which "
                    "tuple records cannot recover")
        if op.parallelism < 2:
            return (f"replica-ring: operator {op.name!r} has parallelism {op.parallelism}; "
                    "a ring needs at least 2 replicas")
        if params.replicas is not None and op.parallelism != params.replicas:
            return (f"replica-ring: operator {op.name!r} has parallelism {op.parallelism}, "
                    f"not replicas={params.replicas}")
    return None
