"""Sink output: staged per (sink, epoch) and made visible by per-sink commits."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from ftctl.spill import PickledChunk
from ftctl.store import SinkStore


class Outputs:
    """Staged epochs per sink, committed in epoch order into the host's ``SinkStore``."""

    def __init__(self, sinks: SinkStore):
        self.sinks = sinks
        # Per sink and epoch, its records in the order staged: lists of records, and
        # chunks a Spark sink pickled (kept as bytes until they are committed).
        self.staged: dict[str, dict[int, list[list[tuple[Any, Any]] | PickledChunk]]] = (
            defaultdict(dict))

    def stage(self, sink: str, epoch: int, records: Sequence[tuple[Any, Any]]) -> None:
        parts = self.staged[sink].setdefault(epoch, [])
        if parts and isinstance(parts[-1], list):
            parts[-1].extend(records)
        else:
            parts.append(list(records))

    def stage_pickled(self, sink: str, epoch: int, chunk: PickledChunk) -> None:
        self.staged[sink].setdefault(epoch, []).append(chunk)

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
            parts = staged.pop(epoch)
            if self.sinks.commit_parts(sink, epoch + 1, parts):
                records += sum(len(p) for p in parts)
        return records if due else None

    def committed(self, sink: str) -> int:
        return self.sinks.committed.get(sink, 0) - 1
