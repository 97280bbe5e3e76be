"""Planted bugs of ``checkpoint``: each breaks exactly-once on some seeded schedule."""

from __future__ import annotations

from typing import Any

from protocols.base import Commit, Start, Stop
from protocols.checkpoint import CheckpointCoordinator, CheckpointInstance, _Pending
from protocols.contract.spec import Mutant


class NoChannelState(CheckpointInstance):
    """A snapshot keeps the copied state but forgets the tuples recorded on the other channels."""

    def _persist(self, sid: int, snap: _Pending) -> None:
        snap.channel_state = {}
        super()._persist(sid, snap)


class RewindTooFar(CheckpointInstance):
    """A restored source starts one record before its snapshot offset."""

    def __init__(self, core: Any, params: Any, blob: Any, init: Any):
        super().__init__(core, params, blob, init)
        if blob is not None and core.is_source and core.offset > core.lo:
            core.offset -= 1


class CommitEarly(CheckpointCoordinator):
    """A snapshot's sink output is committed once the sinks persisted it, not once all did."""

    def on_report(self, instance: str, kind: str, data: Any, now: float) -> list[Any]:
        steps = super().on_report(instance, kind, data, now)
        if kind == "persisted" and instance in self.graph.sinks and data > self.complete:
            steps.append(Commit(data))
        return steps


class RollbackFailedOnly(CheckpointCoordinator):
    """Only the failed instances roll back to the last complete snapshot; the rest run on."""

    def on_failure(self, failed: set[str], now: float) -> list[Any]:
        steps = super().on_failure(failed, now)
        keep = [s for s in steps if not isinstance(s, Stop | Start) or _of(s) in failed]
        return [Stop(sorted(failed)) if isinstance(s, Stop) else s for s in keep]


def _of(step: Any) -> str:
    return step.instance if isinstance(step, Start) else ""


class AlignedNoBlock(CheckpointInstance):
    """Aligned mode: a channel whose token came is not blocked, so its later tuples leak in."""

    def _aligned_token(self, ch: int, marker: Any) -> None:
        super()._aligned_token(ch, marker)
        held = self.blocked.pop(ch, None)
        for m in held or []:
            self.on_message(ch, m)


MUTANTS: tuple[Mutant, ...] = (
    Mutant("no-channel-state", NoChannelState.__doc__ or "", instance=NoChannelState,
           budget=10),
    Mutant("rewind-too-far", RewindTooFar.__doc__ or "", instance=RewindTooFar, budget=10),
    Mutant("commit-early", CommitEarly.__doc__ or "", coordinator=CommitEarly, budget=10),
    Mutant("rollback-failed-only", RollbackFailedOnly.__doc__ or "",
           coordinator=RollbackFailedOnly, budget=10),
    Mutant("aligned-no-block", AlignedNoBlock.__doc__ or "", instance=AlignedNoBlock,
           params={"alignment": "aligned"}, budget=10),
)
