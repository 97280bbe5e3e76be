"""Planted bugs of ``lineage``: each breaks exactly-once on some seeded schedule."""

from __future__ import annotations

from typing import Any

from ftctl.runtime.actions import Emit
from ftctl.runtime.messages import Batch
from protocols.base import Start, Stop
from protocols.contract.spec import Mutant
from protocols.lineage import LineageCoordinator, LineageInstance


class NoSinkDedup(LineageInstance):
    """A sink makes every record visible again when the purged graph recomputes it."""

    def flush_sink(self) -> None:
        out, self.core.pending_output = self.core.pending_output, []
        if out:
            self.core.actions.append(Emit(self.core.id, out))


class SinkForgetsVisible(LineageInstance):
    """A restarted sink ignores its stored visible counts and starts suppressing nothing."""

    def __init__(self, core: Any, params: Any, blob: Any, init: Any):
        super().__init__(core, params, None if core.is_sink else blob, init)


class PurgeFailedOnly(LineageCoordinator):
    """A failure purges the failed instances but not their downstream."""

    def on_failure(self, failed: set[str], now: float) -> list[Any]:
        ended = self.eos_sent - failed
        steps = super().on_failure(failed, now)
        self.eos_sent = ended
        return [Stop(sorted(failed)) if isinstance(s, Stop) else s for s in steps
                if not isinstance(s, Start) or s.instance in failed]


class ResendFromSecond(LineageCoordinator):
    """A purged instance's parents resend their history from the second batch, not the first."""

    def on_report(self, instance: str, kind: str, data: Any, now: float) -> list[Any]:
        if kind == "ready":
            data = {ch: start + 1 for ch, start in data.items()}
        return super().on_report(instance, kind, data, now)


class LogKeepsTail(LineageInstance):
    """The payload log keeps only the newest 10 batches per channel, as if garbage-collected."""

    def _on_send(self, ch: int, batch: Batch) -> None:
        super()._on_send(ch, batch)
        if len(self.plog[ch]) > 10:
            del self.plog[ch][0]


MUTANTS: tuple[Mutant, ...] = (
    Mutant("no-sink-dedup", NoSinkDedup.__doc__ or "", instance=NoSinkDedup, budget=10),
    Mutant("sink-forgets-visible", SinkForgetsVisible.__doc__ or "",
           instance=SinkForgetsVisible, budget=10),
    Mutant("purge-failed-only", PurgeFailedOnly.__doc__ or "", coordinator=PurgeFailedOnly,
           budget=10),
    Mutant("resend-from-second", ResendFromSecond.__doc__ or "",
           coordinator=ResendFromSecond, budget=10),
    Mutant("log-keeps-tail", LogKeepsTail.__doc__ or "", instance=LogKeepsTail, budget=10),
)
