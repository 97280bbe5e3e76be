"""``LineageCoordinator``: a failure purges the failed instances' downstream."""

from __future__ import annotations

from protocols.contract.actions import (
    PURGING,
    Control,
    CoordinatorAction,
    DeclarePhase,
    Note,
    Restart,
    Stop,
)
from protocols.contract.events import FailureDetected, ReportIn
from protocols.contract.logic import CoordinatorLogic
from protocols.contract.messages import Ended
from protocols.contract.names import InstanceId
from protocols.contract.params import NoParams
from protocols.contract.view import ClusterView, GraphView
from protocols.lineage.instance import SINK_REFS
from protocols.shared.logged import SLOT, Ready, Resend


class LineageCoordinator(CoordinatorLogic[NoParams]):
    def __init__(self, graph: GraphView, params: NoParams):
        super().__init__(graph, params)
        # Purged instances not ready yet: ``purging`` is open (keyed by the purge that
        # opened it) until every one has asked its parents to resend.
        self.unready: set[str] = set()
        self.purges = 0

    def on_report(self, ev: ReportIn, view: ClusterView) -> list[CoordinatorAction]:
        msg = ev.msg
        if isinstance(msg, Ready):
            acts = [self._resend(ch, start) for ch, start in msg.starts.items()]
            return acts + self._ready(ev.instance)
        if isinstance(msg, Ended):
            # A purged instance waits for its parents' resend, end of stream included:
            # no input is ever ended for it by the coordinator.
            self.ended.add(ev.instance)
        return []

    def _ready(self, iid: str) -> list[CoordinatorAction]:
        if iid not in self.unready:
            return []
        self.unready.discard(iid)
        return [] if self.unready else [DeclarePhase(PURGING, False, self.purges)]

    def _resend(self, ch: int, start: int) -> CoordinatorAction:
        return Control(InstanceId(self.graph.channels[ch].src), Resend(ch, start))

    def on_failure(self, ev: FailureDetected, view: ClusterView) -> list[CoordinatorAction]:
        failed: set[str] = set(ev.instances)
        purged = self.graph.reachable_from(failed)
        order = [i for i in self.graph.order if i in purged]
        self.ended -= purged
        acts: list[CoordinatorAction] = [
            Stop(tuple(order)),
            Note("purge", {"failed": sorted(failed), "purged": order}),
        ]
        if not self.unready:
            self.purges += 1
            acts.append(DeclarePhase(PURGING, True, self.purges))
        self.unready |= set(order)
        # A sink whose state is not stored yet (its first write was lost unsynced: it had
        # emitted nothing, else the write would be durable) starts empty.
        acts += [Restart(iid, restore=SLOT, extra=SINK_REFS)
                 if self.graph.is_sink(iid) and SLOT in view.stored(InstanceId(iid))
                 else Restart(iid) for iid in order]
        return acts
