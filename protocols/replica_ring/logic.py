"""``replica-ring`` against protocol contract v2: the instance and coordinator logic.

Thin adapters: every decision is made by the pure units of ``unit.py`` and the
``RingCoordinator``; this module turns contract events into their inputs and their
effects into contract actions.

- A tuple is one batch. Its id rides in ``Batch.meta`` as ``(uid, origin slot)``: a
  source batch is ``(slot, first offset, channel)``, an output ``(input uid, output
  group, destination index)``, a pure function of the input id so a replay repeats it,
  on whichever replica it runs (decision D4). Round-robin
  edges pick the channel from the id (X11), so a replay takes the same edge.
- Tuple records, acks, deletes, fetches and pings travel as ``SendPeer``; data as
  ``Send`` on the channel. ``Reply`` (the return of a synchronous call) goes to the
  calling unit itself (``SendPeer.unit``), never through slot routing.
- A replica passes end of stream on only when nothing is in progress, so a replay never
  follows it on a channel.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import replace
from typing import Any, ClassVar, cast

from ftctl.runtime.actions import Emit as CoreEmit
from ftctl.runtime.actions import Send as CoreSend
from ftctl.runtime.instance import InstanceCore
from ftctl.runtime.messages import Batch, Marker
from ftctl.runtime.partition import hash_split
from ftctl.runtime.records import stable_hash
from protocols.contract.actions import (
    REINSTATING,
    TAKEOVER,
    AdoptSlot,
    Control,
    CoordinatorAction,
    DeclarePhase,
    Emit,
    InstanceAction,
    Persist,
    ReleaseSlot,
    Report,
    Restart,
    Route,
    Send,
    SendPeer,
    SetTimer,
    Stop,
    Suspect,
)
from protocols.contract.events import (
    BatchIn,
    ControlIn,
    FailureDetected,
    PeerIn,
    ReportIn,
    SourceReady,
    Started,
    Suspected,
    TimerFired,
)
from protocols.contract.logic import EOS, CoordinatorLogic, InstanceLogic
from protocols.contract.messages import Ended, InputEnded, Offset
from protocols.contract.names import InstanceId, UnitId
from protocols.contract.view import ClusterView, GraphView, InstanceView
from protocols.replica_ring import coordinator as rc
from protocols.replica_ring.checks import fence_note, released_note
from protocols.replica_ring.messages import (
    MESSAGES,
    Adopted,
    Data,
    Delete,
    Hosted,
    Message,
    Quiesce,
    RecordMsg,
    RecordOk,
    Rejoin,
    Rejoined,
    Slot,
    Suspicion,
    Takeover,
    split_slot,
)
from protocols.replica_ring.params import ReplicaRingParams
from protocols.replica_ring.unit import (
    Accuse,
    Arm,
    Effect,
    Host,
    Output,
    ReplicaUnit,
    Reply,
    Reroute,
    SinkUnit,
    SourceUnit,
    Tell,
    Unhost,
)

SOURCE_OFFSET = 0  # the stored ref of an at-most-once source's next offset
CHANNEL = "#"  # a destination named by channel: the kernel routes it to the slot's unit
# (channel, records, seq): plain data. The record list is the batch's own, never copied:
# record lists are not changed once made, and a list the host made once for every run
# (ftctl/runtime/memo.py) is known by its identity, so its stateless work is not redone.
Payload = tuple[int, list[Any], int]


def _edge(core: InstanceCore, channel: int) -> tuple[int, int]:
    """(output group, destination index) of ``channel``: an output's id names the edge
    this way, not by channel (whose id depends on the sending slot), so that a replay on
    another slot's core repeats the id (section 2: uid' = (uid, g, j))."""
    for g, group in enumerate(core.spec.outputs):
        if channel in group.channels:
            return g, group.channels.index(channel)
    raise KeyError(channel)


class ReplicaRingInstance(InstanceLogic[ReplicaRingParams]):
    mutants: ClassVar[frozenset[str]] = frozenset()  # planted bugs (see mutants.py)

    def __init__(self, me: InstanceView, cores: Mapping[InstanceId, InstanceCore],
                 params: ReplicaRingParams):
        super().__init__(me, cores, params)
        self.pol = params.policy(self.mutants)
        self.kept: dict[Hashable, Payload] = {}  # a source's batches, until deleted
        self.ending: set[InstanceId] = set()  # slots whose inputs all ended
        self.done = False  # the run's output is final: timers stop (Quiesce)
        self.source: SourceUnit | None = None
        self.sink: SinkUnit | None = None
        self.unit: ReplicaUnit | None = None
        self.reinstating = False  # ``reinstating`` open: the stand-in's table is awaited
        if me.is_source:
            self.source = SourceUnit(me.id, params, self._regenerate)
        elif me.is_sink:
            self.sink = SinkUnit(me.id, params, self.mutants)
        else:
            self.unit = ReplicaUnit(me.operator, me.index, len(me.ring), params,
                                    self._process, mutants=self.mutants)

    # ------------------------------------------------------------ events
    def handle(self, ev: Any, now: float) -> list[InstanceAction]:
        acts = [*super().handle(ev, now), *self._maybe_finish()]
        if self.reinstating and self.unit is not None and not self.unit.awaiting_table:
            self.reinstating = False
            acts.append(DeclarePhase(REINSTATING, False, self.me.index))
        return acts

    def on_started(self, ev: Started, now: float) -> list[InstanceAction]:
        if ev.reason == "adopt":
            return [Report(Adopted(ev.slot))]
        if self.unit is not None:
            self.unit.incarnation = ev.incarnation  # it answers pings as this generation
            rejoin = ev.init if isinstance(ev.init, Rejoin) else None
            acts = self._acts(self.unit.start(
                reinstating=rejoin is not None,
                stand_in=rejoin.stand_in if rejoin is not None else None))
            if rejoin is not None:  # routed back: now the ended inputs can be told
                acts.append(Report(Rejoined(ev.slot)))
                if self.unit.awaiting_table:  # until the stand-in's record table is in
                    self.reinstating = True
                    acts.append(DeclarePhase(REINSTATING, True, self.me.index))
            return acts
        if self.source is not None:
            if ev.restored is not None:  # at-most-once: resume after what was sent
                self.cores[ev.slot].offset = ev.restored
            return self._acts(self.source.start())
        return []

    def on_source(self, ev: SourceReady, now: float) -> list[InstanceAction]:
        assert self.source is not None
        core = self.cores[ev.slot]
        first = core.offset
        more = core.source_next()
        acts: list[InstanceAction] = []
        if self.pol.amo:  # durable before anything is sent: a restart never sends it again
            acts.append(Persist(ev.slot, SOURCE_OFFSET, core.offset))
        for a in core.take_actions():
            if type(a) is CoreSend and isinstance(a.msg, Batch):
                uid = (str(ev.slot), first, a.channel)
                self.kept[uid] = (a.channel, a.msg.records, a.msg.seq)
                acts += self._acts(self.source.emit(uid))
        acts.append(Report(Offset(core.offset)))
        if not more:
            self.ending.add(ev.slot)
        return acts

    def on_batch(self, ev: BatchIn, now: float) -> list[InstanceAction]:
        uid, origin = ev.batch.meta
        data = Data(uid, (ev.channel, ev.batch.records, ev.batch.seq), origin)
        if self.sink is not None:
            return self._acts(self.sink.on_message(origin, data), sink=ev.slot)
        assert self.unit is not None
        return self._acts(self.unit.on_data(ev.slot, data))

    def on_peer(self, ev: PeerIn, now: float) -> list[InstanceAction]:
        if not isinstance(ev.msg, MESSAGES):
            return []
        msg = cast(Message, ev.msg)
        if self.source is not None:
            if isinstance(msg, Delete):
                self.kept.pop(msg.uid, None)
            return self._acts(self.source.on_message(ev.sender, msg))
        if self.unit is not None:
            effects = self.unit.on_message(ev.sender, msg, to=ev.to)
            notes: list[InstanceAction] = []
            if isinstance(msg, RecordMsg) and not self.unit.speaks_for(ev.to):
                # confirmed for a slot handed back: in the history (checks.py)
                notes = [released_note(str(ev.to), e.msg.uid, self.unit.me)
                         for e in effects
                         if isinstance(e, Reply) and isinstance(e.msg, RecordOk)]
            return notes + self._acts(effects)
        return []

    def on_control(self, ev: ControlIn, now: float) -> list[InstanceAction]:
        if isinstance(ev.msg, Quiesce):
            self.done = True
            return []
        if isinstance(ev.msg, Takeover | Hosted) and self.unit is not None:
            return self._acts(self.unit.on_message("coordinator", ev.msg))
        return super().on_control(ev, now)

    def on_timer(self, ev: TimerFired, now: float) -> list[InstanceAction]:
        if self.done:
            return []  # a finished run ends when no timer is left (hosts run to quiescence)
        if self.unit is not None:
            return self._acts(self.unit.on_timer(ev.key, now))
        if self.source is not None:
            return self._acts(self.source.on_timer(ev.key, now))
        return []

    # ------------------------------------------------------------ end of stream
    def end_input(self, slot: InstanceId, channel: int) -> list[InstanceAction]:
        core = self.cores.get(slot)
        if core is None:  # a slot handed back and released: its replica ends it
            return []
        if channel in core.finished or not core.end_of_stream(channel):
            return []
        self.ending.add(slot)
        return []

    def _idle(self) -> bool:
        if self.unit is not None:
            return self.unit.idle()
        if self.source is not None:
            return not self.source.unacked
        return True

    def _maybe_finish(self) -> list[InstanceAction]:
        if not self.ending or not self._idle():
            return []
        acts: list[InstanceAction] = []
        for slot in sorted(self.ending):
            core = self.cores[slot]
            acts += [Send(ch, Marker(EOS)) for ch in core.out_channels]
            acts.append(Report(Ended(), slot=slot))
        self.ending.clear()
        return acts

    # ------------------------------------------------------------ the operator
    def _process(self, slot: Slot, uid: Hashable, payload: Any) -> list[tuple[Slot, Hashable,
                                                                         Any]]:
        ch, records, _seq = payload
        # a slot handed back and released (R3) has no core here: any core will do, below
        core = self.cores.get(InstanceId(slot)) or self.cores[self.me.id]
        if ch not in core.port_of:
            # a replay whose record was re-marked to a taker that died in turn: the tuple
            # belongs to the slot its channel leads to, which this unit took over too (T4)
            core = next((c for c in self.cores.values() if ch in c.port_of), core)
        if ch not in core.port_of:
            # ... or to a slot the dead unit had handed back and was finishing a tuple for
            # (R3). Operators in scope are stateless and single-input (the port is
            # ignored) and route by the id (X11): any core of the operator yields the
            # same outputs under the same ids
            ch = next(iter(core.port_of))
        core.rr = [stable_hash(str(uid))] * len(core.rr)  # X11: the edge follows the id
        core.deliver(ch, Batch(records))
        out: list[tuple[Slot, Hashable, Any]] = []
        for a in core.take_actions():
            if type(a) is CoreSend and isinstance(a.msg, Batch):
                out.append((f"{CHANNEL}{a.channel}", (uid, *_edge(core, a.channel)),
                            (a.channel, a.msg.records, a.msg.seq)))
        return out

    def _regenerate(self, uid: Hashable) -> tuple[Slot, Any]:
        payload = self.kept.get(uid)
        if payload is None:
            payload = self._from_offset(uid)
        return f"{CHANNEL}{payload[0]}", payload

    def _from_offset(self, uid: Hashable) -> Payload:
        """A batch this source has not (re)emitted since it restarted, asked for by a
        taker's fetch: sources are replayable, so it is rebuilt from its offset (§5.3)."""
        slot, first, ch = cast(tuple[str, int, int], uid)
        core = self.cores[InstanceId(slot)]
        assert core.gen is not None
        records = core.gen(first, min(first + core.batch_size, core.hi))
        group = next(g for g in core.spec.outputs if ch in g.channels)
        if group.partition == "hash" and len(group.channels) > 1:
            records = hash_split(records, group.channels).get(ch, [])
        return ch, records, 0

    # ------------------------------------------------------------ effects -> actions
    def _acts(self, effects: list[Effect], sink: InstanceId | None = None
              ) -> list[InstanceAction]:
        out: list[InstanceAction] = []
        for e in effects:
            if isinstance(e, Tell) and isinstance(e.msg, Data):
                ch, records, seq = e.msg.payload
                out.append(Send(ch, Batch(records, seq=seq,
                                          meta=(e.msg.uid, e.msg.origin))))
            elif isinstance(e, Tell):
                out.append(SendPeer(InstanceId(e.to), e.msg))
            elif isinstance(e, Reply):  # to the calling unit, not through routing
                out.append(SendPeer(InstanceId(e.unit), e.msg, unit=UnitId(e.unit)))
            elif isinstance(e, Arm):
                out.append(SetTimer(e.key, e.after))
            elif isinstance(e, Accuse):  # the history records it; the report is acted on
                out += [Suspect(InstanceId(e.slot), "ping timeout"),
                        Report(Suspicion(e.slot, e.host))]
            elif isinstance(e, Reroute):
                out.append(Route(InstanceId(e.slot), UnitId(e.to)))
            elif isinstance(e, Host):
                # this unit serves the failed slot (keyed by its index) until reinstated
                out += [AdoptSlot(InstanceId(e.slot)),
                        DeclarePhase(TAKEOVER, True, split_slot(e.slot)[1])]
            elif isinstance(e, Unhost):
                # its own replica ends it now. The core goes too: kept, it tied the slot's
                # channels to this unit, and a host that lost this unit lost what the
                # replica sends on them (its end of stream). The tuples still in progress
                # here finish on this unit's own core (R3, see _process)
                self.ending.discard(InstanceId(e.slot))
                out += [DeclarePhase(TAKEOVER, False, split_slot(e.slot)[1]),
                        ReleaseSlot(InstanceId(e.slot))]
            elif isinstance(e, Output):
                assert sink is not None
                out += self._emit(sink, e)
        return out

    def _emit(self, slot: InstanceId, e: Output) -> list[InstanceAction]:
        ch, records, _seq = e.payload
        core = self.cores[slot]
        core.deliver(ch, Batch(records))
        out: list[InstanceAction] = []
        for a in core.take_actions():
            if type(a) is CoreEmit:
                out.append(Emit(slot, a.records,
                                uid=e.uid if self.pol.idempotent_sink else None))
        return out


