"""``LineageCoordinator``: a failure purges the failed instances' downstream."""

from __future__ import annotations

from protocols.contract.actions import Control, CoordinatorAction, Note, Restart, Stop
from protocols.contract.events import FailureDetected, ReportIn
from protocols.contract.logic import CoordinatorLogic
from protocols.contract.messages import Ended
from protocols.contract.names import InstanceId
from protocols.contract.params import NoParams
from protocols.contract.view import ClusterView
from protocols.shared.logged import SLOT, Ready, Resend


class LineageCoordinator(CoordinatorLogic[NoParams]):
    def on_report(self, ev: ReportIn, view: ClusterView) -> list[CoordinatorAction]:
        msg = ev.msg
        if isinstance(msg, Ready):
            return [self._resend(ch, start) for ch, start in msg.starts.items()]
        if isinstance(msg, Ended):
            # A purged instance waits for its parents' resend, end of stream included:
            # no input is ever ended for it by the coordinator.
            self.ended.add(ev.instance)
        return []

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
        # A sink whose state is not stored yet (its first write was lost unsynced: it had
        # emitted nothing, else the write would be durable) starts empty.
        acts += [Restart(iid, restore=SLOT if self.graph.is_sink(iid)
                         and SLOT in view.stored(InstanceId(iid)) else None)
                 for iid in order]
        return acts
