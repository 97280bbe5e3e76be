"""Which topologies ``replica-ring`` accepts (spec section 4, Scope).

Refusals are one line naming the operator; the caller reports them with exit code 2.
"""

from __future__ import annotations

from ftctl.runtime.operators import OPERATORS, is_source
from ftctl.runtime.topology import Topology
from protocols.replica_ring.params import ReplicaRingParams


def check_topology(topology: Topology, params: ReplicaRingParams) -> str | None:
    """None if the protocol can run ``topology`` correctly, else the reason, one line.

    What an operator is comes from the operator registry, not a list of names here: a list
    went stale when operators were added (``avg`` and Nexmark's winning bids were accepted,
    and every recovery lost their output)."""
    for op in topology.operators:
        if is_source(op.type) or op.type == "sink":
            continue  # not ring members: restarted by the coordinator
        kind = OPERATORS[op.type]
        if kind.event_time or kind.inputs > 1:
            # Watermarks per input channel and two-sided state have no tuple record.
            return f"replica-ring: operator {op.name!r} ({op.type}) is not supported"
        if kind.keyed:
            return (f"replica-ring: operator {op.name!r} keeps state ({op.type}), which "
                    "tuple records cannot recover")
        if op.parallelism < 2:
            return (f"replica-ring: operator {op.name!r} has parallelism {op.parallelism}; "
                    "a ring needs at least 2 replicas")
        if params.replicas is not None and op.parallelism != params.replicas:
            return (f"replica-ring: operator {op.name!r} has parallelism {op.parallelism}, "
                    f"not replicas={params.replicas}")
    return None
