"""Planted bugs of ``checkpoint``: each breaks exactly-once on some seeded schedule (for
``trust-unchecked``, one with store faults), or (``snapshot-left-open``) the phase contract
the kit's phase-triggered cases judge."""

from __future__ import annotations

from ftctl.runtime.messages import Marker
from protocols.checkpoint.coordinator import CheckpointCoordinator
from protocols.checkpoint.instance import FINAL, CheckpointInstance, _Pending
from protocols.contract.actions import (
    SNAPSHOTTING,
    CommitOutput,
    CoordinatorAction,
    DeclarePhase,
    DiscardSnapshots,
    InstanceAction,
    Restart,
    Stop,
)
from protocols.contract.events import FailureDetected, ReportIn, Started, StoreFault
from protocols.contract.messages import Persisted
from protocols.contract.spec import Mutant
from protocols.contract.view import ClusterView


class NoChannelState(CheckpointInstance):
    """A snapshot keeps the copied state but forgets the tuples recorded on the other channels."""

    def persist(self, sid: int, snap: _Pending) -> None:
        snap.channel_state = {}
        super().persist(sid, snap)


class RewindTooFar(CheckpointInstance):
    """A restored source starts one record before its snapshot offset."""

    def on_started(self, ev: Started, now: float) -> list[InstanceAction]:
        acts = super().on_started(ev, now)
        core = self.core
        if ev.restored is not None and core.is_source and core.offset > core.lo:
            core.seek(core.offset - 1)
        return acts


class CommitEarly(CheckpointCoordinator):
    """A snapshot's sink output is committed once the sinks persisted it, not once all did."""

    def on_report(self, ev: ReportIn, view: ClusterView) -> list[CoordinatorAction]:
        acts = super().on_report(ev, view)
        msg = ev.msg
        if (isinstance(msg, Persisted) and ev.instance in self.graph.sinks
                and msg.snapshot > self.complete):
            acts += [CommitOutput(s, msg.snapshot) for s in self.graph.sinks]
        return acts


class RollbackFailedOnly(CheckpointCoordinator):
    """Only the failed instances roll back to the last complete snapshot; the rest run on."""

    def on_failure(self, ev: FailureDetected, view: ClusterView) -> list[CoordinatorAction]:
        acts = super().on_failure(ev, view)
        return [a for a in acts if not isinstance(a, Stop | Restart)
                or (isinstance(a, Restart) and a.instance in ev.instances)]


class AlignedNoBlock(CheckpointInstance):
    """Aligned mode: a channel whose token came is not blocked, so its later tuples leak in."""

    def aligned_token(self, ch: int, marker: Marker) -> None:
        super().aligned_token(ch, marker)
        held = self.blocked.pop(ch, None)
        for m in held or []:
            self.receive(ch, m)


class SnapshotLeftOpen(CheckpointInstance):
    """An instance persists its part of a snapshot but never leaves snapshotting: the phase
    stays open, so during: snapshotting faults never strike a later snapshot."""

    def _put(self, *acts: InstanceAction) -> None:
        super()._put(*(a for a in acts
                       if not (isinstance(a, DeclarePhase) and a.phase == SNAPSHOTTING
                               and not a.on)))


class TrustUnchecked(CheckpointCoordinator):
    """Restore trusts an unchecked object: a part that fails its check is restored empty."""

    def on_store_fault(self, ev: StoreFault, view: ClusterView) -> list[CoordinatorAction]:
        k = self.complete
        return [Stop(self.graph.order),
                *(Restart(i, restore=None if i == ev.instance else k or None)
                  for i in self.graph.order)]


class CollectRestorePoint(CheckpointCoordinator):
    """Collecting old snapshots deletes the newest complete one too, the one a rollback restores."""

    def _collect(self) -> list[CoordinatorAction]:
        acts = super()._collect()
        if self.complete == FINAL or self.replay_to is not None:
            return acts
        return [DiscardSnapshots(below=self.complete + 1)]


MUTANTS: tuple[Mutant, ...] = (
    Mutant("no-channel-state", NoChannelState.__doc__ or "", instance=NoChannelState,
           budget=10),
    Mutant("rewind-too-far", RewindTooFar.__doc__ or "", instance=RewindTooFar, budget=10),
    Mutant("commit-early", CommitEarly.__doc__ or "", coordinator=CommitEarly, budget=10),
    Mutant("rollback-failed-only", RollbackFailedOnly.__doc__ or "",
           coordinator=RollbackFailedOnly, budget=10),
    Mutant("aligned-no-block", AlignedNoBlock.__doc__ or "", instance=AlignedNoBlock,
           params={"alignment": "aligned"}, budget=10),
    Mutant("snapshot-left-open", " ".join((SnapshotLeftOpen.__doc__ or "").split()),
           instance=SnapshotLeftOpen, budget=10),
    Mutant("trust-unchecked", TrustUnchecked.__doc__ or "", coordinator=TrustUnchecked,
           budget=30, kinds=("crash", "corrupt")),
    Mutant("collect-restore-point", CollectRestorePoint.__doc__ or "",
           coordinator=CollectRestorePoint, budget=10),
)
