"""Planted bugs: each breaks exactly-once on some seeded schedule, so the conformance kit
must catch every one (``ftctl conformance -p protocol-skeleton``). Add one for each way
you know your protocol could go wrong; a mutant the kit cannot catch means the kit lacks
a topology or fault kind that exposes it, or it is no bug."""

from __future__ import annotations

from typing import Any

from protocols.contract import (
    BatchIn,
    ClusterView,
    CoordinatorAction,
    InstanceAction,
    Mutant,
    ReportIn,
)
from protocols.shared.logged import Ready

from .coordinator import Coordinator
from .instance import Instance


class NoUpstreamReplay(Coordinator):
    """A replacement's parents are never asked to resend what followed its snapshot."""

    def on_report(self, ev: ReportIn, view: ClusterView) -> list[CoordinatorAction]:
        return [] if isinstance(ev.msg, Ready) else super().on_report(ev, view)


class LogNotRestored(Instance):
    """A replacement comes back with an empty payload log: a child behind its snapshot
    waits for batches nobody can send."""

    def restore(self, blob: Any) -> None:
        super().restore({**blob, "log": {}})


class SinkForgetsVisible(Instance):
    """A restarted sink forgets what it made visible and shows the replay again."""

    def restore_visible(self, visible: Any) -> None:
        pass


class ArrivalOrder(Instance):
    """Inputs are read as they arrive, not in the rotation: a replacement reading them in
    another interleaving sends other batches under the numbers its children already have."""

    def on_batch(self, ev: BatchIn, now: float) -> list[InstanceAction]:
        ch = ev.channel
        if ev.batch.seq == self.received[ch] + 1 and len(self.core.inputs) > 1:
            self.turn = self.core.inputs.index(ch)  # whichever came first goes first
        return super().on_batch(ev, now)


def _doc(cls: type) -> str:
    return " ".join((cls.__doc__ or "").split())


MUTANTS: tuple[Mutant, ...] = (
    Mutant("no-upstream-replay", _doc(NoUpstreamReplay), coordinator=NoUpstreamReplay,
           budget=30),
    Mutant("log-not-restored", _doc(LogNotRestored), instance=LogNotRestored, budget=30),
    Mutant("sink-forgets-visible", _doc(SinkForgetsVisible), instance=SinkForgetsVisible,
           budget=30),
    Mutant("arrival-order", _doc(ArrivalOrder), instance=ArrivalOrder, budget=30),
)
