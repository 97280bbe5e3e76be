"""Where protocol logic runs: ``InstanceLogic`` in a unit, ``CoordinatorLogic`` in the driver.

Both are pure: events in, actions out, time only as ``now``. Subclasses override the
``on_*`` hooks they care about; ``handle`` dispatches by event type. The defaults give an
at-most-once protocol: process batches in arrival order, pass end of stream on, restart
a failed instance empty.

An instance drives its cores (``deliver``, ``source_next``, ``end_of_stream``) and takes
back what they produced with ``output(slot)``: the sends as they are, and a sink's
records through the ``on_output`` hook, which returns what becomes of them (emitted by
default; a protocol with transactional or de-duplicated output keeps them and returns
what it stages or emits). Protocols never set a core's fields.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Generic

from ftctl.runtime.instance import InstanceCore
from ftctl.runtime.messages import Marker
from protocols.contract.actions import (
    Control,
    CoordinatorAction,
    Emit,
    InstanceAction,
    Report,
    Restart,
    Send,
    Stop,
    StopRun,
)
from protocols.contract.events import (
    BatchIn,
    CapacityChanged,
    ControlIn,
    CoordinatorEvent,
    FailureDetected,
    InstanceEvent,
    InstanceRunning,
    MarkerIn,
    PeerIn,
    ReportIn,
    RollBackTo,
    RunStarted,
    SourceReady,
    Started,
    StoreFault,
    Suspected,
    TimerFired,
)
from protocols.contract.messages import Ended, InputEnded, Offset
from protocols.contract.names import InstanceId
from protocols.contract.params import P
from protocols.contract.view import ClusterView, GraphView, InstanceView

EOS = "eos"


def core_actions(core: InstanceCore) -> list[InstanceAction]:
    """What the core produced since the last call (``Send`` and ``Emit`` only), a sink's
    records emitted unfiltered; ``InstanceLogic.output`` passes them to ``on_output``."""
    return core.take_actions()  # type: ignore[return-value]


class InstanceLogic(Generic[P]):
    """One protocol instance in a unit. ``cores`` is kernel-owned and live: ``AdoptSlot``
    adds the adopted slot's core before ``Started(reason="adopt")`` arrives."""

    def __init__(self, me: InstanceView, cores: Mapping[InstanceId, InstanceCore], params: P):
        self.me = me
        self.cores = cores
        self.params = params
        cls = type(self)
        self._dispatch = _INSTANCE_HANDLERS.get(cls) or _instance_handlers(cls)

    @property
    def core(self) -> InstanceCore:
        """The core of this instance's own slot."""
        return self.cores[self.me.id]

    def handle(self, ev: InstanceEvent, now: float) -> list[InstanceAction]:
        return self._dispatch[type(ev)](self, ev, now)

    def output(self, slot: InstanceId) -> list[InstanceAction]:
        """What the core of ``slot`` produced since the last call: its sends, then what
        ``on_output`` makes of a sink's records."""
        out = self.cores[slot].take_output()
        if not out.records:
            return out.sends  # type: ignore[return-value]  # contract Sends
        return [*out.sends, *self.on_output(slot, out.records)]

    def on_output(self, slot: InstanceId, records: list[tuple[Any, Any]]
                  ) -> list[InstanceAction]:
        """A sink's ``(key, value)`` records, as its operator produced them; returns what
        to do with them. Default: visible at once. Override to hold them (keep them and
        return ``[]``), to stage them (``StageOutput``) or to filter them."""
        return [Emit(slot, records)]

    def more_to_produce(self, slot: InstanceId) -> bool:
        """Sources: whether the host should offer another ``SourceReady`` after this one."""
        return not self.cores[slot].exhausted

    # ------------------------------------------------------------ hooks

    def on_started(self, ev: Started, now: float) -> list[InstanceAction]:
        """Default: the restored blob, if any, is a core state (``snapshot_state``)."""
        if ev.restored is not None:
            self.cores[ev.slot].restore_state(ev.restored)
        return []

    def on_batch(self, ev: BatchIn, now: float) -> list[InstanceAction]:
        core = self.cores[ev.slot]
        core.deliver(ev.channel, ev.batch)
        return self.output(ev.slot)

    def on_marker(self, ev: MarkerIn, now: float) -> list[InstanceAction]:
        if ev.marker.kind == EOS:
            return self.end_input(ev.slot, ev.channel)
        return []

    def on_source(self, ev: SourceReady, now: float) -> list[InstanceAction]:
        core = self.cores[ev.slot]
        more = core.source_next()
        acts = [*self.output(ev.slot), Report(Offset(core.offset))]
        if not more:
            acts += self.finish(ev.slot)
        return acts

    def on_peer(self, ev: PeerIn, now: float) -> list[InstanceAction]:
        return []

    def on_control(self, ev: ControlIn, now: float) -> list[InstanceAction]:
        if isinstance(ev.msg, InputEnded):
            return self.end_input(ev.slot or self.me.id, ev.msg.channel)
        return []

    def on_timer(self, ev: TimerFired, now: float) -> list[InstanceAction]:
        return []

    def on_rollback(self, ev: RollBackTo, now: float) -> list[InstanceAction]:
        raise NotImplementedError(f"{type(self).__name__} cannot roll back a live instance")

    # ------------------------------------------------------------ helpers

    def end_input(self, slot: InstanceId, channel: int) -> list[InstanceAction]:
        """End of stream on ``channel``: once every input ended, flush and finish."""
        core = self.cores[slot]
        if channel in core.finished:
            return []
        if not core.end_of_stream(channel):
            return []
        return [*self.output(slot), *self.finish(slot)]

    def finish(self, slot: InstanceId) -> list[InstanceAction]:
        """Every input ended (or a source ran dry): pass end of stream on and report it."""
        core = self.cores[slot]
        return [*(Send(ch, Marker(EOS)) for ch in core.out_channels), Report(Ended())]


