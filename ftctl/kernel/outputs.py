"""Sink output: staged per (sink, epoch) and made visible by per-sink commits."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from ftctl.store import SinkStore


class Outputs:
    """Staged epochs per sink, committed in epoch order into the host's ``SinkStore``."""

    def __init__(self, sinks: SinkStore):
        self.sinks = sinks
        self.staged: dict[str, dict[int, list[tuple[Any, Any]]]] = defaultdict(dict)

    def stage(self, sink: str, epoch: int, records: Sequence[tuple[Any, Any]]) -> None:
        self.staged[sink].setdefault(epoch, []).extend(records)

    def discard(self, sink: str, after: int) -> None:
        staged = self.staged[sink]
        for epoch in [e for e in staged if e > after]:
            del staged[epoch]

    def commit(self, sink: str, upto: int) -> int | None:
        """Make ``sink``'s output up to ``upto`` visible; monotone, idempotent per epoch.
        Returns how many records that made visible; None when no staged epoch was due."""
        staged = self.staged[sink]
        due = sorted(e for e in staged if e <= upto)
        records = 0
        for epoch in due:
            # SinkStore ignores ids <= its last commit (0 initially): epoch 0 commits as 1.
            batch = staged.pop(epoch)
            if self.sinks.commit(sink, epoch + 1, batch):
                records += len(batch)
        return records if due else None

    def committed(self, sink: str) -> int:
        return self.sinks.committed.get(sink, 0) - 1
