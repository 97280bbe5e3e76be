"""One replica as a message-driven state machine, plus the source and sink ends.

Each handler takes one event and returns effects; nothing here reads a clock or sends
anything itself. A host (or a test) delivers ``Tell`` effects to the unit currently
hosting the addressed slot and ``Reply`` effects to the named unit, fires ``Arm`` timers,
applies ``Reroute`` and ``Host`` to its routing table, and passes ``Accuse`` to the
coordinator.

Steps per tuple (Figure 3): (1) receive (2) ack (3) keep (4) record (5) sync with every
colleague (6) process and send (7) wait for the next hop (8) purge at colleagues and tell
the origin to delete. The fixed variant acks after (5) (F1) and runs (8) on the next
hop's ``Delete`` instead of its ``Ack`` (F5).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

from protocols.replica_ring.messages import (
    Ack,
    Data,
    Delete,
    Fetch,
    Hosted,
    HostId,
    Message,
    Ping,
    Pong,
    Purge,
    RecordMsg,
    RecordOk,
    Refetch,
    Reinstate,
    Slot,
    Table,
    Takeover,
    slot_of,
    split_slot,
)
from protocols.replica_ring.params import ReplicaRingParams, Variant
from protocols.replica_ring.records import DeliveryTable, Record, RecordState, RecordTable
from protocols.replica_ring.ring import PingDetector, RingMember

PING, RETRY = "ring-ping", "ring-retry"


# ---------------------------------------------------------------- effects

@dataclass(frozen=True, slots=True)
class Tell:
    to: Slot
    msg: Message


@dataclass(frozen=True, slots=True)
class Reply:
    """The return of a synchronous call (ack, confirmation, pong, fetched tuple, table):
    it goes to the calling unit itself, never through slot routing. Routed by slot, the
    ack of a falsely suspected replica would reach its taker and the suspect would resend
    forever."""

    unit: Slot  # the unit, named by its own slot
    msg: Message


@dataclass(frozen=True, slots=True)
class Arm:
    key: str
    after: float


@dataclass(frozen=True, slots=True)
class Accuse:
    """Fixed variant: report a suspect to the coordinator, which fences it (F8).

    ``host`` is the slot's generation as this unit knows it. An unanswered ping may have
    gone to a unit that died and whose slot has moved since (a replica reinstated while
    the slot it pings was still routed to a dead unit): the coordinator ignores such a
    stale suspicion instead of stopping the unit that hosts the slot now (§4.1: a replica
    detects the *replica* it pinged)."""

    slot: Slot
    host: HostId


@dataclass(frozen=True, slots=True)
class Reroute:
    slot: Slot
    to: Slot  # the unit, named by its own slot


@dataclass(frozen=True, slots=True)
class Host:
    slot: Slot


@dataclass(frozen=True, slots=True)
class Unhost:
    """An adopted slot's replica is back: this unit no longer speaks for it (tuples of it
    still in progress here finish here)."""

    slot: Slot


@dataclass(frozen=True, slots=True)
class Output:
    uid: Hashable
    payload: Any


Effect = Tell | Reply | Arm | Accuse | Reroute | Host | Unhost | Output
# the operator: (slot processed for, input uid, payload) -> [(dest slot, output uid, payload)]
Process = Callable[[Slot, Hashable, Any], list[tuple[Slot, Hashable, Any]]]


@dataclass(slots=True)
class _Work:
    slot: Slot  # the slot the tuple was addressed to
    payload: Any
    origin: Slot
    waiting: set[Slot] = field(default_factory=set)  # colleagues yet to confirm the record
    outs: set[Hashable] = field(default_factory=set)  # outputs not yet acked / deleted


class ReplicaUnit:
    """A ring member: one replica of a stateless operator, hosting one or more slots."""

    def __init__(self, op: str, index: int, size: int, params: ReplicaRingParams,
                 process: Process, sources: frozenset[str] = frozenset(),
                 mutants: frozenset[str] = frozenset(), incarnation: int = 0):
        self.op, self.index, self.size = op, index, size
        self.incarnation = incarnation
        self.sources = sources  # upstream source operators: they regenerate, keep no copy
        self.me = slot_of(op, index)
        self.params = params
        self.p = params.policy(mutants)
        self.fixed = params.variant is Variant.FIXED
        self.process = process
        self.ring = RingMember(index, size, self_ping=self.p.has("self-ping"),
                               ping_prev=self.p.has("ping-prev"))
        self.detector = PingDetector(params.ping_every, params.ping_timeout)
        # the generation this unit last knew for each ring slot (pongs and the coordinator
        # tell it); unheard of: the slot's own unit, first incarnation
        self.hosts: dict[int, HostId] = {}
        self.records = RecordTable(key_with_origin=self.p.has("dedup-emitter"))
        self.delivery = DeliveryTable()  # output uid -> (dest, payload)
        self.work: dict[Hashable, _Work] = {}  # input uid -> its progress
        self.parent: dict[Hashable, Hashable] = {}  # output uid -> input uid
        self.unacked: dict[Hashable, tuple[Slot, Data]] = {}
        self.fetching: dict[Hashable, tuple[Slot, Slot]] = {}  # uid -> (origin, for slot)
        # sent since the last retry tick: resent only from the next one, so a send waits
        # one to two periods for its answer and no clock is needed
        self.fresh: set[Hashable] = set()
        self.awaiting_table = False
        self.held: list[tuple[Slot, Data]] = []  # tuples that came before the table
        self.adopted_early: list[int] = []  # slots taken over before the table came
        self.stand_in: Slot | None = None  # the unit that hands this slot back
        self.waiting_delete: dict[Hashable, set[Slot]] = {}  # uid -> senders of dropped copies

    # ------------------------------------------------------------ helpers
    def slot(self, i: int) -> Slot:
        return slot_of(self.op, i)

    def colleagues(self) -> list[Slot]:
        idx = [s for s in range(self.size) if s not in self.ring.represents]
        if self.p.has("sync-skips-successor"):
            idx = [s for s in idx if s != self.ring.next_of(self.index)]
        return [self.slot(s) for s in idx]

    def idle(self) -> bool:
        """Nothing in progress: every tuple taken in has been forwarded and confirmed."""
        return not (self.work or self.unacked or self.fetching or self.held
                    or self.awaiting_table)

    # ------------------------------------------------------------ lifecycle
    def start(self, reinstating: bool = False, stand_in: Slot | None = None) -> list[Effect]:
        """``stand_in``: the unit hosting this slot while it was away (default: whoever the
        slot routes to when the request is sent)."""
        out: list[Effect] = [Arm(PING, self.params.ping_every)]
        # §4.3: the replica puts itself back; with the fix of F4 tuples wait until the
        # stand-in's record table is installed
        self.awaiting_table = reinstating and self.p.table_transfer
        if not self.p.amo or self.awaiting_table:
            # at-most-once resends nothing, but a replica waiting for its table asks again
            # until it comes (its stand-in may be dead), or its input is held for ever
            out.append(Arm(RETRY, self.params.retry_every))
        if reinstating:
            # the request reaches the stand-in (routes resolve when a message is sent)
            self.stand_in = stand_in
            ask: Effect = (Tell(self.me, Reinstate(self.me)) if stand_in is None
                           else Reply(stand_in, Reinstate(self.me)))
            out += [ask, Reroute(self.me, self.me)]
        return out

    def on_timer(self, key: str, now: float) -> list[Effect]:
        if key == PING:
            pings, late = self.detector.tick(now, self.ring.ping_targets())
            out: list[Effect] = [Tell(self.slot(t), Ping(self.slot(t))) for t in pings]
            for d in late:
                out += self._suspect(d)
            return [*out, Arm(PING, self.params.ping_every)]
        if self.p.amo and not self.awaiting_table:
            return []  # at-most-once retries only the request for its table: it came
        out = []
        for uid, (dest, data) in self.unacked.items():  # N4: resend to the slot
            if uid not in self.fresh:
                out.append(Tell(dest, data))
        for uid, (origin, _slot) in self.fetching.items():
            if uid not in self.fresh:
                out.append(Tell(origin, Fetch(uid)))
        for uid, w in self.work.items():  # a record sync a dead colleague never confirmed
            if uid not in self.fresh:
                out += [Tell(c, RecordMsg(uid, w.origin, self.index)) for c in sorted(w.waiting)]
        if self.awaiting_table and self.stand_in is not None and self.stand_in != self.me:
            # the stand-in died before it answered: whoever hosts its slot now has the
            # same records (every colleague holds every record) and answers instead
            out.append(Tell(self.stand_in, Reinstate(self.me)))
        self.fresh.clear()
        return [*out, Arm(RETRY, self.params.retry_every)]

    def speaks_for(self, slot: Slot | None) -> bool:
        """Whether this unit speaks for ``slot`` (None: its own) now."""
        if slot is None:
            return True
        op, i = split_slot(slot)
        return op != self.op or i in self.ring.represents

    def host_of(self, i: int) -> HostId:
        return self.hosts.get(i, (self.slot(i), 0))

    def _suspect(self, d: int) -> list[Effect]:
        self.detector.clear(d)  # ping the slot afresh: its taker will answer
        if self.p.fence:  # the coordinator fences, then picks the taker
            return [Accuse(self.slot(d), self.host_of(d))]
        return [Tell(self.slot(self.ring.next_of(d)), Takeover(self.slot(d)))]

    # ------------------------------------------------------------ messages
    def on_message(self, sender: Slot, msg: Message, to: Slot | None = None) -> list[Effect]:
        """``to``: the slot a ``Data`` was addressed to (this unit may host several)."""
        if isinstance(msg, Data):
            return self.on_data(to or self.me, msg)
        if isinstance(msg, Ping):
            return [Reply(sender, Pong(msg.slot, (self.me, self.incarnation)))]
        if isinstance(msg, Pong | Hosted):
            i = split_slot(msg.slot)[1]
            self.hosts[i] = msg.host
            if isinstance(msg, Pong):
                self.detector.pong(i)
            return []
        if (isinstance(msg, RecordMsg | Purge) and not self.speaks_for(to)
                and not self.p.has("confirm-released")):
            # For a slot handed back to its reinstated replica: sent while the slot still
            # routed here, it came after the record table left. Confirmed here, the
            # record would be nowhere the replica looks when it takes over the emitter;
            # unconfirmed, the emitter sends it again to the slot, routed back by now. A
            # purge is sent once: pass it on.
            return [Tell(to, msg)] if isinstance(msg, Purge) and to is not None else []
        if isinstance(msg, RecordMsg) and msg.remark:
            self._remark(msg)
            return self._late_record(msg)
        if isinstance(msg, RecordMsg):
            # a purged uid recorded again is a new pass (at-least-once reprocesses a
            # resent tuple): pending again, or a taker would never fetch it
            held = self.records.get(msg.uid, msg.origin)
            self.records.insert(Record(msg.uid, msg.origin, msg.emitter),
                                replace=held is not None and held.state is RecordState.PURGED)
            return [Reply(sender, RecordOk(msg.uid, to or self.me)), *self._late_record(msg)]
        if isinstance(msg, RecordOk):
            return self._record_ok(msg.slot, msg.uid)
        if isinstance(msg, Ack):
            return self._acked(msg.uid)
        if isinstance(msg, Delete):
            return self._deleted(msg)
        if isinstance(msg, Purge):
            self.records.purge(msg.uid, msg.origin)
            return self._purged(msg.uid)
        if isinstance(msg, Takeover):
            return self.take_over(split_slot(msg.slot)[1])
        if isinstance(msg, Fetch):
            return self._fetch(sender, msg)
        if isinstance(msg, Refetch):
            return self._refetched(msg)
        if isinstance(msg, Reinstate):
            return self._reinstate(sender, split_slot(msg.slot)[1])
        if isinstance(msg, Table):
            self.stand_in = sender
            return self._install(msg)
        return []

    def on_data(self, slot: Slot, data: Data) -> list[Effect]:
        if self.awaiting_table:
            self.held.append((slot, data))
            return []
        uid = data.uid
        if not self.p.records:  # at-most-once (§5.4): process, send, forget
            return self._run(_Work(slot, data.payload, data.origin), uid)
        if uid in self.work:  # a resend of a tuple in progress here: it will be acked
            return []
        if self.p.dedup and self.records.knows(uid, data.origin):  # §5.6
            return [Reply(data.origin, Ack(uid)), *self._delete_when_purged(uid, data.origin)]
        out: list[Effect] = []
        if not self.p.ack_after_sync:
            out.append(Reply(data.origin, Ack(uid)))  # step (2) before the sync: flaw F1
        rec = Record(uid, data.origin, self.index)
        self.records.insert(rec)
        w = _Work(slot, data.payload, data.origin)
        self.work[uid] = w
        if not self.p.has("drop-records"):
            for c in self.colleagues():
                w.waiting.add(c)
                out.append(Tell(c, RecordMsg(uid, data.origin, self.index)))
            self.fresh.add(uid)
        if not w.waiting:
            out += self._synced(uid)
        return out

    def _record_ok(self, sender: Slot, uid: Hashable) -> list[Effect]:
        w = self.work.get(uid)
        if w is None or sender not in w.waiting:
            return []
        w.waiting.discard(sender)
        return self._synced(uid) if not w.waiting else []

    def _synced(self, uid: Hashable) -> list[Effect]:
        w = self.work[uid]
        out: list[Effect] = []
        if self.p.ack_after_sync:
            out.append(Reply(w.origin, Ack(uid)))
        return out + self._run(w, uid)

    def _run(self, w: _Work, uid: Hashable) -> list[Effect]:
        """Steps (6)-(7): process, keep each output, send it, await the next hop."""
        out: list[Effect] = []
        if self.p.has("purge-before-ack") and not self.p.amo:
            out += self._purge(uid, w.origin)
        for dest, ouid, payload in self.process(w.slot, uid, w.payload):
            data = Data(ouid, payload, self.me)
            out.append(Tell(dest, data))
            if self.p.amo:
                continue
            self.delivery.keep(ouid, (dest, payload))
            self.parent[ouid] = uid
            self.unacked[ouid] = (dest, data)
            self.fresh.add(ouid)
            w.outs.add(ouid)
        if not self.p.amo and not w.outs:  # nothing to wait for (a filter dropped it)
            out += self._finish(uid)
        return out

    def _acked(self, ouid: Hashable) -> list[Effect]:
        self.unacked.pop(ouid, None)
        if self.p.has("origin-drops-on-ack"):
            self.delivery.release(ouid)
        if self.p.purge_on_delete or self.p.has("purge-before-ack"):
            return []
        return self._next_hop_done(ouid)

    def _deleted(self, msg: Delete) -> list[Effect]:
        ouid = msg.uid
        if (self.fixed and self.stand_in is not None and not msg.passed
                and ouid not in self.parent and not self.delivery.holds(ouid)):
            # as a fetch: the tuple this slot's stand-in sent (or regenerated) and still
            # waits on; passed on once, so two units standing in for each other in turn
            # do not pass it round
            return [Tell(self.stand_in, Delete(ouid, passed=True))]
        self.unacked.pop(ouid, None)
        self.delivery.release(ouid)
        return self._next_hop_done(ouid) if self.p.purge_on_delete else []

    def _next_hop_done(self, ouid: Hashable) -> list[Effect]:
        uid = self.parent.get(ouid)
        w = self.work.get(uid) if uid is not None else None
        if w is None or ouid not in w.outs:
            return []
        w.outs.discard(ouid)
        return self._finish(uid) if not w.outs else []

    def _finish(self, uid: Hashable) -> list[Effect]:
        w = self.work.pop(uid)
        return self._purge(uid, w.origin)

    def _delete_when_purged(self, uid: Hashable, sender: Slot) -> list[Effect]:
        """A dropped copy's sender waits for a delete (F5 fix): send it once the tuple is
        purged here, whoever forwards it."""
        if not self.p.purge_on_delete:
            return []
        rec = self.records.get(uid, sender)
        if rec is not None and rec.state is RecordState.PURGED:
            return [Tell(sender, Delete(uid))]
        self.waiting_delete.setdefault(uid, set()).add(sender)
        return []

    def _purged(self, uid: Hashable) -> list[Effect]:
        return [Tell(w, Delete(uid)) for w in sorted(self.waiting_delete.pop(uid, ()))]

    def _purge(self, uid: Hashable, origin: Slot) -> list[Effect]:
        """Step (8): purge at every colleague and here; tell the origin it may delete."""
        out: list[Effect] = [Tell(self.slot(s), Purge(uid, origin))
                             for s in range(self.size) if s not in self.ring.represents]
        self.records.purge(uid, origin)
        out += self._purged(uid)
        if split_slot(origin)[0] not in self.sources:  # a source regenerates, keeps no copy
            out.append(Tell(origin, Delete(uid)))
        return out

    # ------------------------------------------------------------ takeover (§4.2, §5.3)
    def take_over(self, d: int) -> list[Effect]:
        if d in self.ring.represents:
            return []  # a repeated request
        self.ring.adopt(d)
        self.detector.clear(d)
        out: list[Effect] = [Host(self.slot(d))]
        if not self.p.has("no-route"):
            out.append(Reroute(self.slot(d), self.me))
        if self.p.amo or self.p.has("takeover-ignores-pending"):
            return out
        if self.awaiting_table:
            # a replica just restarted is asked to take its predecessor over before the
            # stand-in's record table came: the dead unit's pending records are in it
            self.adopted_early.append(d)
            return out
        return out + self._refetch_pending(d)

    def _refetch_pending(self, d: int) -> list[Effect]:
        """T3: re-fetch what the dead replica of slot ``d`` had in progress."""
        return [e for rec in self.records.pending_of(d) for e in self._refetch(rec, d)]

    def _refetch(self, rec: Record, d: int) -> list[Effect]:
        rec.emitter = self.index
        origin = str(rec.origin)
        self.fetching[rec.uid] = (origin, self.slot(d))
        self.fresh.add(rec.uid)
        out: list[Effect] = [Tell(origin, Fetch(rec.uid))]
        if self.fixed:
            # the record table is shared (§5.2): the colleagues' copies name this unit as
            # the emitter too, or a taker of this unit, should it die before the tuple is
            # done, finds the record under the dead slot's index, which may be back on
            # its reinstated replica by then, and re-fetches nothing
            out += [Tell(c, RecordMsg(rec.uid, origin, self.index, remark=True))
                    for c in self.colleagues()]
        return out

    def _remark(self, msg: RecordMsg) -> None:
        held = self.records.get(msg.uid, msg.origin)
        if held is None:
            self.records.insert(Record(msg.uid, msg.origin, msg.emitter))
        elif held.state is RecordState.PENDING:
            held.emitter = msg.emitter

    def _late_record(self, msg: RecordMsg) -> list[Effect]:
        """A record from a replica this unit has taken over, sent before it was stopped
        and come after the takeover re-fetched its pending records: in progress nowhere
        now, so it is re-fetched too (T3), or its origin waits for a delete for ever."""
        d = msg.emitter
        rec = self.records.get(msg.uid, msg.origin)
        if (d == self.index or d not in self.ring.represents or rec is None
                or rec.emitter != d or rec.state is not RecordState.PENDING
                or msg.uid in self.fetching or msg.uid in self.work or self.awaiting_table
                or self.p.amo or self.p.has("takeover-ignores-pending")):
            return []
        return self._refetch(rec, d)

    def _fetch(self, sender: Slot, msg: Fetch) -> list[Effect]:
        """An origin answers a taker: the tuple it still holds, or that it holds none."""
        ouid, asker = msg.uid, msg.asker or sender
        if self.delivery.holds(ouid):
            _dest, payload = self.delivery.get(ouid)
            return [Reply(asker, Refetch(ouid, payload))]
        if (self.fixed and not self.p.has("not-found-while-regenerating")
                and (self.fetching or self.records.pending_of(self.index))):
            return []  # maybe still being regenerated here (T5): the taker asks again
        if self.fixed and self.stand_in is not None and msg.asker is None:
            # a reinstated replica got the record table back, not the tuples its stand-in
            # sent (or is regenerating, T5) for this slot: those are the stand-in's to give
            return [Tell(self.stand_in, Fetch(ouid, asker=sender))]
        return [Reply(asker, Refetch(ouid, None, found=False))]

    def _refetched(self, msg: Refetch) -> list[Effect]:
        asked = self.fetching.pop(msg.uid, None)
        if asked is None or not msg.found:
            return []  # the copy died with its origin (F5 outside the fix): lost
        # D6: a replay bypasses the exactly-once check (its own record is in the table)
        if self.p.has("replay-through-dedup") and self.p.dedup:
            return []
        origin, slot = asked
        if msg.uid in self.work:
            # the tuple came in meanwhile from another origin (a reinstated replica
            # reprocessing its input): it is in progress here already, and a second pass
            # would forget that origin, which would wait for its delete for ever. The
            # fetched copy's origin is told too once the tuple is purged.
            if origin != self.work[msg.uid].origin:
                self.waiting_delete.setdefault(msg.uid, set()).add(origin)
            return []
        w = _Work(slot, msg.payload, origin)
        self.work[msg.uid] = w
        return self._run(w, msg.uid)

    # ------------------------------------------------------------ reinstatement (§4.3)
    def _reinstate(self, sender: Slot, d: int) -> list[Effect]:
        if not self.p.has("reinstate-keeps-index"):
            self.ring.release(d)
        self.detector.clear(d)
        out: list[Effect] = [Unhost(self.slot(d))] if d != self.index else []
        if not self.p.table_transfer:
            return out
        rows = tuple((r.uid, r.origin, r.emitter, r.state is RecordState.PURGED)
                     for r in self.records)
        return [*out, Reply(sender, Table(self.slot(d), rows))]

    def _install(self, msg: Table) -> list[Effect]:
        for uid, origin, emitter, purged in msg.records:
            state = RecordState.PURGED if purged else RecordState.PENDING
            self.records.insert(Record(uid, origin, emitter, state), replace=False)
        self.awaiting_table = False
        out: list[Effect] = []
        for d in self.adopted_early:
            out += self._refetch_pending(d)
        self.adopted_early.clear()
        held, self.held = self.held, []
        for slot, data in held:  # only now are they checked against the table (fix of F4)
            out += self.on_data(slot, data)
        return out


class SourceUnit:
    """A source slot: an origin only. It regenerates any tuple from its offset (§5.3)."""

    def __init__(self, slot: Slot, params: ReplicaRingParams,
                 generate: Callable[[Hashable], tuple[Slot, Any]]):
        self.me = slot
        self.params = params
        self.amo = params.policy().amo
        self.generate = generate  # uid -> (dest slot, payload), a pure function of the uid
        self.unacked: dict[Hashable, Slot] = {}
        self.fresh: set[Hashable] = set()  # sent since the last retry tick

    def start(self) -> list[Effect]:
        return [] if self.amo else [Arm(RETRY, self.params.retry_every)]

    def emit(self, uid: Hashable) -> list[Effect]:
        dest, payload = self.generate(uid)
        if not self.amo:
            self.unacked[uid] = dest
            self.fresh.add(uid)
        return [Tell(dest, Data(uid, payload, self.me))]

    def on_message(self, sender: Slot, msg: Message) -> list[Effect]:
        if isinstance(msg, Ack | Delete):  # a delete implies the ack that may have died
            self.unacked.pop(msg.uid, None)
            self.fresh.discard(msg.uid)
        elif isinstance(msg, Fetch):
            return [Reply(sender, Refetch(msg.uid, self.generate(msg.uid)[1]))]
        return []

    def on_timer(self, key: str, now: float) -> list[Effect]:
        out: list[Effect] = []
        for uid, dest in self.unacked.items():
            if uid not in self.fresh:
                out.append(Tell(dest, Data(uid, self.generate(uid)[1], self.me)))
        self.fresh.clear()
        return [*out, Arm(RETRY, self.params.retry_every)]


class SinkUnit:
    """The last hop: acks, emits, and in the fixed variant emits a uid once (F3), then
    tells the sender it may delete (N5)."""

    def __init__(self, slot: Slot, params: ReplicaRingParams,
                 mutants: frozenset[str] = frozenset()):
        self.me = slot
        self.p = params.policy(mutants)
        self.fixed = params.variant is Variant.FIXED
        self.seen: set[Hashable] = set()

    def on_message(self, sender: Slot, msg: Message) -> list[Effect]:
        if not isinstance(msg, Data):
            return []
        if self.p.amo:
            return [Output(msg.uid, msg.payload)]
        out: list[Effect] = [Reply(msg.origin, Ack(msg.uid))]
        if not (self.p.idempotent_sink and msg.uid in self.seen):
            out.append(Output(msg.uid, msg.payload))
        self.seen.add(msg.uid)
        if self.fixed:
            out.append(Tell(msg.origin, Delete(msg.uid)))
        return out
