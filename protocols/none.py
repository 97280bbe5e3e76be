"""``none``: the at-most-once control.

A failed instance comes back empty; nothing is replayed. A source resumes after the
last offset it reported (like a consumer that commits offsets before processing), so
what was in flight or held in lost state is simply gone.
"""

from __future__ import annotations

from typing import Any

from protocols.base import (
    CoordinatorProtocol,
    InstanceProtocol,
    PlanStep,
    Start,
    Stop,
)


class NoneInstance(InstanceProtocol):
    def __init__(self, core: Any, params: Any, blob: Any, init: Any):
        super().__init__(core, params, blob, init)
        init = init or {}
        if core.is_source and "offset" in init:
            core.offset = max(core.lo, min(init["offset"], core.hi))
        for ch in init.get("ended", []):
            self.on_eos(ch)


class NoneCoordinator(CoordinatorProtocol):
    def __init__(self, graph: Any, params: Any):
        super().__init__(graph, params)
        self.offsets: dict[str, int] = {}

    def on_report(self, instance: str, kind: str, data: Any, now: float) -> list[PlanStep]:
        if kind == "offset":
            self.offsets[instance] = data
            return []
        return super().on_report(instance, kind, data, now)

    def on_failure(self, failed: set[str], now: float) -> list[PlanStep]:
        steps: list[PlanStep] = [Stop(sorted(failed))]
        for iid in sorted(failed):
            self.restarted.add(iid)
            self.eos_sent.discard(iid)
            init: dict[str, Any] = {"ended": self.ended_inputs(iid)}
            if iid in self.offsets:
                init["offset"] = self.offsets[iid]
            steps.append(Start(iid, init=init))
        return steps
