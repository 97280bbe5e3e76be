"""Every protocol ftctl knows, by name."""

from __future__ import annotations

from protocols.base import Guarantee, ProtocolInfo
from protocols.causal import CausalCoordinator, CausalInstance, CausalParams
from protocols.checkpoint import CheckpointCoordinator, CheckpointInstance, CheckpointParams
from protocols.lineage import LineageCoordinator, LineageInstance
from protocols.none import NoneCoordinator, NoneInstance

PROTOCOLS: dict[str, ProtocolInfo] = {
    "none": ProtocolInfo(
        "none", Guarantee.AT_MOST_ONCE,
        "no fault tolerance: a failed instance restarts empty (the control)",
        "-", NoneInstance, NoneCoordinator),
    "checkpoint": ProtocolInfo(
        "checkpoint", Guarantee.EXACTLY_ONCE,
        "snapshot tokens with channel state (or aligned), global rollback, transactional sinks",
        "003 (Noir)", CheckpointInstance, CheckpointCoordinator,
        CheckpointParams),
    "lineage": ProtocolInfo(
        "lineage", Guarantee.EXACTLY_ONCE,
        "purge the failed instances' downstream, recompute it from the sources and full "
        "payload logs; sinks suppress already-visible records per key",
        "000 (baseline)", LineageInstance, LineageCoordinator),
    "causal": ProtocolInfo(
        "causal", Guarantee.EXACTLY_ONCE,
        "tree-clock causal logging: only failed instances restart, from local snapshots, "
        "replaying their children's observed order; per-channel seq de-duplication",
        "000", CausalInstance, CausalCoordinator,
        CausalParams),
}


def get_protocol(name: str) -> ProtocolInfo:
    try:
        return PROTOCOLS[name]
    except KeyError:
        raise KeyError(f"unknown protocol {name!r} (known: {', '.join(PROTOCOLS)})") from None
