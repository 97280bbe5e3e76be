"""``LineageInstance``: the logged channel machinery, and a sink slot that always exists."""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Mapping
from typing import Any, cast

from ftctl.runtime.instance import InstanceCore
from protocols.contract.actions import Chain
from protocols.contract.events import Started
from protocols.contract.names import InstanceId
from protocols.contract.params import NoParams
from protocols.contract.view import InstanceView
from protocols.shared.logged import SLOT, LoggedInstance, Ready
from protocols.shared.packed_counts import CountsChain, PackedCounts, fold_deltas, with_deltas

# A sink's visible counts (its only state: a purge recomputes the rest) are a base under
# ``SLOT`` and a chain of deltas after it: output j persists, under ``DELTA_REF + j``,
# the counts it changed. Storing every count with every output cost the square of the
# outputs (Nexmark q0, a million distinct records: 1.5 schedules a minute). A chain at
# its longest ends in a new base, which holds everything.
DELTA_REF = SLOT + 1
CHAIN_LENGTH = 64
SINK_REFS = tuple(range(DELTA_REF, DELTA_REF + CHAIN_LENGTH))


class LineageInstance(LoggedInstance[NoParams]):
    # Lineage never trims a payload log before the end: a purge may need any batch, so
    # the logs hold everything sent and are kept encoded.
    encoded_log = True
    # A purge resends whole histories: 256 batches per event keeps each event's decoding
    # and queued output small (25,600 votes on the sharder topology). At 50M votes one
    # event took 6.1 s, 256 a few ms each, and less time in all (benchmarks/resend_chunk.py).
    resend_chunk = 256

    def __init__(self, me: InstanceView, cores: Mapping[InstanceId, InstanceCore],
                 params: NoParams):
        super().__init__(me, cores, params)
        self.deltas = CountsChain(CHAIN_LENGTH)  # sinks
        # A sink after a purge, while the recomputation brings back what is already
        # visible: per identity, how many of its records are still to come before one
        # is new (its visible count less the records of it made since). It stands for
        # ``seen``, which lineage never stores and no longer keeps meanwhile: one lookup
        # a record where ``seen`` and ``emitted`` took three (a q0 sink's replay of a
        # million records was 40% of a schedule), and the counts are equal again once it
        # is empty, with no comparison of two dicts of a million counts.
        self.gap: dict[Any, int] | None = None

    def start(self, ev: Started) -> None:
        core = self.core
        if core.is_sink:
            if ev.restored is not None:
                self.emitted, self.packed = self.restore_counts(ev)
                self.gap = None
            # A base before any output: a slot must exist before any failure so a
            # replacement can always restore, and this incarnation's deltas may overwrite
            # the last one's only once a base holds them. The report below makes it
            # durable before anything else happens.
            self._base()
        if ev.reason == "restart":  # every restart is a purge's: the parents resend all
            self.report(Ready({ch: 1 for ch in core.inputs}))

    def restore_counts(self, ev: Started) -> tuple[dict[Any, int], PackedCounts]:
        """The base and every delta present, and the base's parts where they still
        hold them (``with_deltas``)."""
        assert ev.restored is not None
        packed = PackedCounts()
        return with_deltas(ev.restored["emitted"], ev.extra.values(), packed), packed

    def dedup(self, records: list[tuple[Any, Any]], idents: list[Hashable]
              ) -> tuple[list[tuple[Any, Any]], list[Hashable], list[Hashable],
                         list[Hashable]]:
        gap = self.gap
        if gap is None:  # the first batch after a purge: what ``seen`` lacks
            seen, emitted = self.seen, self.emitted
            gap = self.gap = dict(emitted) if not seen else {
                i: n - m for i, n in emitted.items() if (m := seen.get(i, 0)) < n}
        out, shown = [], []
        take = gap.pop
        for r, i in zip(records, idents, strict=True):
            g = take(i, 0)
            if g:  # one more of what is visible: suppressed
                if g > 1:
                    gap[i] = g - 1
            else:  # as many made as are visible: this one is new
                out.append(r)
                shown.append(i)
        emitted = self.emitted
        before = len(emitted)
        # Counter's own method on a plain dict, in C (``LoggedInstance.count_all``).
        Counter.update(cast("Counter[Hashable]", emitted), shown)
        if len(emitted) - before != len(shown):  # a count already there rose
            self.packed.stale()
        return out, shown, [], []

    def rejoin(self, suppressed: int) -> None:
        if not self.gap:  # the recomputation caught up: ``seen`` is ``emitted`` again
            self.gap = None
            self.counts_joined()

    def _base(self) -> None:
        # What the last output touched, not yet in a delta: its parts join the base's.
        self.deltas.take(self.emitted, self.packed)
        self.persist(SLOT, {"emitted": self.packed.pack(self.emitted)})
        self.deltas.restart()

    def counted(self, idents: list[Any], shown: list[Any], first: bool) -> None:
        # Only visible counts are stored (a purge recomputes ``seen``): a replay after a
        # purge suppresses nearly everything, and a million suppressed identities in the
        # next delta were most of a Nexmark q0 schedule.
        self.deltas.touch(shown, first)

    def persist_sink(self, out: list[tuple[Any, Any]]) -> None:
        delta = self.deltas.next(self.emitted, self.packed)
        if delta is None:
            self._base()
            return
        j, counts = delta
        self.persist(DELTA_REF + j, counts, Chain("visible", fold_deltas))
