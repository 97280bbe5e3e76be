"""Every protocol ftctl knows, by name."""

from __future__ import annotations

from typing import Any

from protocols.base import Guarantee, ProtocolInfo
from protocols.causal import CausalCoordinator, CausalInstance
from protocols.checkpoint import CheckpointCoordinator, CheckpointInstance
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
        defaults={"interval": 1.0, "alignment": "unaligned"},
        choices={"alignment": ("unaligned", "aligned")}),
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
        defaults={"depth": 2, "snapshot_every": 10, "clocks": "on"},
        choices={"clocks": ("on", "off")}),
}


def get_protocol(name: str) -> ProtocolInfo:
    try:
        return PROTOCOLS[name]
    except KeyError:
        raise KeyError(f"unknown protocol {name!r} (known: {', '.join(PROTOCOLS)})") from None


def resolve_params(info: ProtocolInfo, given: dict[str, Any]) -> dict[str, Any]:
    """Defaults overlaid with ``given``; raises ValueError naming a bad key or value."""
    unknown = set(given) - set(info.defaults)
    if unknown:
        known = ", ".join(info.defaults) or "none"
        raise ValueError(f"unknown parameter {sorted(unknown)[0]!r} for {info.name} "
                         f"(known: {known})")
    params = {**info.defaults}
    for k, v in given.items():
        default = info.defaults[k]
        choices = info.choices.get(k)
        if choices is not None and v not in choices:
            raise ValueError(f"{k} must be one of {', '.join(choices)}, got {v!r}")
        if isinstance(default, float | int) and not isinstance(v, float | int):
            try:
                v = type(default)(v)
            except ValueError:
                raise ValueError(f"{k} must be a number, got {v!r}") from None
        params[k] = v
    return params
