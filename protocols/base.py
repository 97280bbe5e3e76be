"""The protocol interface: an instance side and a coordinator side, both pure.

Instance side: wraps an ``InstanceCore`` and decides what happens to each incoming
message (process, buffer, log, forward a marker, persist). It never performs I/O; the
core collects actions for the host.

Coordinator side: learns of reports and failures and answers with a plan: which
instances to stop, which to start again and from what, which sink epochs to commit.
The host carries plans out. Time only enters as the ``now`` argument.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ftctl.runtime.graph import ExecutionGraph
from ftctl.runtime.instance import InstanceCore
from ftctl.runtime.messages import Batch, Marker, Message
from protocols.contract.params import NoParams, ProtocolParams, RunShape, validate
from protocols.contract.spec import Guarantee

__all__ = ["Guarantee"]  # re-exported: the contract owns it

# ---------------------------------------------------------------- plan steps

@dataclass(slots=True)
class Stop:
    """Fence instances: kill them and drop whatever is in flight to or from them."""

    instances: list[str]


@dataclass(slots=True)
class Start:
    """Start a new incarnation of an instance.

    ``restore`` names a snapshot id whose blob the host loads from stable storage and
    hands to the instance; ``init`` is protocol data passed as is. ``also`` names further
    snapshot ids of the instance: the instance then gets ``(blob, {id: blob or None})``,
    None where nothing was stored under that id.
    """

    instance: str
    restore: int | None = None
    init: Any = None
    also: tuple[int, ...] = ()


@dataclass(slots=True)
class Commit:
    """Make a sink epoch visible: the host reads each sink's output from snapshot ``snapshot``."""

    snapshot: int


@dataclass(slots=True)
class Discard:
    """Drop stored snapshots with id > ``after`` (incomplete ones of a dead incarnation)."""

    after: int


@dataclass(slots=True)
class Control:
    """Deliver a control payload to a live instance."""

    instance: str
    payload: Any


@dataclass(slots=True)
class Event:
    """A protocol event for the run's event log (restored from, replay range, ...)."""

    kind: str
    data: dict[str, Any] = field(default_factory=dict)


PlanStep = Stop | Start | Commit | Discard | Control | Event


# ---------------------------------------------------------------- instance side

class InstanceProtocol:
    """Default behaviour: process batches in arrival order, forward end-of-stream."""

    def __init__(self, core: InstanceCore, params: Any, blob: Any, init: Any):
        self.core = core
        self.params = params

    def on_message(self, ch: int, msg: Message) -> None:
        if isinstance(msg, Batch):
            self.core.deliver(ch, msg)
        elif msg.kind == "eos":
            self.on_eos(ch)
        else:
            self.on_marker(ch, msg)

    def on_marker(self, ch: int, marker: Marker) -> None:
        pass

    def on_eos(self, ch: int) -> None:
        if ch in self.core.finished:
            return
        if self.core.end_of_stream(ch):
            self.finish()

    def finish(self) -> None:
        """All inputs ended (or a source ran dry): pass end-of-stream downstream."""
        self.core.send_marker(Marker("eos"))
        self.report("eos")

    def on_step(self, now: float) -> bool:
        """Sources: produce the next batch. Returns False once the source is finished."""
        more = self.core.source_next()
        self.report("offset", self.core.offset)
        if not more:
            self.finish()
        return more

    def on_control(self, payload: Any) -> None:
        if isinstance(payload, dict) and payload.get("kind") == "eos":
            self.on_eos(payload["channel"])

    def report(self, kind: str, data: Any = None) -> None:
        from ftctl.runtime.actions import Report

        self.core.actions.append(Report(self.core.id, kind, data))


# ---------------------------------------------------------------- coordinator side

class CoordinatorProtocol:
    """Default: nothing to coordinate; restart a failed instance fresh."""

    def __init__(self, graph: ExecutionGraph, params: Any):
        self.graph = graph
        self.params = params
        self.eos_sent: set[str] = set()
        self.restarted: set[str] = set()

    def initial_plan(self) -> list[PlanStep]:
        return [Start(i) for i in self.graph.order]

    def on_report(self, instance: str, kind: str, data: Any, now: float) -> list[PlanStep]:
        if kind == "eos":
            self.eos_sent.add(instance)
            return self._eos_to_replacements(instance)
        return []

    def on_failure(self, failed: set[str], now: float) -> list[PlanStep]:
        raise NotImplementedError

    def finished(self) -> bool:
        """True once the output is final (all sinks ended and, if any, the last epoch committed)."""
        return all(s in self.eos_sent for s in self.graph.sinks)

    # An end-of-stream marker in flight to an instance that then failed is lost with it;
    # a replacement would wait forever. The coordinator knows who already ended.
    def _eos_to_replacements(self, upstream: str) -> list[PlanStep]:
        steps: list[PlanStep] = []
        for ch in self.graph.out_channels(upstream):
            dst = self.graph.channels[ch].dst
            if dst in self.restarted:
                steps.append(Control(dst, {"kind": "eos", "channel": ch}))
        return steps

    def ended_inputs(self, instance: str) -> list[int]:
        """Input channels of ``instance`` whose senders already passed end-of-stream."""
        chans = self.graph.channels
        return [c for c in self.graph.instances[instance].inputs if chans[c].src in self.eos_sent]


@dataclass(frozen=True)
class ProtocolInfo:
    """A registered protocol. ``params`` is its pydantic parameter model; ``guarantee``
    is what it promises unless ``guarantee_from`` derives that from the params."""

    name: str
    guarantee: Guarantee
    description: str
    paper: str
    instance: type[InstanceProtocol]
    coordinator: type[CoordinatorProtocol]
    params: type[ProtocolParams] = NoParams
    guarantee_from: Callable[[Any], Guarantee] | None = None
    # Phases the protocol enters (as ``ProtocolSpec.phases``): ``snapshotting`` for one
    # that takes global snapshots; fault triggers on a phase it never enters are refused.
    phases: tuple[str, ...] = ()

    def resolve(self, given: Mapping[str, Any] | ProtocolParams,
                shape: RunShape | None = None) -> ProtocolParams:
        """The validated params for a run (raises ``ParamError`` naming the bad one).

        ``given`` is what the user set (strings from ``--param``, values from a file, or
        an already validated model); ``"auto"`` values are resolved for ``shape``.
        """
        params = given if isinstance(given, ProtocolParams) else validate(
            self.params, given, self.name)
        return params.for_run(shape or RunShape())

    def guarantee_of(self, params: ProtocolParams) -> Guarantee:
        return self.guarantee_from(params) if self.guarantee_from else self.guarantee
