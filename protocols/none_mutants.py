"""Planted bugs of ``none``: each makes a restart output something twice.

``none`` promises at most once where no operator keeps state, so every mutant here makes
a restarted source re-read input a replacement must not see again; the conformance kit
catches it on a schedule where ``none`` itself holds (a stateless topology such as
replica-chain).
"""

from __future__ import annotations

from dataclasses import replace

from protocols.contract.actions import CoordinatorAction, InstanceAction, Persist, Restart
from protocols.contract.events import FailureDetected, ReportIn, SourceReady, Started
from protocols.contract.logic import InstanceLogic
from protocols.contract.messages import Offset
from protocols.contract.names import InstanceId
from protocols.contract.params import NoParams
from protocols.contract.spec import Mutant
from protocols.contract.view import ClusterView, GraphView
from protocols.none import NoneCoordinator, NoneInstance


class SourceFromStart(NoneInstance):
    """A restarted source ignores its stored offset and reads from its first record."""

    def resume_at(self, stored: int, lo: int, hi: int) -> int:
        return lo


class RewindOneBatch(NoneInstance):
    """A restarted source resumes one batch before its stored offset."""

    def on_started(self, ev: Started, now: float) -> list[InstanceAction]:
        acts = super().on_started(ev, now)
        core = self.cores[ev.slot]
        if core.is_source and ev.restored is not None:
            core.seek(max(core.lo, core.offset - core.batch_size))
        return acts


class FirstOffsetKept(NoneInstance):
    """A source stores the offset of its first batch only, not the latest one."""

    stored = False

    def on_source(self, ev: SourceReady, now: float) -> list[InstanceAction]:
        acts = super().on_source(ev, now)
        if self.stored:
            return [a for a in acts if type(a) is not Persist]
        self.stored = True
        return acts


class OffsetOneReportBehind(NoneInstance):
    """A source stores the offset before its batch instead of the one after it."""

    def offset_to_store(self, start: int, end: int) -> int:
        return start


class ForgetOffsetsOnFailure(NoneCoordinator):
    """Every failure forgets the stored offsets, so any restarted source reads from the start."""

    def restore_from(self, instance: InstanceId, view: ClusterView) -> int | None:
        return None


class OffsetReportedAfterBatch(NoneInstance):
    """A source commits its offset by a report sent after the batch, not persisted before it."""

    def on_started(self, ev: Started, now: float) -> list[InstanceAction]:
        core = self.cores[ev.slot]
        if core.is_source and isinstance(ev.init, Offset):
            core.seek(self.resume_at(ev.init.offset, core.lo, core.hi))
        return []

    def on_source(self, ev: SourceReady, now: float) -> list[InstanceAction]:
        return InstanceLogic.on_source(self, ev, now)  # the batch, then Report(Offset)


class ReportedOffsets(NoneCoordinator):
    """Restarts a source after the last offset it reported (with OffsetReportedAfterBatch)."""

    def __init__(self, graph: GraphView, params: NoParams):
        super().__init__(graph, params)
        self.offsets: dict[InstanceId, int] = {}

    def on_report(self, ev: ReportIn, view: ClusterView) -> list[CoordinatorAction]:
        if isinstance(ev.msg, Offset):
            self.offsets[ev.instance] = ev.msg.offset
            return []
        return super().on_report(ev, view)

    def on_failure(self, ev: FailureDetected, view: ClusterView) -> list[CoordinatorAction]:
        acts = super().on_failure(ev, view)
        return [replace(a, init=Offset(self.offsets[a.instance]))
                if type(a) is Restart and a.instance in self.offsets else a for a in acts]


MUTANTS: tuple[Mutant, ...] = (
    Mutant("source-from-start", SourceFromStart.__doc__ or "", instance=SourceFromStart,
           budget=6),
    Mutant("rewind-one-batch", RewindOneBatch.__doc__ or "", instance=RewindOneBatch,
           budget=6),
    Mutant("first-offset-kept", FirstOffsetKept.__doc__ or "", instance=FirstOffsetKept,
           budget=6),
    Mutant("offset-one-report-behind", OffsetOneReportBehind.__doc__ or "",
           instance=OffsetOneReportBehind, budget=6),
    Mutant("forget-offsets-on-failure", ForgetOffsetsOnFailure.__doc__ or "",
           coordinator=ForgetOffsetsOnFailure, budget=6),
    # none before its fix: a crash while the report travels loses it, and the batch is
    # sent again (replica-chain seed 3); in simulation a step's actions happen together,
    # so only a commit outside the step can repeat a batch.
    Mutant("offset-reported-after-batch", OffsetReportedAfterBatch.__doc__ or "",
           instance=OffsetReportedAfterBatch, coordinator=ReportedOffsets, budget=6),
)
