"""Planted bugs of ``none``: each makes a restart output something twice.

``none`` promises at most once, so every mutant here replays input a replacement must not
see again; the conformance kit catches it on a schedule where ``none`` itself holds.
"""

from __future__ import annotations

from typing import Any

from protocols.contract.spec import Mutant
from protocols.none import NoneCoordinator, NoneInstance


class SourceFromStart(NoneInstance):
    """A restarted source ignores its committed offset and reads from its first record."""

    def __init__(self, core: Any, params: Any, blob: Any, init: Any):
        super().__init__(core, params, blob, init)
        if core.is_source:
            core.offset = core.lo


class RewindOneBatch(NoneInstance):
    """A restarted source resumes one batch before its committed offset."""

    def __init__(self, core: Any, params: Any, blob: Any, init: Any):
        super().__init__(core, params, blob, init)
        if core.is_source and init and "offset" in init:
            core.offset = max(core.lo, core.offset - core.batch_size)


class FirstOffsetKept(NoneCoordinator):
    """The coordinator keeps the first offset a source reported, not the latest."""

    def on_report(self, instance: str, kind: str, data: Any, now: float) -> list[Any]:
        if kind == "offset" and instance in self.offsets:
            return []
        return super().on_report(instance, kind, data, now)


class OffsetOneReportBehind(NoneCoordinator):
    """The coordinator commits a source's previous report instead of its latest one."""

    def __init__(self, graph: Any, params: Any):
        super().__init__(graph, params)
        self.latest: dict[str, int] = {}

    def on_report(self, instance: str, kind: str, data: Any, now: float) -> list[Any]:
        if kind == "offset":
            if instance in self.latest:
                self.offsets[instance] = self.latest[instance]
            self.latest[instance] = data
            return []
        return super().on_report(instance, kind, data, now)


class ForgetOffsetsOnFailure(NoneCoordinator):
    """Every failure wipes the committed offsets, so any restarted source reads from the start."""

    def on_failure(self, failed: set[str], now: float) -> list[Any]:
        self.offsets.clear()
        return super().on_failure(failed, now)


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
