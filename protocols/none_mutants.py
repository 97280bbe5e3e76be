"""Planted bugs of ``none``: each makes a restart output something twice.

``none`` promises at most once, so every mutant here replays input a replacement must not
see again; the conformance kit catches it on a schedule where ``none`` itself holds.
"""

from __future__ import annotations

from protocols.contract.actions import CoordinatorAction, InstanceAction
from protocols.contract.events import FailureDetected, ReportIn, Started
from protocols.contract.messages import Offset
from protocols.contract.names import InstanceId
from protocols.contract.params import NoParams
from protocols.contract.spec import Mutant
from protocols.contract.view import ClusterView, GraphView
from protocols.none import NoneCoordinator, NoneInstance


class SourceFromStart(NoneInstance):
    """A restarted source ignores its committed offset and reads from its first record."""

    def resume_at(self, stored: int, lo: int, hi: int) -> int:
        return lo


class RewindOneBatch(NoneInstance):
    """A restarted source resumes one batch before its committed offset."""

    def on_started(self, ev: Started, now: float) -> list[InstanceAction]:
        acts = super().on_started(ev, now)
        core = self.cores[ev.slot]
        if core.is_source and ev.init is not None:
            core.offset = max(core.lo, core.offset - core.batch_size)
        return acts


class FirstOffsetKept(NoneCoordinator):
    """The coordinator keeps the first offset a source reported, not the latest."""

    def on_report(self, ev: ReportIn, view: ClusterView) -> list[CoordinatorAction]:
        if isinstance(ev.msg, Offset) and ev.instance in self.offsets:
            return []
        return super().on_report(ev, view)


class OffsetOneReportBehind(NoneCoordinator):
    """The coordinator commits a source's previous report instead of its latest one."""

    def __init__(self, graph: GraphView, params: NoParams):
        super().__init__(graph, params)
        self.latest: dict[InstanceId, int] = {}

    def on_report(self, ev: ReportIn, view: ClusterView) -> list[CoordinatorAction]:
        if isinstance(ev.msg, Offset):
            if ev.instance in self.latest:
                self.offsets[ev.instance] = self.latest[ev.instance]
            self.latest[ev.instance] = ev.msg.offset
            return []
        return super().on_report(ev, view)


class ForgetOffsetsOnFailure(NoneCoordinator):
    """Every failure wipes the committed offsets, so any restarted source reads from the start."""

    def on_failure(self, ev: FailureDetected, view: ClusterView) -> list[CoordinatorAction]:
        self.offsets.clear()
        return super().on_failure(ev, view)


MUTANTS: tuple[Mutant, ...] = (
    Mutant("source-from-start", SourceFromStart.__doc__ or "", instance=SourceFromStart,
           budget=6),
    Mutant("rewind-one-batch", RewindOneBatch.__doc__ or "", instance=RewindOneBatch,
           budget=6),
    Mutant("first-offset-kept", FirstOffsetKept.__doc__ or "", coordinator=FirstOffsetKept,
           budget=6),
    Mutant("offset-one-report-behind", OffsetOneReportBehind.__doc__ or "",
           coordinator=OffsetOneReportBehind, budget=6),
    Mutant("forget-offsets-on-failure", ForgetOffsetsOnFailure.__doc__ or "",
           coordinator=ForgetOffsetsOnFailure, budget=6),
)
