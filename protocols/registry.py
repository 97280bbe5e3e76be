"""Every protocol ftctl knows, by name.

An entry is a ``ProtocolSpec`` (contract v2, ``protocols/contract``). Register a new
protocol by adding its spec: ``"falkirk": falkirk.SPEC``.
"""

from __future__ import annotations

from typing import Any

from protocols.causal.spec import SPEC as CAUSAL
from protocols.checkpoint.spec import SPEC as CHECKPOINT
from protocols.contract.spec import ProtocolSpec
from protocols.falkirk.spec import SPEC as FALKIRK
from protocols.lineage.spec import SPEC as LINEAGE
from protocols.none import SPEC as NONE
from protocols.progressive import spec as progressive
from protocols.replica_ring.spec import SPEC as REPLICA_RING

Protocol = ProtocolSpec[Any]

PROTOCOLS: dict[str, Protocol] = {
    "none": NONE,
    "checkpoint": CHECKPOINT,
    "lineage": LINEAGE,
    "causal": CAUSAL,
    "falkirk": FALKIRK,
    "replica-ring": REPLICA_RING,
    "progressive": progressive.SPEC,
}


def get_protocol(name: str) -> Protocol:
    try:
        return PROTOCOLS[name]
    except KeyError:
        raise KeyError(f"unknown protocol {name!r} (known: {', '.join(PROTOCOLS)})") from None
