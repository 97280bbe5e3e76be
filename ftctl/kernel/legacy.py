"""Runs a protocol written against ``protocols.base`` through the kernel.

An intermediate step of the migration to ``protocols.contract``: each legacy class is
wrapped so the kernel sees contract events and actions. Plan steps translate one to one
(``Commit(k)`` commits every sink up to ``k``, ``Discard(k)`` discards every instance's
refs above ``k``); controls, inits and reports travel wrapped in ``LegacyControl``,
``LegacyInit`` and ``LegacyReport``. Delete this module with the last unported protocol.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any, ClassVar

from ftctl.runtime.actions import Persist as CorePersist
from ftctl.runtime.actions import Report as CoreReport
from ftctl.runtime.instance import InstanceCore
from ftctl.runtime.messages import Marker
from protocols.base import (
    Commit,
    CoordinatorProtocol,
    Discard,
    Event,
    InstanceProtocol,
    PlanStep,
    ProtocolInfo,
    Start,
)
from protocols.base import Control as PlanControl
from protocols.base import Stop as PlanStop
from protocols.contract.actions import (
    CommitOutput,
    Control,
    CoordinatorAction,
    DiscardSnapshots,
    InstanceAction,
    Note,
    Persist,
    Report,
    Restart,
    Stop,
)
from protocols.contract.events import (
    BatchIn,
    ControlIn,
    FailureDetected,
    MarkerIn,
    ReportIn,
    SourceReady,
    Started,
)
from protocols.contract.logic import CoordinatorLogic, InstanceLogic
from protocols.contract.messages import Msg
from protocols.contract.names import InstanceId
from protocols.contract.spec import ProtocolSpec
from protocols.contract.view import ClusterView, GraphView


@dataclass(frozen=True, slots=True)
class LegacyReport(Msg):
    kind: str
    data: Any = None


@dataclass(frozen=True, slots=True)
class LegacyControl(Msg):
    payload: Any


@dataclass(frozen=True, slots=True)
class LegacyInit(Msg):
    init: Any


class LegacyInstance(InstanceLogic[Any]):
    proto_cls: ClassVar[type[InstanceProtocol]]
    proto: InstanceProtocol
    more = True

    def on_started(self, ev: Started, now: float) -> list[InstanceAction]:
        # The legacy start blob: (blob, {ref: blob or None}) when extra refs were asked for.
        blob = (ev.restored, dict(ev.extra)) if ev.extra else ev.restored
        init = ev.init.init if isinstance(ev.init, LegacyInit) else None
        self.proto = self.proto_cls(self.core, self.params, blob, init)
        return _drain(self.core)

    def on_batch(self, ev: BatchIn, now: float) -> list[InstanceAction]:
        self.proto.on_message(ev.channel, ev.batch)
        return _drain(self.core)

    def on_marker(self, ev: MarkerIn, now: float) -> list[InstanceAction]:
        self.proto.on_message(ev.channel, ev.marker)
        return _drain(self.core)

    def on_source(self, ev: SourceReady, now: float) -> list[InstanceAction]:
        self.more = self.proto.on_step(now)
        return _drain(self.core)

    def more_to_produce(self, slot: InstanceId) -> bool:
        return self.more

    def on_control(self, ev: ControlIn, now: float) -> list[InstanceAction]:
        assert isinstance(ev.msg, LegacyControl)
        self.proto.on_control(ev.msg.payload)
        return _drain(self.core)


def _drain(core: InstanceCore) -> list[InstanceAction]:
    acts: list[Any] = core.take_actions()
    for k, a in enumerate(acts):
        t = type(a)
        if t is CorePersist:
            acts[k] = Persist(InstanceId(a.instance), a.snapshot, a.blob)
        elif t is CoreReport:
            acts[k] = Report(LegacyReport(a.kind, a.data))
    return acts


class LegacyCoordinator(CoordinatorLogic[Any]):
    proto_cls: ClassVar[type[CoordinatorProtocol]]

    def __init__(self, graph: GraphView, params: Any):
        super().__init__(graph, params)
        self.proto = self.proto_cls(graph.execution, params)

    def initial(self, view: ClusterView) -> list[CoordinatorAction]:
        return self._translate(self.proto.initial_plan())

    def on_report(self, ev: ReportIn, view: ClusterView) -> list[CoordinatorAction]:
        assert isinstance(ev.msg, LegacyReport)
        msg = ev.msg
        return self._translate(self.proto.on_report(ev.instance, msg.kind, msg.data, ev.now))

    def on_failure(self, ev: FailureDetected, view: ClusterView) -> list[CoordinatorAction]:
        return self._translate(self.proto.on_failure(set(ev.instances), ev.now))

    def finished(self, view: ClusterView) -> bool:
        return self.proto.finished()

    def _translate(self, steps: list[PlanStep]) -> list[CoordinatorAction]:
        out: list[CoordinatorAction] = []
        for s in steps:
            if isinstance(s, PlanStop):
                out.append(Stop(tuple(InstanceId(i) for i in s.instances)))
            elif isinstance(s, Start):
                init = LegacyInit(s.init) if s.init is not None else None
                out.append(Restart(InstanceId(s.instance), s.restore, tuple(s.also), init))
            elif isinstance(s, Commit):
                out += [CommitOutput(i, s.snapshot) for i in self.graph.sinks]
            elif isinstance(s, Discard):
                out += [DiscardSnapshots(i, after=s.after) for i in self.graph.order]
            elif isinstance(s, PlanControl):
                out.append(Control(InstanceId(s.instance), LegacyControl(s.payload)))
            elif isinstance(s, Event):
                out.append(Note(s.kind, s.data))
        return out


@cache
def legacy_logic(info: ProtocolInfo) -> tuple[type[LegacyInstance], type[LegacyCoordinator]]:
    """The contract-v2 logic classes that run ``info``'s legacy classes."""
    inst = type(f"Legacy{info.instance.__name__}", (LegacyInstance,),
                {"proto_cls": info.instance})
    coord = type(f"Legacy{info.coordinator.__name__}", (LegacyCoordinator,),
                 {"proto_cls": info.coordinator})
    return inst, coord


def logic_of(protocol: ProtocolInfo | ProtocolSpec[Any],
             ) -> tuple[type[InstanceLogic[Any]], type[CoordinatorLogic[Any]]]:
    """The contract-v2 logic classes of a registered protocol (legacy ones wrapped)."""
    if isinstance(protocol, ProtocolInfo):
        return legacy_logic(protocol)
    return protocol.instance, protocol.coordinator


__all__ = ["LegacyControl", "LegacyInit", "LegacyReport", "Marker", "legacy_logic", "logic_of"]