class CoordinatorLogic(Generic[P]):
    """The protocol's driver side. Default: start everything, restart a failed instance
    empty, and tell a replacement which inputs ended before it started."""

    def __init__(self, graph: GraphView, params: P):
        self.graph = graph
        self.params = params
        self.ended: set[InstanceId] = set()  # instances that passed end of stream
        cls = type(self)
        self._dispatch = _COORDINATOR_HANDLERS.get(cls) or _coordinator_handlers(cls)

    def initial(self, view: ClusterView) -> list[CoordinatorAction]:
        return [Restart(i) for i in self.graph.order]

    def handle(self, ev: CoordinatorEvent, view: ClusterView) -> list[CoordinatorAction]:
        return self._dispatch[type(ev)](self, ev, view)

    def finished(self, view: ClusterView) -> bool:
        """True once the output is final (every sink ended; protocols add their commit)."""
        return all(s in self.ended for s in self.graph.sinks)

    # ------------------------------------------------------------ hooks

    def on_run_started(self, ev: RunStarted, view: ClusterView) -> list[CoordinatorAction]:
        return []

    def on_running(self, ev: InstanceRunning, view: ClusterView) -> list[CoordinatorAction]:
        return []

    def on_report(self, ev: ReportIn, view: ClusterView) -> list[CoordinatorAction]:
        if isinstance(ev.msg, Ended):
            self.ended.add(ev.instance)
            return self.input_ended_controls(ev.instance, view)
        return []

    def on_failure(self, ev: FailureDetected, view: ClusterView) -> list[CoordinatorAction]:
        failed = sorted(ev.instances)
        self.ended.difference_update(failed)
        acts: list[CoordinatorAction] = [Stop(tuple(failed))]
        for i in failed:
            acts.append(Restart(i, self.restore_from(i, view)))
            acts += [Control(i, InputEnded(ch)) for ch in self.ended_inputs(i)]
        return acts

    def restore_from(self, instance: InstanceId, view: ClusterView) -> int | None:
        """The snapshot a failed ``instance`` restarts from; default: none, it comes back empty."""
        return None

    def on_suspect(self, ev: Suspected, view: ClusterView) -> list[CoordinatorAction]:
        return []

    def on_capacity(self, ev: CapacityChanged, view: ClusterView) -> list[CoordinatorAction]:
        return []

    def on_timer(self, ev: TimerFired, view: ClusterView) -> list[CoordinatorAction]:
        return []

    def on_store_fault(self, ev: StoreFault, view: ClusterView) -> list[CoordinatorAction]:
        """A stored object the recovery needs is bad. Default (docs/chaos.md, "What each
        protocol does with a bad object"): stop the run, naming it; restoring anything
        else could make wrong output."""
        return [StopRun(f"{ev.kind} snapshot {ev.snapshot} of {ev.instance}",
                        ev.instance, ev.snapshot)]

    # ------------------------------------------------------------ helpers

    def ended_inputs(self, instance: str) -> list[int]:
        """Input channels of ``instance`` whose senders already passed end of stream."""
        chans = self.graph.channels
        return [c for c in self.graph.inputs(instance) if chans[c].src in self.ended]

    def input_ended_controls(self, upstream: InstanceId,
                             view: ClusterView) -> list[CoordinatorAction]:
        # An end-of-stream marker in flight to an instance that then failed is lost with
        # it; a replacement would wait forever. The coordinator knows who already ended.
        acts: list[CoordinatorAction] = []
        for ch in self.graph.out_channels(upstream):
            dst = self.graph.channels[ch].dst
            if view.incarnation(InstanceId(dst)) > 0:
                acts.append(Control(InstanceId(dst), InputEnded(ch)))
        return acts


# The handlers per event type, looked up once per class. Functions, not methods bound to
# the instance: a table of bound methods in the instance made each one a cycle, freed
# only by the garbage collector, which then walked all it held (a Nexmark sink's million
# counts) instead of reference counting freeing it where it was dropped.
_INSTANCE_HANDLERS: dict[type, dict[type, Callable[[Any, Any, float],
                                                  list[InstanceAction]]]] = {}
_COORDINATOR_HANDLERS: dict[type, dict[type, Callable[[Any, Any, ClusterView],
                                                     list[CoordinatorAction]]]] = {}


def _instance_handlers(cls: type[InstanceLogic[Any]]
                       ) -> dict[type, Callable[[Any, Any, float], list[InstanceAction]]]:
    return _INSTANCE_HANDLERS.setdefault(cls, {
        Started: cls.on_started, BatchIn: cls.on_batch, MarkerIn: cls.on_marker,
        SourceReady: cls.on_source, PeerIn: cls.on_peer, ControlIn: cls.on_control,
        TimerFired: cls.on_timer, RollBackTo: cls.on_rollback,
    })


def _coordinator_handlers(cls: type[CoordinatorLogic[Any]]
                          ) -> dict[type, Callable[[Any, Any, ClusterView],
                                                   list[CoordinatorAction]]]:
    return _COORDINATOR_HANDLERS.setdefault(cls, {
        RunStarted: cls.on_run_started, InstanceRunning: cls.on_running,
        ReportIn: cls.on_report, FailureDetected: cls.on_failure,
        Suspected: cls.on_suspect, CapacityChanged: cls.on_capacity,
        TimerFired: cls.on_timer, StoreFault: cls.on_store_fault,
    })
