"""Sink output: staged per (sink, epoch) and made visible by per-sink commits."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from ftctl.store import SinkStore, SnapshotStore


class Outputs:
    """Staged epochs per sink, committed in epoch order into the host's ``SinkStore``.

    ``legacy_blobs``: a protocol written against ``protocols.base`` keeps a sink's output
    in its snapshot blobs (``blob["output"]``, checkpoint's layout); a commit reads it
    from there. Ported protocols stage with ``StageOutput`` instead.
    """

    def __init__(self, sinks: SinkStore, store: SnapshotStore, legacy_blobs: bool = False):
        self.sinks = sinks
        self.store = store
        self.legacy_blobs = legacy_blobs
        self.staged: dict[str, dict[int, list[tuple[Any, Any]]]] = defaultdict(dict)

    def stage(self, sink: str, epoch: int, records: Sequence[tuple[Any, Any]]) -> None:
        self.staged[sink].setdefault(epoch, []).extend(records)

    def discard(self, sink: str, after: int) -> None:
        staged = self.staged[sink]
        for epoch in [e for e in staged if e > after]:
            del staged[epoch]

    def commit(self, sink: str, upto: int) -> None:
        """Make ``sink``'s output up to ``upto`` visible; monotone, idempotent per epoch."""
        if self.legacy_blobs:
            commit_epochs(self.store, self.sinks, sink, upto)
            return
        staged = self.staged[sink]
        for epoch in sorted(e for e in staged if e <= upto):
            # SinkStore ignores ids <= its last commit (0 initially): epoch 0 commits as 1.
            self.sinks.commit(sink, epoch + 1, staged.pop(epoch))

    def committed(self, sink: str) -> int:
        done = self.sinks.committed.get(sink, 0)
        return done if self.legacy_blobs else done - 1


def commit_epochs(store: SnapshotStore, sinks: SinkStore, sink: str, upto: int) -> None:
    """Make a sink's output visible up to snapshot ``upto``, epoch by epoch, from the
    sink's snapshot blobs (the legacy layout, ``blob["output"]``).

    The sink's part of every snapshot id up to ``upto`` lies before that complete cut,
    including ids whose own global snapshot never completed.
    """
    done = sinks.committed.get(sink, 0)
    for sid in store.snapshots_of(sink):
        if done < sid <= upto:
            sinks.commit(sink, sid, store.get(sid, sink)["output"])
