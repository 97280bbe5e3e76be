"""Planted bugs of ``lineage``: each breaks exactly-once on some seeded schedule."""

from __future__ import annotations

import dataclasses
from typing import Any

from ftctl.runtime.messages import Batch
from protocols.contract.actions import CoordinatorAction, Emit, Restart, Stop
from protocols.contract.events import FailureDetected, ReportIn, Started
from protocols.contract.spec import Mutant
from protocols.contract.view import ClusterView
from protocols.lineage.coordinator import LineageCoordinator
from protocols.lineage.instance import LineageInstance
from protocols.shared.logged import Ready
from protocols.shared.packed_counts import PackedCounts


class NoSinkDedup(LineageInstance):
    """A sink makes every record visible again when the purged graph recomputes it."""

    def flush_sink(self) -> None:
        out = self.take_sink_records()
        if out:
            self.out.append(Emit(self.me.id, out))


class SinkDedupPerKey(LineageInstance):
    """A multiset sink counts visible records per key, not per record: a recomputation
    that brings a key's records in another order hides new ones behind old (spec causal.md E4).
    Only the join topologies send one key with different values to a multiset sink."""

    def __init__(self, *args: Any):
        super().__init__(*args)
        self.identity = _key_only


def _key_only(k: Any, v: Any) -> Any:
    return k


class SinkForgetsVisible(LineageInstance):
    """A restarted sink ignores its stored visible counts and starts suppressing nothing."""

    def start(self, ev: Started) -> None:
        super().start(dataclasses.replace(ev, restored=None) if self.core.is_sink else ev)


class PurgeFailedOnly(LineageCoordinator):
    """A failure purges the failed instances but not their downstream."""

    def on_failure(self, ev: FailureDetected, view: ClusterView) -> list[CoordinatorAction]:
        failed = ev.instances
        ended = self.ended - failed
        acts = super().on_failure(ev, view)
        self.ended = ended
        return [Stop(tuple(sorted(failed))) if isinstance(a, Stop) else a for a in acts
                if not isinstance(a, Restart) or a.instance in failed]


class ResendFromSecond(LineageCoordinator):
    """A purged instance's parents resend their history from the second batch, not the first."""

    def on_report(self, ev: ReportIn, view: ClusterView) -> list[CoordinatorAction]:
        if isinstance(ev.msg, Ready):
            ev = dataclasses.replace(
                ev, msg=Ready({ch: start + 1 for ch, start in ev.msg.starts.items()}))
        return super().on_report(ev, view)


class LogKeepsTail(LineageInstance):
    """The payload log keeps only the newest 10 batches per channel, as if garbage-collected."""

    def sent(self, ch: int, batch: Batch) -> None:
        super().sent(ch, batch)
        if len(self.plog[ch]) > 10:
            self.plog[ch].drop_oldest()


class VisibleBeforeDurable(LineageInstance):
    """A sink makes output visible before the state that counts it is durable: a crash
    that loses its unsynced writes leaves output its replacement makes again."""

    def flush_sink(self) -> None:
        n = len(self.out)
        super().flush_sink()
        new = self.out[n:]
        if len(new) == 2 and isinstance(new[1], Emit):  # [Persist, Emit] -> [Emit, Persist]
            self.out[n:] = [new[1], new[0]]


class SinkSkipsDeltas(LineageInstance):
    """A restarted sink restores its base of visible counts but not the deltas after it."""

    def restore_counts(self, ev: Started) -> tuple[dict[Any, int], PackedCounts]:
        return super().restore_counts(dataclasses.replace(ev, extra={}))


MUTANTS: tuple[Mutant, ...] = (
    Mutant("no-sink-dedup", NoSinkDedup.__doc__ or "", instance=NoSinkDedup, budget=10),
    Mutant("sink-forgets-visible", SinkForgetsVisible.__doc__ or "",
           instance=SinkForgetsVisible, budget=10),
    Mutant("purge-failed-only", PurgeFailedOnly.__doc__ or "", coordinator=PurgeFailedOnly,
           budget=10),
    Mutant("resend-from-second", ResendFromSecond.__doc__ or "",
           coordinator=ResendFromSecond, budget=10),
    Mutant("log-keeps-tail", LogKeepsTail.__doc__ or "", instance=LogKeepsTail, budget=10),
    Mutant("sink-dedup-per-key", " ".join((SinkDedupPerKey.__doc__ or "").split()),
           instance=SinkDedupPerKey, budget=10),
    Mutant("visible-before-durable", " ".join((VisibleBeforeDurable.__doc__ or "").split()),
           instance=VisibleBeforeDurable, budget=30, kinds=("crash", "lose-unsynced")),
    Mutant("sink-skips-deltas", SinkSkipsDeltas.__doc__ or "", instance=SinkSkipsDeltas,
           budget=10),
)
