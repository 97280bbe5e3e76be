"""Clock faults on Spark: set through the target task's agent on its runtime clock.

The task's unit reads every event's time and arms every timer on that clock
(``ftctl/spark/clock_faults.py``); the system clock, the task's heartbeats and the
driver's timers keep true time. A fault lasts for the task it struck: the replacement
of a restarted instance starts on true time. A stall ends by itself.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import cast

from chaos.context import ClockDelivery, FaultContext, InjectRecord
from chaos.faults import ChaosFault, FaultError, NotRunning
from ftctl.config.fault_kinds import DriftParams, JumpParams, SkewParams, StallParams
from ftctl.kernel.clocks import ClockFault, Drift, Jump, Skew, Stall, fault_to_dict


class _ClockFault(ChaosFault):
    @abstractmethod
    def fault(self) -> ClockFault:
        """The clock fault this occurrence sets."""

    def inject(self, ctx: FaultContext) -> InjectRecord:
        if not isinstance(ctx, ClockDelivery):
            raise FaultError(f"{self.name} needs a host whose tasks keep a runtime clock")
        instance = self._instance(ctx)
        fault = self.fault()
        details = fault_to_dict(fault)
        details.pop("clock", None)
        record = self._record(ctx, instance, [], via="agent", **details)
        if not ctx.clock_fault(instance, fault):
            raise NotRunning(f"{instance} is not running")
        return record


class ClockSkew(_ClockFault):
    name = "clock-skew"

    def fault(self) -> ClockFault:
        return Skew(cast(SkewParams, self.params).offset)


class ClockDrift(_ClockFault):
    name = "clock-drift"

    def fault(self) -> ClockFault:
        return Drift(cast(DriftParams, self.params).rate)


class ClockJump(_ClockFault):
    name = "clock-jump"

    def fault(self) -> ClockFault:
        return Jump(cast(JumpParams, self.params).by)


class ClockStall(_ClockFault):
    name = "clock-stall"

    def fault(self) -> ClockFault:
        if self.duration is None:
            raise FaultError("clock-stall needs a duration")
        return Stall(self.duration, cast(StallParams, self.params).catch_up)
