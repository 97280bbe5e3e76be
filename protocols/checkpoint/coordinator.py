"""The coordinator side of ``checkpoint``: complete snapshots, commits, global rollback.

Snapshot ``i`` is complete when every instance persisted it; then every sink's output
staged up to ``i`` is committed. Recovery is a global rollback: every instance restarts
from the latest complete snapshot, sources rewind to its offsets, and what was persisted
or staged after it is discarded.
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
)
from protocols.contract.events import FailureDetected, ReportIn
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
        done = sorted(s for s in self.persisted if s <= sid)
        for s in done:
            del self.persisted[s]
        return [*opened, *(CommitOutput(s, sid) for s in self.graph.sinks),
                Note("snapshot-complete", {"snapshot": sid}),
                *(DeclarePhase(SNAPSHOTTING, False, s) for s in done)]

    def on_failure(self, ev: FailureDetected, view: ClusterView) -> list[CoordinatorAction]:
        failed = sorted(ev.instances)
        if self.complete == FINAL:
            return [Note("ignored", {"failed": failed, "reason": "run finished"})]
        self.incarnation += 1
        dropped = [DeclarePhase(SNAPSHOTTING, False, s) for s in sorted(self.persisted)]
        self.persisted.clear()
        k = self.complete
        order = self.graph.order
        return [
            *dropped,
            Stop(order),
            DiscardSnapshots(after=k),  # every instance's, in one pass over the store
            *(DiscardStaged(s, after=k) for s in self.graph.sinks),
            Note("rollback", {"failed": failed, "snapshot": k, "incarnation": self.incarnation}),
            *(Restart(i, restore=k or None) for i in order),
        ]

    def finished(self, view: ClusterView) -> bool:
        return self.complete == FINAL
