"""The coordinator side of ``checkpoint``: complete snapshots, commits, global rollback.

Snapshot ``i`` is complete when every instance persisted it; then every sink's output
staged up to ``i`` is committed. Recovery is a global rollback: every instance restarts
from the latest complete snapshot, sources rewind to its offsets, and what was persisted
or staged after it is discarded.

Only the newest ``keep`` complete snapshots stay in the store: when one completes, every
instance's parts of older ones are deleted (``DiscardSnapshots(below=...)``), or the
store would grow with the input (17 GB, three quarters into a 100M-line wordcount run).

A part of the latest complete snapshot ``k`` that does not check (``StoreFault``): the
rollback falls back to the newest older kept complete snapshot ``k'`` (or the initial
state) whose parts are not known bad (aligned snapshots only). Output up to ``k`` is committed
already, so the replay must cut its next snapshot exactly where ``k`` was cut: each
source gets its own part of ``k``
(``Restart.extra``) and injects token ``k`` at that offset, no token before it. The
replayed epoch ``k`` then holds what epochs ``k'+1..k`` held, and its commit is a no-op
(commits are idempotent per epoch): aligned, an epoch's output is a function of the input
before its token on every channel. Without every source's part of ``k`` the offsets are
unknown, and unaligned a sink's cut depends on how its inputs interleaved: the run stops,
naming the object.
"""

from __future__ import annotations

from protocols.checkpoint.instance import FINAL
from protocols.checkpoint.params import CheckpointParams
from protocols.contract.actions import (
    SNAPSHOTTING,
    CommitOutput,
    CoordinatorAction,
    DeclarePhase,
    DiscardSnapshots,
    DiscardStaged,
    Note,
    Restart,
    Stop,
    StopRun,
)
from protocols.contract.events import FailureDetected, ReportIn, StoreFault
from protocols.contract.logic import CoordinatorLogic
from protocols.contract.messages import Persisted
from protocols.contract.names import InstanceId
from protocols.contract.view import ClusterView, GraphView


