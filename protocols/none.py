"""``none``: no fault tolerance, the control every other protocol is compared with.

A failed instance comes back empty; nothing is replayed. A source reports its offset after
each batch; a restarted source resumes after the last offset the coordinator received, so
what was in flight or held in lost state is simply gone.
"""

from __future__ import annotations

from protocols.contract.actions import Control, CoordinatorAction, InstanceAction, Restart, Stop
from protocols.contract.events import FailureDetected, ReportIn, Started
from protocols.contract.logic import CoordinatorLogic, InstanceLogic
from protocols.contract.messages import SHARED_MESSAGES, InputEnded, Offset
from protocols.contract.names import InstanceId
from protocols.contract.params import NoParams
from protocols.contract.spec import Guarantee, ProtocolSpec, fixed
from protocols.contract.view import ClusterView, GraphView


class NoneInstance(InstanceLogic[NoParams]):
    """Batches in arrival order (the contract's defaults); a restarted source resumes at
    the offset its ``Restart`` carries."""

    def on_started(self, ev: Started, now: float) -> list[InstanceAction]:
        core = self.cores[ev.slot]
        if core.is_source and isinstance(ev.init, Offset):
            core.offset = self.resume_at(ev.init.offset, core.lo, core.hi)
        return []

    def resume_at(self, stored: int, lo: int, hi: int) -> int:
        """Where a restarted source reads on, given the offset committed for it."""
        return max(lo, min(stored, hi))


class NoneCoordinator(CoordinatorLogic[NoParams]):
    """Restart a failed instance empty; a source after the last offset it reported."""

    def __init__(self, graph: GraphView, params: NoParams):
        super().__init__(graph, params)
        self.offsets: dict[InstanceId, int] = {}

    def on_report(self, ev: ReportIn, view: ClusterView) -> list[CoordinatorAction]:
        if isinstance(ev.msg, Offset):
            self.offsets[ev.instance] = ev.msg.offset
            return []
        return super().on_report(ev, view)

    def on_failure(self, ev: FailureDetected, view: ClusterView) -> list[CoordinatorAction]:
        failed = sorted(ev.instances)
        self.ended.difference_update(failed)
        acts: list[CoordinatorAction] = [Stop(tuple(failed))]
        for i in failed:
            offset = self.offsets.get(i)
            acts.append(Restart(i, init=None if offset is None else Offset(offset)))
            acts += [Control(i, InputEnded(ch)) for ch in self.ended_inputs(i)]
        return acts


SPEC: ProtocolSpec[NoParams] = ProtocolSpec(
    name="none",
    paper="-",
    description="no fault tolerance: a failed instance restarts empty (the control)",
    params=NoParams,
    instance=NoneInstance,
    coordinator=NoneCoordinator,
    guarantee=fixed(Guarantee.AT_MOST_ONCE),
    messages=SHARED_MESSAGES,
    # The mutants (protocols/none_mutants.py, found there by name) subclass the classes above.
)
