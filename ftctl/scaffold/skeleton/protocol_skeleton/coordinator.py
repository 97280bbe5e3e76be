"""``Coordinator``: restarts only the failed instances and wires up their replay."""

from __future__ import annotations

from protocols.contract import (
    ClusterView,
    Control,
    CoordinatorAction,
    CoordinatorLogic,
    Ended,
    FailureDetected,
    InstanceId,
    ReportIn,
    Restart,
    Stop,
)
from protocols.shared.logged import Ready, Resend, TrimPayloadLog

from .instance import SNAPSHOT, VISIBLE
from .messages import LocalSnapshot
from .params import Params


class Coordinator(CoordinatorLogic[Params]):
    def on_report(self, ev: ReportIn, view: ClusterView) -> list[CoordinatorAction]:
        msg = ev.msg
        if isinstance(msg, Ready):  # a replacement runs: its parents replay to it
            return [self.to_parent(ch, Resend(ch, start)) for ch, start in msg.starts.items()]
        if isinstance(msg, LocalSnapshot):  # durable: the parents may trim their logs
            return [self.to_parent(ch, TrimPayloadLog(ch, upto))
                    for ch, upto in msg.positions.items()]
        if isinstance(msg, Ended):
            # A replacement gets end of stream from its parents' replay, so no InputEnded
            # control is needed (the default coordinator's).
            self.ended.add(ev.instance)
        return []

    def on_failure(self, ev: FailureDetected, view: ClusterView) -> list[CoordinatorAction]:
        failed = sorted(ev.instances)
        self.ended.difference_update(failed)
        # Only the failed instances restart. Their snapshots are read as ``extra`` refs:
        # one that was never written arrives as None, and the instance starts empty.
        return [Stop(tuple(failed)),
                *(Restart(i, extra=(SNAPSHOT, VISIBLE)) for i in failed)]

    def to_parent(self, channel: int, msg: Resend | TrimPayloadLog) -> CoordinatorAction:
        return Control(InstanceId(self.graph.channels[channel].src), msg)
