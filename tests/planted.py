"""Deliberately broken copies of protocols: the checker must catch each of them."""

from __future__ import annotations

from typing import Any

from protocols.base import ProtocolInfo
from protocols.checkpoint import CheckpointCoordinator, CheckpointInstance, _Pending
from protocols.registry import PROTOCOLS


class NoChannelState(CheckpointInstance):
    """Persists the copied state but forgets the tuples recorded on the other channels."""

    def _persist(self, sid: int, snap: _Pending) -> None:
        snap.channel_state = {}
        super()._persist(sid, snap)


class RewindTooFar(CheckpointInstance):
    """A restored source starts one record before its snapshot offset."""

    def __init__(self, core: Any, params: dict[str, Any], blob: Any, init: Any):
        super().__init__(core, params, blob, init)
        if blob is not None and core.is_source and core.offset > core.lo:
            core.offset -= 1


class CommitEarly(CheckpointCoordinator):
    """Commits a snapshot's sink output when the sinks persisted it, not when all did."""

    def on_report(self, instance: str, kind: str, data: Any, now: float) -> list[Any]:
        steps = super().on_report(instance, kind, data, now)
        if kind == "persisted" and instance in self.graph.sinks and data > self.complete:
            from protocols.base import Commit

            steps.append(Commit(data))
        return steps


def planted(name: str) -> ProtocolInfo:
    base = PROTOCOLS["checkpoint"]
    instance, coordinator = base.instance, base.coordinator
    if name == "no-channel-state":
        instance = NoChannelState
    elif name == "rewind-too-far":
        instance = RewindTooFar
    elif name == "commit-early":
        coordinator = CommitEarly
    return ProtocolInfo(f"checkpoint-{name}", base.guarantee, f"planted bug: {name}", "-",
                        instance, coordinator, dict(base.defaults))
