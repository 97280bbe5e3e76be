"""A run extension that keeps what a run showed, for the commands that read runs back
(``ftctl compare``, the Spark figures): it runs the chaos extension when the run has a
fault schedule, keeps the host's result, and hands ``keep`` the clock shift from the
host's clock (latency samples, metrics) to the run store's (history, fault times)."""

from __future__ import annotations

from typing import Any

from ftctl.run.chaos import ChaosExtension
from ftctl.run.execute import RunContext, RunExtension
from ftctl.spark.host import HostResult


class Capture(RunExtension):
    """``chaos`` (if any) runs first in every hook; subclasses read the run in ``keep``."""

    def __init__(self, chaos: ChaosExtension | None = None):
        self.chaos = chaos
        self.result: HostResult | None = None

    @property
    def shift(self) -> float:
        """Host clock -> the run store's clock; set once the host is done. Without a fault
        schedule nothing aligns the clocks, and the figures that read such runs compare
        host-clock times only with each other."""
        return self.chaos.shift if self.chaos is not None else 0.0

    def attach(self, ctx: RunContext) -> None:
        if self.chaos is not None:
            self.chaos.attach(ctx)

    def host_done(self, ctx: RunContext, result: HostResult) -> None:
        if self.chaos is not None:
            self.chaos.host_done(ctx, result)
        self.result = result

    def summarize(self, ctx: RunContext, result: HostResult, summary: dict[str, Any]) -> None:
        if self.chaos is not None:
            self.chaos.summarize(ctx, result, summary)
        self.keep(ctx, result, summary)

    def keep(self, ctx: RunContext, result: HostResult, summary: dict[str, Any]) -> None:
        """The run is verified and ``summary`` complete (the chaos extension's part too)."""

    def print(self, summary: dict[str, Any]) -> None:
        if self.chaos is not None:
            self.chaos.print(summary)

    def close(self) -> None:
        if self.chaos is not None:
            self.chaos.close()