class ReplicaRingCoordinator(CoordinatorLogic[ReplicaRingParams]):
    """Starts everything; sources and sinks restart as usual. A ring member is restarted
    ``reinstate_after`` its takeover; a suspicion (fixed variant) fences and hands slots
    over."""

    mutants: ClassVar[frozenset[str]] = frozenset()

    def __init__(self, graph: GraphView, params: ReplicaRingParams):
        super().__init__(graph, params)
        self.members = frozenset(i for i in graph.order
                                 if not graph.is_source(i) and not graph.is_sink(i))
        sizes: dict[str, int] = {}
        for i in sorted(self.members):
            op = graph.operator_of(i)
            sizes[op] = sizes.get(op, 0) + 1
        self.ring = rc.RingCoordinator(params, sizes, self.mutants)

    def on_failure(self, ev: FailureDetected, view: ClusterView) -> list[CoordinatorAction]:
        """Sources and sinks restart as usual; a ring member waits for its takeover."""
        others = ev.instances - self.members
        if not others:
            return []
        acts = super().on_failure(replace(ev, instances=frozenset(others)), view)
        return [replace(a, restore=SOURCE_OFFSET) if isinstance(a, Restart)
                and SOURCE_OFFSET in view.stored(a.instance) else a for a in acts]

    def on_suspect(self, ev: Suspected, view: ClusterView) -> list[CoordinatorAction]:
        """Recorded in the history only: the ``Suspicion`` report that comes with it names
        the slot's generation, which a ``Suspect`` cannot carry."""
        return []

    def on_timer(self, ev: TimerFired, view: ClusterView) -> list[CoordinatorAction]:
        return self._acts(self.ring.on_timer(
            ev.key, lambda s: str(view.unit_of(InstanceId(s))),
            lambda u: view.status(InstanceId(u)) == "running"), view)

    def on_report(self, ev: ReportIn, view: ClusterView) -> list[CoordinatorAction]:
        if isinstance(ev.msg, Ended):
            ended = super().on_report(ev, view)
            if self.finished(view):  # every sink ended: ping and retry timers may stop
                ended += [Control(i, Quiesce()) for i in sorted(self.members)
                          + list(self.graph.sources)]
            return ended
        if isinstance(ev.msg, Suspicion):
            effects = self.ring.on_accuse(
                ev.msg.slot, ev.msg.host, str(ev.instance),
                lambda s: str(view.unit_of(InstanceId(s))),
                lambda u: view.status(InstanceId(u)) == "running",
                lambda u: view.incarnation(InstanceId(u)))
            # each fence in the history with the suspicion it answers (checks.py)
            notes: list[CoordinatorAction] = [
                fence_note(ev.msg.slot, ev.msg.host, str(ev.instance), e.unit,
                           view.status(InstanceId(e.unit)) == "running",
                           view.incarnation(InstanceId(e.unit)))
                for e in effects if isinstance(e, rc.Fence)]
            return notes + self._acts(effects, view)
        if isinstance(ev.msg, Adopted | Rejoined):
            slot = InstanceId(ev.msg.slot)
            acts: list[CoordinatorAction] = [Control(slot, InputEnded(ch))
                                             for ch in self.ended_inputs(slot)]
            if isinstance(ev.msg, Adopted):
                acts += self._acts(self.ring.on_adopted(str(slot)), view)
            return acts
        return super().on_report(ev, view)

    def _acts(self, effects: list[rc.CoordinatorEffect], view: ClusterView
              ) -> list[CoordinatorAction]:
        out: list[CoordinatorAction] = []
        for e in effects:
            if isinstance(e, rc.Fence):
                out.append(Stop((InstanceId(e.unit),)))
            elif isinstance(e, Tell):
                out.append(Control(InstanceId(e.to), e.msg))
            elif isinstance(e, Arm):
                out.append(SetTimer(e.key, e.after))
            elif isinstance(e, rc.Restart):
                slot = InstanceId(e.slot)
                out.append(Restart(slot, init=Rejoin(str(view.unit_of(slot)))))
        return out