class CheckpointCoordinator(CoordinatorLogic[CheckpointParams]):
    def __init__(self, graph: GraphView, params: CheckpointParams):
        super().__init__(graph, params)
        self.persisted: dict[int, set[InstanceId]] = {}
        self.complete = 0  # 0: the initial state, complete by definition
        self.everyone = set(graph.order)
        self.incarnation = 0
        self.completed: list[int] = []  # the complete snapshots kept, oldest first
        self.bad: set[int] = set()  # snapshots with a part that did not check
        # A fallback under way: the complete snapshot whose cut the replay reproduces.
        self.replay_to: int | None = None

    def on_report(self, ev: ReportIn, view: ClusterView) -> list[CoordinatorAction]:
        # End of stream needs nothing: a rollback restarts everyone, so no replacement
        # ever waits for an end-of-stream marker lost with its predecessor.
        if not isinstance(ev.msg, Persisted):
            return []
        sid = ev.msg.snapshot
        if sid <= self.complete:
            return []
        # The global snapshot is in progress from its first part persisted until it is
        # complete (or a rollback drops it): the coordinator's snapshotting occurrence.
        opened: list[CoordinatorAction] = ([DeclarePhase(SNAPSHOTTING, True, sid)]
                                           if sid not in self.persisted else [])
        got = self.persisted.setdefault(sid, set())
        got.add(ev.instance)
        # An instance that ended never persists later regular ids: those never complete,
        # and the final snapshot (aligned at end of stream) is the next to complete.
        if got != self.everyone:
            return opened
        # Snapshots complete in id order on every instance, so every older one is done too.
        self.complete = sid
        if sid not in self.completed:
            self.completed.append(sid)
        if sid == self.replay_to:  # the fallback's replay reached where it fell from
            self.replay_to = None
        done = sorted(s for s in self.persisted if s <= sid)
        for s in done:
            del self.persisted[s]
        return [*opened, *(CommitOutput(s, sid) for s in self.graph.sinks),
                Note("snapshot-complete", {"snapshot": sid}),
                *(DeclarePhase(SNAPSHOTTING, False, s) for s in done), *self._collect()]

    def _collect(self) -> list[CoordinatorAction]:
        """Delete the complete snapshots past the newest ``keep`` (and any part older).
        A fallback under way cuts again the newest (``replay_to``): it is always kept."""
        if len(self.completed) <= self.params.keep:
            return []
        del self.completed[:-self.params.keep]
        return [DiscardSnapshots(below=self.completed[0])]

    def on_failure(self, ev: FailureDetected, view: ClusterView) -> list[CoordinatorAction]:
        failed = sorted(ev.instances)
        if self.complete == FINAL:
            return [Note("ignored", {"failed": failed, "reason": "run finished"})]
        self.incarnation += 1
        dropped = [DeclarePhase(SNAPSHOTTING, False, s) for s in sorted(self.persisted)]
        self.persisted.clear()
        k = self.complete
        order = self.graph.order
        if self.replay_to is not None and self._cut_unknown(view):
            return [*dropped, StopRun(f"missing snapshot {self.replay_to} of a source",
                                      snapshot=self.replay_to)]
        return [
            *dropped,
            Stop(order),
            # every instance's, in one pass over the store; during a fallback the parts of
            # the snapshot being cut again stay: the sources need theirs
            DiscardSnapshots(after=k if self.replay_to is None else self.replay_to),
            *(DiscardStaged(s, after=k) for s in self.graph.sinks),
            Note("rollback", {"failed": failed, "snapshot": k, "incarnation": self.incarnation}),
            *self._restarts(k),
        ]

    def _cut_unknown(self, view: ClusterView) -> bool:
        """Whether a source lacks its part of the snapshot a fallback must cut again."""
        return any(self.replay_to not in view.stored(s) for s in self.graph.sources)

    def _restarts(self, k: int) -> list[CoordinatorAction]:
        """Everyone restarts from ``k``; during a fallback the sources also get their part
        of the snapshot the replay must cut again."""
        extra = () if self.replay_to is None else (self.replay_to,)
        return [Restart(i, restore=k or None,
                        extra=extra if i in self.graph.sources else ())
                for i in self.graph.order]

    def on_store_fault(self, ev: StoreFault, view: ClusterView) -> list[CoordinatorAction]:
        k = self.complete if self.replay_to is None else self.replay_to
        stop = StopRun(f"{ev.kind} snapshot {ev.snapshot} of {ev.instance}", ev.instance,
                       ev.snapshot)
        if (ev.snapshot == self.replay_to or self.complete == FINAL
                or ev.kind == "unavailable" or self.params.alignment != "aligned"):
            # a source's part of k: where to cut the replay is unknown. Unaligned, what a
            # sink made visible up to k depends on how its inputs interleaved before the
            # first token k: no replay is sure to cut it there again.
            return [stop]
        self.bad.add(ev.snapshot)
        self.replay_to = k
        if self._cut_unknown(view):
            return [stop]
        older = [c for c in self.completed if c < min(k, ev.snapshot) and c not in self.bad]
        back = max(older, default=0)
        self.incarnation += 1
        # the snapshots in progress are dropped with the rollback: their phases close
        dropped = [DeclarePhase(SNAPSHOTTING, False, s) for s in sorted(self.persisted)]
        self.persisted.clear()
        self.complete = back
        order = self.graph.order
        return [
            *dropped,
            Stop(order),
            *(DiscardStaged(s, after=back) for s in self.graph.sinks),
            Note("fallback", {"bad": ev.snapshot, "instance": ev.instance,
                              "snapshot": back, "replay_to": k}),
            *self._restarts(back),
        ]

    def finished(self, view: ClusterView) -> bool:
        return self.complete == FINAL
